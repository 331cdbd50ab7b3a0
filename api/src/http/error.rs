//! The one error type of the HTTP edge, written as `application/problem+json`
//! (RFC 9457). Problem `type`s are stable relative URIs; [`PROBLEMS`] is
//! their one catalogue, from which the OpenAPI description and
//! `docs/guide/errors.md` are generated.

use std::borrow::Cow;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use domain::FieldError;
use domain::lifecycle::lead_status::TransitionError;
use serde::Serialize;
use utoipa::openapi::{ObjectBuilder, RefOr, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::wire::leads::LeadConversionOut;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// A problem type of the API: one row of [`PROBLEMS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    MalformedBody,
    IdempotencyKeyMissing,
    IdempotencyKeyInvalid,
    Unauthorized,
    TokenExpired,
    InvalidSignature,
    Forbidden,
    CsrfTokenInvalid,
    NotFound,
    MethodNotAllowed,
    BodyTimeout,
    ReconcileRunning,
    Conflict,
    IllegalTransition,
    AlreadyConverted,
    LeadMerged,
    IdempotencyKeyInFlight,
    InboxEventErased,
    PreconditionFailed,
    PayloadTooLarge,
    UnsupportedMediaType,
    Validation,
    IdempotencyKeyReused,
    TooManyRequests,
    Internal,
    Unavailable,
    SecretKeyMissing,
    InboxBacklogFull,
}

/// One problem type: its `type` URI is `/problems/{slug}`.
#[derive(Debug)]
pub struct ProblemInfo {
    pub kind: ProblemKind,
    pub slug: &'static str,
    pub title: &'static str,
    pub status: u16,
    /// When it is answered, for the docs and the OpenAPI description.
    pub description: &'static str,
}

const fn problem(
    kind: ProblemKind,
    slug: &'static str,
    title: &'static str,
    status: u16,
    description: &'static str,
) -> ProblemInfo {
    ProblemInfo {
        kind,
        slug,
        title,
        status,
        description,
    }
}

/// The problem catalogue: every problem `type` the API answers with, in
/// [`ProblemKind`]'s order. `ApiError`'s `type`, `title` and status, the
/// OpenAPI `ProblemType` enum and error table, and the table in
/// `docs/guide/errors.md` all come from here.
pub const PROBLEMS: &[ProblemInfo] = &[
    problem(
        ProblemKind::MalformedBody,
        "malformed-body",
        "Malformed request body",
        400,
        "the body is not well-formed JSON (or could not be read)",
    ),
    problem(
        ProblemKind::IdempotencyKeyMissing,
        "idempotency-key-missing",
        "Idempotency-Key required",
        400,
        "this write requires an `Idempotency-Key`",
    ),
    problem(
        ProblemKind::IdempotencyKeyInvalid,
        "idempotency-key-invalid",
        "Invalid Idempotency-Key",
        400,
        "the key is empty, longer than 255 characters or not printable ASCII",
    ),
    problem(
        ProblemKind::Unauthorized,
        "unauthorized",
        "Unauthorized",
        401,
        "missing, unknown or revoked bearer token, an unknown or ended session, or (`POST /api/session`) a wrong email or password (with `WWW-Authenticate: Bearer`)",
    ),
    problem(
        ProblemKind::TokenExpired,
        "token-expired",
        "Token expired",
        401,
        "the bearer token is past its expiry (with `WWW-Authenticate: Bearer`): rotate it (`leadpipe token rotate`, `POST /api/tokens/{id}/rotate`) or create another",
    ),
    problem(
        ProblemKind::InvalidSignature,
        "invalid-signature",
        "Invalid webhook signature",
        401,
        "a webhook's source is unknown, or its signature is missing, malformed, outside the time tolerance or wrong (one answer for all)",
    ),
    problem(
        ProblemKind::Forbidden,
        "forbidden",
        "Forbidden",
        403,
        "the token's role (or source) may not do this",
    ),
    problem(
        ProblemKind::CsrfTokenInvalid,
        "csrf-token-invalid",
        "CSRF token missing or wrong",
        403,
        "a write authenticated by the session cookie without the session's `X-CSRF-Token` (from `GET /api/session`)",
    ),
    problem(
        ProblemKind::NotFound,
        "not-found",
        "Not found",
        404,
        "no such resource or route (or a path parameter does not parse)",
    ),
    problem(
        ProblemKind::MethodNotAllowed,
        "method-not-allowed",
        "Method not allowed",
        405,
        "the path exists but not with this method; `Allow` lists its methods",
    ),
    problem(
        ProblemKind::BodyTimeout,
        "body-timeout",
        "Request body too slow",
        408,
        "the body did not arrive in time (`LEADPIPE_BODY_TIMEOUT_SECS`, then `LEADPIPE_BODY_MIN_RATE` bytes a second); nothing was stored and the connection is closed",
    ),
    problem(
        ProblemKind::ReconcileRunning,
        "reconcile-running",
        "Reconcile already running",
        409,
        "a reconcile of this source is already running; `run_id` names it",
    ),
    problem(
        ProblemKind::Conflict,
        "conflict",
        "Conflict",
        409,
        "the request conflicts with the stored state (e.g. retrying an event that is already waiting)",
    ),
    problem(
        ProblemKind::IllegalTransition,
        "illegal-transition",
        "Illegal transition",
        409,
        "the lead status machine or the deal stage machine forbids the move; `allowed` lists the legal targets",
    ),
    problem(
        ProblemKind::AlreadyConverted,
        "already-converted",
        "Lead already converted",
        409,
        "the lead was converted before (by another request); `conversion` names its `lead_id`, `contact_id`, `company_id` and `deal_id`",
    ),
    problem(
        ProblemKind::LeadMerged,
        "lead-merged",
        "Lead merged",
        409,
        "the lead was merged into another; `survivor_id` names the lead that takes its writes (reads of it answer `308` to the survivor)",
    ),
    problem(
        ProblemKind::IdempotencyKeyInFlight,
        "idempotency-key-in-flight",
        "Request in progress",
        409,
        "a request with this key is still running; retry after `Retry-After`",
    ),
    problem(
        ProblemKind::InboxEventErased,
        "inbox-event-erased",
        "Inbox event erased",
        409,
        "retrying an inbox event whose body was erased (with the person it was about, or at the end of its retention): nothing is left to process, and the event is left as it is",
    ),
    problem(
        ProblemKind::PreconditionFailed,
        "precondition-failed",
        "Precondition failed",
        412,
        "`If-Match` names no current version (an old version, or a weak, opaque or malformed tag); `current_version` is the current one",
    ),
    problem(
        ProblemKind::PayloadTooLarge,
        "payload-too-large",
        "Request body too large",
        413,
        "the body is larger than the configured limit (`LEADPIPE_MAX_BODY_BYTES`; imports: `LEADPIPE_IMPORT_MAX_BYTES`)",
    ),
    problem(
        ProblemKind::UnsupportedMediaType,
        "unsupported-media-type",
        "Unsupported media type",
        415,
        "`Content-Type` is not JSON (for `POST /api/imports`: not `text/csv` or `application/x-ndjson`)",
    ),
    problem(
        ProblemKind::Validation,
        "validation",
        "Validation failed",
        422,
        "well-formed JSON with invalid or mistyped fields, or bad query parameters; `errors` names each field",
    ),
    problem(
        ProblemKind::IdempotencyKeyReused,
        "idempotency-key-reused",
        "Idempotency-Key reused for another request",
        422,
        "the key was used before for another request",
    ),
    problem(
        ProblemKind::TooManyRequests,
        "too-many-requests",
        "Too many requests",
        429,
        "a rate limit: failed authentications from one client address — bad tokens or session cookies, webhook signatures that do not verify, and sign-in attempts (`LEADPIPE_AUTH_FAIL_PER_MINUTE`; a valid token or signature is never limited) — or verified webhook deliveries to one source (`LEADPIPE_WEBHOOK_RATE`); retry after `Retry-After`",
    ),
    problem(
        ProblemKind::Internal,
        "internal",
        "Internal server error",
        500,
        "a bug; the cause is logged, never returned",
    ),
    problem(
        ProblemKind::Unavailable,
        "unavailable",
        "Service unavailable",
        503,
        "the database is unreachable (from `/readyz` within 2 s, `detail` naming the host and port tried and why: connection refused, unknown host, authentication failed), or (`/readyz`) a stored secret does not open with the configured keys; retry after `Retry-After`",
    ),
    problem(
        ProblemKind::SecretKeyMissing,
        "secret-key-missing",
        "Secret key not configured",
        503,
        "a secret would be stored, but the server has no sealing key (`LEADPIPE_SECRET_KEY`)",
    ),
    problem(
        ProblemKind::InboxBacklogFull,
        "inbox-backlog-full",
        "Inbox backlog full",
        503,
        "webhook deliveries arrive faster than the workers process them: the unprocessed inbox backlog is at `LEADPIPE_INBOX_BACKLOG_LIMIT`; nothing was stored, retry after `Retry-After`",
    ),
];

// Every kind's row is at its own index, so `info` is a plain lookup.
const _: () = {
    let mut i = 0;
    while i < PROBLEMS.len() {
        assert!(
            PROBLEMS[i].kind as usize == i,
            "PROBLEMS is out of ProblemKind's order"
        );
        assert!(
            i == 0 || PROBLEMS[i - 1].status <= PROBLEMS[i].status,
            "PROBLEMS is sorted by status"
        );
        i += 1;
    }
    assert!(ProblemKind::InboxBacklogFull as usize == PROBLEMS.len() - 1);
};

impl ProblemKind {
    pub fn info(self) -> &'static ProblemInfo {
        &PROBLEMS[self as usize]
    }

    /// The `type` URI: `/problems/{slug}`.
    pub fn type_uri(self) -> String {
        format!("/problems/{}", self.info().slug)
    }
}

/// The catalogue as the markdown table of `docs/guide/errors.md` (and of the
/// OpenAPI description): one row per problem type and title.
pub fn problem_table_markdown() -> String {
    let mut text = String::from("| status | `type` | `title` | when |\n|---|---|---|---|\n");
    for p in PROBLEMS {
        text.push_str(&format!(
            "| {} | `/problems/{}` | {} | {} |\n",
            p.status, p.slug, p.title, p.description
        ));
    }
    text
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    MalformedBody(String),
    #[error("expected Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The body arrived slower than the [`crate::http::body::BodyPace`].
    #[error(
        "the request body did not arrive in time: after {received} bytes in {elapsed_secs:.1} seconds; a body must arrive within {grace_secs:.1} seconds plus 1 second for every {min_rate} bytes"
    )]
    BodyTimeout {
        received: usize,
        elapsed_secs: f64,
        grace_secs: f64,
        min_rate: u64,
    },
    #[error("the request has invalid fields")]
    Validation(Vec<FieldError>),
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// A bearer token of ours, past its expiry.
    #[error("the bearer token has expired; rotate it or create another")]
    TokenExpired,
    /// `POST /api/session`: one answer whether the email or the password
    /// was wrong, or the user disabled.
    #[error("wrong email or password")]
    SignInFailed,
    /// A cookie-authenticated write without its session's CSRF token.
    #[error("this write needs the session's CSRF token in X-CSRF-Token (see GET /api/session)")]
    CsrfTokenInvalid,
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
    /// A known path asked with a method it is not served with; `allow` is
    /// the `Allow` header's value.
    #[error("{method} is not allowed on this path; allowed: {allow}")]
    MethodNotAllowed { method: String, allow: String },
    #[error("{0}")]
    Conflict(String),
    /// Carries the domain's explanation of why the event cannot be retried.
    #[error("{0}")]
    InboxEventErased(String),
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
    /// The lead was merged; `survivor_id` takes its writes.
    #[error("lead {lead_id} was merged into lead {survivor_id}; write to that lead instead")]
    LeadMerged { lead_id: i64, survivor_id: i64 },
    /// A reconcile of this source is running; `run_id` names it.
    #[error("{message}")]
    ReconcileRunning { run_id: i64, message: String },
    #[error("expected Content-Type: text/csv or application/x-ndjson")]
    UnsupportedImportType,
    #[error("this record is at version {current}; fetch it again and retry with its ETag")]
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
    #[error("too many {what}; retry after {}", counted(*.retry_after, "second"))]
    TooManyRequests {
        what: &'static str,
        retry_after: u64,
    },
    #[error("the database is unavailable")]
    Unavailable,
    /// `/readyz`: where the database was tried (never the password) and why
    /// it did not answer.
    #[error("{0}")]
    DatabaseUnreachable(String),
    /// `/readyz`: a stored secret does not open with the configured keys.
    #[error(
        "not ready: a stored secret does not open with the configured keys (the server log \
         names the key id)"
    )]
    KeysDoNotOpen,
    /// Storing a secret needs a sealing key, and none is configured.
    #[error(
        "secrets cannot be stored: no secret key is configured. Set LEADPIPE_SECRET_KEY \
         (or LEADPIPE_SECRET_KEY_FILE) on the server, or LEADPIPE_INSECURE_DEV_SECRETS=1 for \
         a development setup without confidentiality"
    )]
    SecretKeyMissing,
    /// Admission control: the inbox backlog is at its limit.
    #[error(
        "the inbox holds {} (limit {limit}); nothing was stored, retry after {}",
        counted(*.backlog, "unprocessed event"),
        counted(*.retry_after, "second")
    )]
    InboxBacklogFull {
        backlog: u64,
        limit: u64,
        retry_after: u64,
    },
    /// The cause is logged, never sent to the client.
    #[error("internal error")]
    Internal(String),
}

/// `1 second`, `2 seconds`: a count with its noun, for problem details.
fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

impl ApiError {
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::Internal(cause.to_string())
    }

    /// `422` naming one field.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::Validation(vec![domain::FieldError::new(field, message)])
    }

    /// Its row of the problem catalogue: `type`, `title` and status.
    pub fn problem_kind(&self) -> ProblemKind {
        match self {
            Self::MalformedBody(_) => ProblemKind::MalformedBody,
            Self::UnsupportedMediaType | Self::UnsupportedImportType => {
                ProblemKind::UnsupportedMediaType
            }
            Self::PayloadTooLarge { .. } => ProblemKind::PayloadTooLarge,
            Self::BodyTimeout { .. } => ProblemKind::BodyTimeout,
            Self::Validation(_) => ProblemKind::Validation,
            Self::Unauthorized | Self::SignInFailed => ProblemKind::Unauthorized,
            Self::CsrfTokenInvalid => ProblemKind::CsrfTokenInvalid,
            Self::TokenExpired => ProblemKind::TokenExpired,
            Self::InvalidSignature(_) => ProblemKind::InvalidSignature,
            Self::Forbidden(_) => ProblemKind::Forbidden,
            Self::NotFound(_) => ProblemKind::NotFound,
            Self::MethodNotAllowed { .. } => ProblemKind::MethodNotAllowed,
            Self::Conflict(_) => ProblemKind::Conflict,
            Self::InboxEventErased(_) => ProblemKind::InboxEventErased,
            Self::ReconcileRunning { .. } => ProblemKind::ReconcileRunning,
            Self::IllegalTransition { .. } => ProblemKind::IllegalTransition,
            Self::IllegalStageMove { .. } => ProblemKind::IllegalTransition,
            Self::AlreadyConverted { .. } => ProblemKind::AlreadyConverted,
            Self::LeadMerged { .. } => ProblemKind::LeadMerged,
            Self::PreconditionFailed { .. } => ProblemKind::PreconditionFailed,
            Self::IdempotencyKeyMissing => ProblemKind::IdempotencyKeyMissing,
            Self::IdempotencyKeyInvalid(_) => ProblemKind::IdempotencyKeyInvalid,
            Self::IdempotencyKeyInFlight => ProblemKind::IdempotencyKeyInFlight,
            Self::IdempotencyKeyReused { .. } => ProblemKind::IdempotencyKeyReused,
            Self::TooManyRequests { .. } => ProblemKind::TooManyRequests,
            Self::Unavailable | Self::DatabaseUnreachable(_) | Self::KeysDoNotOpen => {
                ProblemKind::Unavailable
            }
            Self::SecretKeyMissing => ProblemKind::SecretKeyMissing,
            Self::InboxBacklogFull { .. } => ProblemKind::InboxBacklogFull,
            Self::Internal(_) => ProblemKind::Internal,
        }
    }
}

/// An RFC 9457 problem (`application/problem+json`); its OpenAPI schema too.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Problem<'a> {
    /// A stable problem type URI (relative), e.g. `/problems/validation`.
    #[serde(rename = "type")]
    #[schema(value_type = ProblemType)]
    kind: String,
    /// A short summary of the problem type.
    #[schema(value_type = String)]
    title: &'static str,
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
    /// Extension member of `lead-merged`: the lead it was merged into.
    #[serde(skip_serializing_if = "Option::is_none")]
    survivor_id: Option<i64>,
}

impl ApiError {
    pub fn status_code_u16(&self) -> u16 {
        self.status_code().as_u16()
    }

    /// The RFC 9457 body, also what an idempotent request stores for replay.
    pub fn problem_body(&self) -> String {
        let kind = self.problem_kind();
        let problem = Problem {
            kind: kind.type_uri(),
            title: kind.info().title,
            status: kind.info().status,
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
            survivor_id: match self {
                Self::LeadMerged { survivor_id, .. } => Some(*survivor_id),
                _ => None,
            },
        };
        serde_json::to_string(&problem).unwrap_or_default()
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.problem_kind().info().status)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if let Self::Internal(cause) = self {
            tracing::error!(error = %cause, "request failed");
        }
        let mut response = HttpResponse::build(status);
        response.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
        if matches!(self, Self::Unauthorized | Self::TokenExpired) {
            response.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if matches!(
            self,
            Self::Unavailable
                | Self::DatabaseUnreachable(_)
                | Self::KeysDoNotOpen
                | Self::IdempotencyKeyInFlight
        ) {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from_static("1")));
        }
        if matches!(self, Self::BodyTimeout { .. }) {
            // The rest of the body may still come: the connection cannot be
            // reused (RFC 9110 §15.5.9).
            response.force_close();
        }
        if let Self::MethodNotAllowed { allow, .. } = self {
            response.insert_header((header::ALLOW, allow.clone()));
        }
        if let Self::TooManyRequests { retry_after, .. }
        | Self::InboxBacklogFull { retry_after, .. } = self
        {
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
            domain::Error::Forbidden(msg) => Self::Forbidden(msg),
            erased @ domain::Error::InboxEventErased { .. } => {
                Self::InboxEventErased(erased.to_string())
            }
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
                conversion: serde_json::to_value(LeadConversionOut::from(*conversion))
                    .unwrap_or_default(),
            },
            domain::Error::LeadMerged {
                lead_id,
                survivor_id,
            } => Self::LeadMerged {
                lead_id,
                survivor_id,
            },
            domain::Error::Sealed(domain::sealed::SealError::NoKey) => Self::SecretKeyMissing,
            domain::Error::Sealed(other) => Self::internal(other),
            domain::Error::KeyMismatch(mismatch) => Self::internal(mismatch),
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

/// The catalogue as the README's compact table: one row per status.
pub fn problem_table_compact_markdown() -> String {
    let mut text = String::from("| status | `type` |\n|---|---|\n");
    let mut statuses: Vec<u16> = PROBLEMS.iter().map(|p| p.status).collect();
    statuses.dedup();
    for status in statuses {
        let mut uris: Vec<String> = Vec::new();
        for p in PROBLEMS.iter().filter(|p| p.status == status) {
            let uri = format!("`/problems/{}`", p.slug);
            if !uris.contains(&uri) {
                uris.push(uri);
            }
        }
        text.push_str(&format!("| {status} | {} |\n", uris.join(", ")));
    }
    text
}

/// The problem `type` URIs as a string enum.
pub struct ProblemType;

impl PartialSchema for ProblemType {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A stable problem type URI (relative); see the API description for when each occurs.",
            ))
            .enum_values(Some(problem_type_uris()))
            .into()
    }
}

/// Every `type` URI of the catalogue once, in its order.
fn problem_type_uris() -> Vec<String> {
    let mut uris: Vec<String> = Vec::new();
    for p in PROBLEMS {
        let uri = format!("/problems/{}", p.slug);
        if !uris.contains(&uri) {
            uris.push(uri);
        }
    }
    uris
}

impl ToSchema for ProblemType {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ProblemType")
    }
}

#[cfg(test)]
mod tests {
    use super::ApiError;

    #[test]
    fn counts_in_details_agree_with_their_nouns() {
        let one = ApiError::InboxBacklogFull {
            backlog: 1,
            limit: 1,
            retry_after: 1,
        };
        assert_eq!(
            one.to_string(),
            "the inbox holds 1 unprocessed event (limit 1); nothing was stored, retry after 1 second"
        );
        let many = ApiError::TooManyRequests {
            what: "failed authentications",
            retry_after: 3,
        };
        assert_eq!(
            many.to_string(),
            "too many failed authentications; retry after 3 seconds"
        );
    }
}
