use sea_orm::DbErr;
use serde::Serialize;

/// One invalid field of an input, named as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid input: {} field(s)", .0.len())]
    Invalid(Vec<FieldError>),
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
    /// The caller may not do this (a role's or a token's limit).
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("{0}")]
    IllegalTransition(#[from] crate::lifecycle::lead_status::TransitionError),
    /// `If-Match` named another version than the stored one.
    #[error("this record is at version {current}, not the one given in If-Match")]
    PreconditionFailed { current: i64 },
    #[error("{0}")]
    IllegalStageMove(#[from] crate::lifecycle::deal_stage::IllegalStageMove),
    /// The lead was converted before; names that conversion.
    #[error("lead {} was already converted", .0.lead_id)]
    AlreadyConverted(Box<crate::entities::lead_conversion::Model>),
    /// The lead was merged into another: writes go to the survivor.
    #[error("lead {lead_id} was merged into lead {survivor_id}; write to that lead instead")]
    LeadMerged { lead_id: i64, survivor_id: i64 },
    /// Ops asked to retry an inbox event whose body was erased (with the
    /// person it was about, or at the end of its retention): nothing is left
    /// to process.
    #[error(
        "inbox event {id} was erased: its body is gone (erased with the person it was about, \
         or at the end of its retention), so there is nothing to process again"
    )]
    InboxEventErased { id: i64 },
    /// A secret could not be sealed or opened (no key configured, or a
    /// stored value under a key that is not).
    #[error(transparent)]
    Sealed(#[from] crate::sealed::SealError),
    /// The configured keys do not open what is stored (a wrong key under a
    /// known id, or a value under an id that is not configured).
    #[error(transparent)]
    KeyMismatch(#[from] crate::sealed::key_check::KeyMismatch),
    #[error("database error: {0}")]
    Db(#[from] DbErr),
}

impl Error {
    pub fn invalid(field: &str, message: &str) -> Self {
        Self::Invalid(vec![FieldError::new(field, message)])
    }

    /// A lost or saturated database is worth retrying; anything else is not.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Db(e) if is_transient_db(e))
    }

    /// The database connection was lost ([`is_connection_lost`]).
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, Self::Db(e) if is_connection_lost(e))
    }
}

pub fn is_transient_db(err: &DbErr) -> bool {
    matches!(err, DbErr::ConnectionAcquire(_) | DbErr::Conn(_))
}

/// The statement failed because its connection is gone (the server ended
/// the session, restarted, or the socket broke), not because of what it
/// asked: the same work on a fresh connection may well succeed.
pub fn is_connection_lost(err: &DbErr) -> bool {
    use sea_orm::sqlx::Error as Sqlx;
    let (DbErr::Conn(runtime) | DbErr::Exec(runtime) | DbErr::Query(runtime)) = err else {
        return false;
    };
    let sea_orm::RuntimeErr::SqlxError(sqlx) = runtime else {
        return false;
    };
    match sqlx.as_ref() {
        Sqlx::Io(_) | Sqlx::Protocol(_) | Sqlx::WorkerCrashed => true,
        // Class 08 (connection exception) and 57P01..57P03 (the server is
        // shutting down or ended this session).
        Sqlx::Database(db) => db
            .code()
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
        _ => false,
    }
}

impl From<validator::ValidationErrors> for Error {
    fn from(errors: validator::ValidationErrors) -> Self {
        Self::Invalid(field_errors(&errors))
    }
}

/// The invalid fields `validator` found, sorted by name.
pub fn field_errors(errors: &validator::ValidationErrors) -> Vec<FieldError> {
    let mut fields: Vec<FieldError> = errors
        .field_errors()
        .into_iter()
        .flat_map(|(field, errs)| {
            errs.iter().map(move |e| {
                let message = e
                    .message
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| describe_code(&e.code).to_owned());
                FieldError::new(field.to_string(), message)
            })
        })
        .collect();
    fields.sort_by(|a, b| a.field.cmp(&b.field));
    fields
}

fn describe_code(code: &str) -> &str {
    match code {
        "email" => "must be an email address",
        "length" => "has an invalid length",
        "required" => "is required",
        "range" => "is out of range",
        other => other,
    }
}
