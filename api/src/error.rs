//! The one error type of the HTTP edge, written as `application/problem+json`
//! (RFC 9457). Problem `type`s are stable relative URIs, listed in the README.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use domain::FieldError;
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
    /// A webhook whose signature is missing, malformed, stale or wrong; the
    /// reason is a stable label (`SignatureError::reason`), never a secret.
    #[error("webhook signature rejected: {0}")]
    InvalidSignature(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the database is unavailable")]
    Unavailable,
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
            Self::Unavailable => ("unavailable", "Service unavailable"),
            Self::Internal(_) => ("internal", "Internal server error"),
        }
    }
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [FieldError]>,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::MalformedBody(_) => StatusCode::BAD_REQUEST,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Unauthorized | Self::InvalidSignature(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if let Self::Internal(cause) = self {
            tracing::error!(error = %cause, "request failed");
        }
        let (slug, title) = self.kind();
        let problem = Problem {
            kind: format!("/problems/{slug}"),
            title,
            status: status.as_u16(),
            detail: self.to_string(),
            errors: match self {
                Self::Validation(fields) => Some(fields),
                _ => None,
            },
        };
        let mut response = HttpResponse::build(status);
        response.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
        if matches!(self, Self::Unauthorized) {
            response.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if matches!(self, Self::Unavailable) {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from_static("1")));
        }
        response.json(problem)
    }
}

impl From<domain::Error> for ApiError {
    fn from(err: domain::Error) -> Self {
        match err {
            domain::Error::Invalid(fields) => Self::Validation(fields),
            domain::Error::NotFound => Self::NotFound("no such resource".into()),
            domain::Error::Conflict(msg) => Self::Conflict(msg),
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
