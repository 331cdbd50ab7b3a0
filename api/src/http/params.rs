//! Types that handlers name in `#[utoipa::path]` for what the OpenAPI
//! document says about them: the `Idempotency-Key` and `If-Match` headers,
//! and raw-byte request bodies.

use utoipa::openapi::schema::{KnownFormat, SchemaFormat};
use utoipa::openapi::{ObjectBuilder, RefOr, Schema, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};

/// `Idempotency-Key` on a write that may be retried.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKey {
    /// Makes the write safe to retry: a repeat of the same request with the
    /// same key gets the stored response (`Idempotent-Replayed: true`) and
    /// changes nothing. 1–255 printable ASCII characters, kept 72 hours.
    #[param(rename = "Idempotency-Key", max_length = 255)]
    pub idempotency_key: Option<String>,
}

/// `Idempotency-Key` on a write that has no natural key and so requires one.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyRequired {
    /// **Required** (`400 /problems/idempotency-key-missing` without): a
    /// repeat with the same key gets the stored response
    /// (`Idempotent-Replayed: true`) and changes nothing. 1–255 printable
    /// ASCII characters, kept 72 hours.
    #[param(rename = "Idempotency-Key", max_length = 255)]
    pub idempotency_key: String,
}

/// `If-Match` on a write to a versioned record.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IfMatch {
    /// The `ETag` you read (`"3"`): the write happens only if the record is
    /// still at that version, else `412 /problems/precondition-failed` (also
    /// for a weak, opaque or malformed tag, which never matches). Absent or
    /// `*`: no check.
    #[param(rename = "If-Match")]
    pub if_match: Option<String>,
}

/// A request body taken as raw bytes (a file, a signed webhook payload):
/// `{type: string, format: binary}`, which client generators turn into a
/// file or byte-string parameter.
pub struct Binary;

impl PartialSchema for Binary {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .into()
    }
}

impl ToSchema for Binary {}
