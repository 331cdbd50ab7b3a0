//! The one error type of the HTTP edge, written as `application/problem+json`
//! (RFC 9457). Problem `type`s are stable relative URIs, listed in the README.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use domain::FieldError;
use domain::lead::status::TransitionError;
use serde::Serialize;

pub const PROBLEM_JSON: &str = "application/problem+json";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    MalformedBody(String),
    #[error("expected Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("the request has invalid fields")]
    Validation(Vec<FieldError>),
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// A webhook whose source is unknown, or whose signature is missing,
    /// malformed, stale or wrong. The reason is a stable label for logs and
    /// metrics only: the answer is the same for every reason, so a caller
    /// cannot tell which source names exist.
    #[error("the webhook signature could not be verified")]
    InvalidSignature(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("cannot move a lead from '{from}' to '{to}'")]
    IllegalTransition {
        from: String,
        to: String,
        allowed: Vec<String>,
    },
    #[error("cannot move a deal from '{from}' to '{to}'")]
    IllegalStageMove {
        from: String,
        to: String,
        allowed: Vec<String>,
    },
    /// Names the earlier conversion (`conversion` member of the problem).
    #[error("lead {lead_id} was already converted; see `conversion`")]
    AlreadyConverted {
        lead_id: i64,
        conversion: serde_json::Value,
    },
    /// A reconcile of this source is running; `run_id` names it.
    #[error("{message}")]
    ReconcileRunning { run_id: i64, message: String },
    #[error("expected Content-Type: text/csv or application/x-ndjson")]
    UnsupportedImportType,
    #[error("the lead is at version {current}; fetch it again and retry with its ETag")]
    PreconditionFailed { current: i64 },
    #[error("this request needs an Idempotency-Key header")]
    IdempotencyKeyMissing,
    #[error("the Idempotency-Key header {0}")]
    IdempotencyKeyInvalid(&'static str),
    #[error("a request with this Idempotency-Key is still being processed; retry later")]
    IdempotencyKeyInFlight,
    #[error("this Idempotency-Key was used for another request ({method} {path})")]
    IdempotencyKeyReused { method: String, path: String },
    /// A rate limit: `what` says which, `retry_after` in whole seconds.
    #[error("too many {what}; retry after {retry_after} seconds")]
    TooManyRequests {
        what: &'static str,
        retry_after: u64,
    },
    #[error("the database is unavailable")]
    Unavailable,
    /// Storing a secret needs a sealing key, and none is configured.
    #[error(
        "secrets cannot be stored: no secret key is configured. Set LEADPIPE_SECRET_KEY \
         (or LEADPIPE_SECRET_KEY_FILE) on the server, or LEADPIPE_INSECURE_DEV_SECRETS=1 for \
         a development setup without confidentiality"
    )]
    SecretKeyMissing,
    /// The cause is logged, never sent to the client.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::Internal(cause.to_string())
    }

    /// Stable problem type and its short title.
    fn kind(&self) -> (&'static str, &'static str) {
        match self {
            Self::MalformedBody(_) => ("malformed-body", "Malformed request body"),
            Self::UnsupportedMediaType => ("unsupported-media-type", "Unsupported media type"),
            Self::PayloadTooLarge { .. } => ("payload-too-large", "Request body too large"),
            Self::Validation(_) => ("validation", "Validation failed"),
            Self::Unauthorized => ("unauthorized", "Unauthorized"),
            Self::InvalidSignature(_) => ("invalid-signature", "Invalid webhook signature"),
            Self::Forbidden(_) => ("forbidden", "Forbidden"),
            Self::NotFound(_) => ("not-found", "Not found"),
            Self::Conflict(_) => ("conflict", "Conflict"),
            Self::ReconcileRunning { .. } => ("reconcile-running", "Reconcile already running"),
            Self::IllegalTransition { .. } => ("illegal-transition", "Illegal status transition"),
            Self::IllegalStageMove { .. } => ("illegal-transition", "Illegal stage move"),
            Self::AlreadyConverted { .. } => ("already-converted", "Lead already converted"),
            Self::UnsupportedImportType => ("unsupported-media-type", "Unsupported media type"),
            Self::PreconditionFailed { .. } => ("precondition-failed", "Precondition failed"),
            Self::IdempotencyKeyMissing => ("idempotency-key-missing", "Idempotency-Key required"),
            Self::IdempotencyKeyInvalid(_) => {
                ("idempotency-key-invalid", "Invalid Idempotency-Key")
            }
            Self::IdempotencyKeyInFlight => ("idempotency-key-in-flight", "Request in progress"),
            Self::IdempotencyKeyReused { .. } => (
                "idempotency-key-reused",
                "Idempotency-Key reused for another request",
            ),
            Self::TooManyRequests { .. } => ("too-many-requests", "Too many requests"),
            Self::Unavailable => ("unavailable", "Service unavailable"),
            Self::SecretKeyMissing => ("secret-key-missing", "Secret key not configured"),
            Self::Internal(_) => ("internal", "Internal server error"),
        }
    }
}

/// An RFC 9457 problem (`application/problem+json`); its OpenAPI schema too.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Problem<'a> {
    /// A stable problem type URI (relative), e.g. `/problems/validation`.
    #[serde(rename = "type")]
    #[schema(value_type = crate::routes::openapi::ProblemType)]
    kind: String,
    /// A short summary of the problem type.
    #[schema(value_type = String)]
    title: &'a str,
    /// The HTTP status code.
    status: u16,
    /// What went wrong with this request, for people.
    detail: String,
    /// `validation`: one entry per invalid field.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<FieldError>>)]
    errors: Option<&'a [FieldError]>,
    /// Extension member of `illegal-transition`: where the lead may go.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<String>>)]
    allowed: Option<&'a [String]>,
    /// Extension member of `precondition-failed`: the version to retry with.
    #[serde(skip_serializing_if = "Option::is_none")]
    current_version: Option<i64>,
    /// Extension member of `already-converted`: the earlier conversion's
    /// `lead_id`, `contact_id`, `company_id` and `deal_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    conversion: Option<&'a serde_json::Value>,
    /// Extension member of `reconcile-running`: the running run's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<i64>,
}

impl ApiError {
    pub fn status_code_u16(&self) -> u16 {
        self.status_code().as_u16()
    }

    /// The RFC 9457 body, also what an idempotent request stores for replay.
    pub fn problem_body(&self) -> String {
        let (slug, title) = self.kind();
        let problem = Problem {
            kind: format!("/problems/{slug}"),
            title,
            status: self.status_code().as_u16(),
            detail: self.to_string(),
            errors: match self {
                Self::Validation(fields) => Some(fields),
                _ => None,
            },
            allowed: match self {
                Self::IllegalTransition { allowed, .. }
                | Self::IllegalStageMove { allowed, .. } => Some(allowed),
                _ => None,
            },
            current_version: match self {
                Self::PreconditionFailed { current } => Some(*current),
                _ => None,
            },
            conversion: match self {
                Self::AlreadyConverted { conversion, .. } => Some(conversion),
                _ => None,
            },
            run_id: match self {
                Self::ReconcileRunning { run_id, .. } => Some(*run_id),
                _ => None,
            },
        };
        serde_json::to_string(&problem).unwrap_or_default()
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::MalformedBody(_) => StatusCode::BAD_REQUEST,
            Self::UnsupportedMediaType | Self::UnsupportedImportType => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            Self::IllegalStageMove { .. }
            | Self::AlreadyConverted { .. }
            | Self::ReconcileRunning { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Unauthorized | Self::InvalidSignature(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) | Self::IllegalTransition { .. } | Self::IdempotencyKeyInFlight => {
                StatusCode::CONFLICT
            }
            Self::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
            Self::IdempotencyKeyMissing | Self::IdempotencyKeyInvalid(_) => StatusCode::BAD_REQUEST,
            Self::IdempotencyKeyReused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable | Self::SecretKeyMissing => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if let Self::Internal(cause) = self {
            tracing::error!(error = %cause, "request failed");
        }
        let mut response = HttpResponse::build(status);
        response.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
        if matches!(self, Self::Unauthorized) {
            response.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if matches!(self, Self::Unavailable | Self::IdempotencyKeyInFlight) {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from_static("1")));
        }
        if let Self::TooManyRequests { retry_after, .. } = self {
            response.insert_header((header::RETRY_AFTER, retry_after.to_string()));
        }
        response.body(self.problem_body())
    }
}

impl From<domain::Error> for ApiError {
    fn from(err: domain::Error) -> Self {
        match err {
            domain::Error::Invalid(fields) => Self::Validation(fields),
            domain::Error::NotFound => Self::NotFound("no such resource".into()),
            domain::Error::Conflict(msg) => Self::Conflict(msg),
            domain::Error::IllegalTransition(TransitionError::Illegal { from, to, allowed }) => {
                Self::IllegalTransition {
                    from: from.to_string(),
                    to: to.to_string(),
                    allowed: allowed.iter().map(ToString::to_string).collect(),
                }
            }
            domain::Error::IllegalTransition(TransitionError::ReasonRequired) => {
                Self::Validation(vec![FieldError::new(
                    "reason",
                    "is required when moving to 'lost'",
                )])
            }
            domain::Error::PreconditionFailed { current } => Self::PreconditionFailed { current },
            domain::Error::IllegalStageMove(m) => Self::IllegalStageMove {
                from: m.from.to_string(),
                to: m.to.to_string(),
                allowed: m.allowed.iter().map(ToString::to_string).collect(),
            },
            domain::Error::AlreadyConverted(conversion) => Self::AlreadyConverted {
                lead_id: conversion.lead_id,
                conversion: serde_json::to_value(&*conversion).unwrap_or_default(),
            },
            domain::Error::Sealed(domain::sealed::SealError::NoKey) => Self::SecretKeyMissing,
            domain::Error::Sealed(other) => Self::internal(other),
            domain::Error::Db(db) => db.into(),
        }
    }
}

impl From<sea_orm::DbErr> for ApiError {
    fn from(err: sea_orm::DbErr) -> Self {
        if domain::error::is_transient_db(&err) {
            tracing::warn!(error = %err, "database unavailable");
            Self::Unavailable
        } else {
            Self::internal(err)
        }
    }
}
