//! `GET /openapi.json`: the OpenAPI 3.1 description of this API, generated
//! from code — `#[utoipa::path]` on every handler, `ToSchema` on the types
//! they read and write — and finished here by rules that hold for every
//! endpoint (problem responses, correlation ids, Idempotency-Key headers).
//!
//! `api/openapi.json` is the committed copy. The `openapi` test fails when
//! the served document differs from it, or when actix serves a route the
//! document lacks; `LEADPIPE_UPDATE_OPENAPI=1 cargo test -p leadpipe-tests
//! --test openapi` rewrites the file.

use std::borrow::Cow;
use std::sync::OnceLock;

use actix_web::{HttpResponse, web};
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::SchemaType;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ComponentsBuilder, InfoBuilder, LicenseBuilder, ObjectBuilder, OpenApi, Ref, RefOr, Required,
    Response, Schema, Type,
};
use utoipa::{IntoParams, OpenApi as _, PartialSchema, ToSchema};

use crate::error::{PROBLEM_JSON, Problem};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/openapi.json", web::get().to(serve));
}

/// This document: the OpenAPI 3.1 description of the API.
///
/// **Roles:** anyone (no token).
///
/// The same document is committed as `api/openapi.json`.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object)),
)]
async fn serve() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(document())
}

/// The document as served: pretty-printed JSON and a final newline, built
/// once per process.
pub fn document() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let mut text = build()
            .to_pretty_json()
            .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"));
        text.push('\n');
        text
    })
}

#[derive(utoipa::OpenApi)]
#[openapi(
    paths(serve, crate::metrics::scrape),
    components(schemas(Problem, ProblemType, domain::FieldError))
)]
struct Meta;

/// Every route module's part, this module's, and the rules below.
pub fn build() -> OpenApi {
    let mut doc = Meta::openapi();
    for part in super::openapi_parts() {
        doc.merge(part);
    }
    doc.info = InfoBuilder::new()
        .title("leadpipe")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(description()))
        .license(Some(LicenseBuilder::new().name("MIT").build()))
        .build();
    doc.tags = Some(
        TAGS.iter()
            .map(|(name, text)| {
                TagBuilder::new()
                    .name(*name)
                    .description(Some(*text))
                    .build()
            })
            .collect(),
    );
    let mut components = doc.components.take().unwrap_or_default();
    let extra = ComponentsBuilder::new()
        .security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("opaque token")
                    .description(Some(
                        "`Authorization: Bearer <token>`. Tokens are created with `leadpipe token \
                         create --name N --role R [--source S]` and printed once; only their \
                         SHA-256 is stored. Roles: `intake` (posts leads for its one source), \
                         `sales`, `ops`, `admin`; each operation's description says which may \
                         call it. Missing, unknown or revoked token: `401`; a role that may not: \
                         `403`.",
                    ))
                    .build(),
            ),
        )
        .build();
    components.security_schemes.extend(extra.security_schemes);
    for (status, name, text, retry_after) in SHARED_RESPONSES {
        components.responses.insert(
            (*name).to_owned(),
            problem_response(text, *retry_after, *status == 401).into(),
        );
    }
    doc.components = Some(components);
    for item in doc.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            finish_operation(op);
        }
    }
    doc
}

pub const BEARER: &str = "bearer";

const TAGS: &[(&str, &str)] = &[
    (
        "leads",
        "Intake (the natural-key upsert) and the sales API: list, read, status, owner, notes, timeline.",
    ),
    (
        "crm",
        "Contacts, companies and deals, and converting a qualified lead into them.",
    ),
    (
        "imports",
        "Bulk import of CSV or NDJSON files through the same write path.",
    ),
    (
        "webhooks",
        "Signed webhook receivers: one inbox row per event, processed by a background job.",
    ),
    (
        "sources",
        "Webhook source configuration (signature scheme, secrets, JSON pointers).",
    ),
    (
        "subscriptions",
        "Downstream systems that receive our events as signed Standard Webhooks requests.",
    ),
    (
        "ops",
        "Watching and repairing the pipeline: inbox events, outgoing deliveries, traces.",
    ),
    (
        "meta",
        "Health probes, Prometheus metrics, this document and the front page.",
    ),
];

/// Every problem `type` the API answers with: slug, status, when.
pub const PROBLEM_TYPES: &[(&str, u16, &str)] = &[
    ("malformed-body", 400, "the body is not well-formed JSON"),
    (
        "idempotency-key-missing",
        400,
        "this write requires an `Idempotency-Key`",
    ),
    (
        "idempotency-key-invalid",
        400,
        "the key is empty, longer than 255 characters or not printable ASCII",
    ),
    (
        "unauthorized",
        401,
        "missing, unknown or revoked bearer token",
    ),
    (
        "invalid-signature",
        401,
        "a webhook's source is unknown, or its signature is missing, malformed, outside the time tolerance or wrong (one answer for all)",
    ),
    (
        "forbidden",
        403,
        "the token's role (or source) may not do this",
    ),
    ("not-found", 404, "no such resource or route"),
    (
        "reconcile-running",
        409,
        "a reconcile of this source is already running; `run_id` names it",
    ),
    (
        "conflict",
        409,
        "the request conflicts with the stored state",
    ),
    (
        "illegal-transition",
        409,
        "the lead status machine (or the deal stage machine) forbids the move; `allowed` lists the legal targets",
    ),
    (
        "already-converted",
        409,
        "the lead was converted before; `conversion` names its ids",
    ),
    (
        "idempotency-key-in-flight",
        409,
        "a request with this key is still running; retry after `Retry-After`",
    ),
    (
        "precondition-failed",
        412,
        "`If-Match` names no current version (an old version, or a weak, opaque or malformed tag); `current_version` is the current one",
    ),
    (
        "payload-too-large",
        413,
        "the body is larger than the configured limit",
    ),
    (
        "unsupported-media-type",
        415,
        "`Content-Type` is not JSON (imports: not `text/csv` or `application/x-ndjson`)",
    ),
    (
        "validation",
        422,
        "well-formed JSON with invalid or mistyped fields or bad query parameters; `errors` names each field",
    ),
    (
        "idempotency-key-reused",
        422,
        "the key was used before for another request",
    ),
    (
        "too-many-requests",
        429,
        "a rate limit: failed authentications from one client address, or webhook deliveries to one source; retry after `Retry-After`",
    ),
    (
        "internal",
        500,
        "a bug; the cause is logged, never returned",
    ),
    (
        "unavailable",
        503,
        "the database is unreachable; retry after `Retry-After`",
    ),
    (
        "secret-key-missing",
        503,
        "a secret would be stored, but the server has no sealing key (`LEADPIPE_SECRET_KEY`)",
    ),
];

/// The problem `type` URIs as a string enum.
pub struct ProblemType;

impl PartialSchema for ProblemType {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A stable problem type URI (relative); see the API description for when each occurs.",
            ))
            .enum_values(Some(
                PROBLEM_TYPES
                    .iter()
                    .map(|(slug, _, _)| format!("/problems/{slug}")),
            ))
            .into()
    }
}

impl ToSchema for ProblemType {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ProblemType")
    }
}

const IDEMPOTENCY_RETENTION: &str = "72 hours";

fn description() -> String {
    let mut text = format!(
        "leadpipe is a lead-pipeline CRM backend. Leads arrive through several doors — \
the intake API, signed webhooks, bulk imports — and every door may deliver the same lead twice; \
all of them go through one upsert on the sender's natural key `(source, source_ref)`.

## Authentication and roles

`Authorization: Bearer <token>` (security scheme `bearer`). Roles: `intake` (may post leads for \
its one source), `sales` (leads, contacts, companies, deals, conversion), `ops` (what sales may, \
plus the ops endpoints, imports, and reading sources and subscriptions), `admin` (everything). \
Each operation's description names the roles that may call it. `401` when the token is missing, \
unknown or revoked (with `WWW-Authenticate: Bearer`); `403` when its role may not. Too many \
failed authentications from one client address answer `429 /problems/too-many-requests` with \
`Retry-After` instead of `401`; a valid token is never limited.

## Idempotency-Key

Writes that list the `Idempotency-Key` header may be retried safely: the first request with a \
key runs, and its response — success, or a `404`/`409` outcome — is stored with the key and \
replayed to any repeat of the same request by the same principal, with \
`Idempotent-Replayed: true` (a first execution answers `Idempotent-Replayed: false`). Keys and \
their responses are kept for **{IDEMPOTENCY_RETENTION}** by default \
(`LEADPIPE_IDEMPOTENCY_RETENTION_HOURS`); a key is 1–255 printable ASCII characters. The same key \
with another method, path or body is `422 /problems/idempotency-key-reused`; a repeat while the \
first is still running is `409 /problems/idempotency-key-in-flight` with `Retry-After`. \
Validation errors, `412` and `5xx` are not stored: the key is released, so the corrected request \
may reuse it. Notes, deals, conversions and keyless manual leads **require** a key (`400 \
/problems/idempotency-key-missing` without one).

## Versions: ETag and If-Match

Leads, contacts, companies and deals carry a `version`; single-record responses return it as a \
strong `ETag` (`\"3\"`). Writes that list `If-Match` honour it (RFC 9110): the write happens \
only if one of the listed tags is the record's current one; otherwise — an old version, a weak \
(`W/`) or opaque tag, or a value that is no entity tag at all — it is `412 \
/problems/precondition-failed` (with `current_version`); absent or `*` means no check.

## Correlation ids

Every response carries `X-Request-Id`: the caller's own (1–64 characters of letters, digits and \
`-_.:`) or a generated one. It is logged on every line of the request and stored on the \
timeline, inbox and outbox rows the request writes (`GET /api/ops/trace/{{correlation_id}}`).

## Lists

Lists are newest first, `limit` 1–200 (default 50), and continue with the opaque `cursor` from \
the previous page's `next_cursor` (deliveries: `before` / `next_before`).

## Errors

Every error is `application/problem+json` (RFC 9457, schema `Problem`): `type`, `title`, \
`status`, `detail`; validation errors add `errors: [{{field, message}}]`, and some types add \
extension members (`allowed`, `current_version`, `conversion`). A rejected request stores \
nothing. The `type` values are stable:

| status | type | when |
|---|---|---|
"
    );
    for (slug, status, when) in PROBLEM_TYPES {
        text.push_str(&format!("| {status} | `/problems/{slug}` | {when} |\n"));
    }
    text
}

/// Responses shared by many operations, in `components/responses`:
/// (status, name, description, sends `Retry-After`).
const SHARED_RESPONSES: &[(u16, &str, &str, bool)] = &[
    (
        404,
        "NotFound",
        "`/problems/not-found`: the path names nothing (or a path parameter does not parse).",
        false,
    ),
    (
        400,
        "BadRequest",
        "`/problems/malformed-body` (the body is not well-formed JSON), \
         `/problems/idempotency-key-missing` or `/problems/idempotency-key-invalid`.",
        false,
    ),
    (
        401,
        "Unauthorized",
        "`/problems/unauthorized`: missing, unknown or revoked bearer token.",
        false,
    ),
    (
        403,
        "Forbidden",
        "`/problems/forbidden`: the token's role (or source) may not do this.",
        false,
    ),
    (
        409,
        "IdempotencyKeyInFlight",
        "`/problems/idempotency-key-in-flight`: a request with this `Idempotency-Key` is still running; retry after `Retry-After`.",
        true,
    ),
    (
        413,
        "PayloadTooLarge",
        "`/problems/payload-too-large`: the body is over `LEADPIPE_MAX_BODY_BYTES`.",
        false,
    ),
    (
        415,
        "UnsupportedMediaType",
        "`/problems/unsupported-media-type`: `Content-Type` is not `application/json`.",
        false,
    ),
    (
        422,
        "ValidationFailed",
        "`/problems/validation` (`errors` names each invalid field or query parameter) or \
         `/problems/idempotency-key-reused`.",
        false,
    ),
    (
        429,
        "TooManyRequests",
        "`/problems/too-many-requests`: too many failed authentications from this client address \
         (`LEADPIPE_AUTH_FAIL_PER_MINUTE`); retry after `Retry-After`. A valid token is not limited.",
        true,
    ),
    (
        500,
        "Internal",
        "`/problems/internal`: a bug; the cause is logged, not returned.",
        false,
    ),
    (
        503,
        "Unavailable",
        "`/problems/unavailable`: the database is unreachable; retry after `Retry-After`. \
         `/problems/secret-key-missing`: a secret would be stored but the server has no \
         sealing key (`LEADPIPE_SECRET_KEY`).",
        true,
    ),
];

fn shared(status: u16) -> Option<&'static str> {
    SHARED_RESPONSES
        .iter()
        .find(|(s, ..)| *s == status)
        .map(|(_, name, ..)| *name)
}

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::String))
        .description(Some(description))
        .build()
}

const X_REQUEST_ID: &str = "X-Request-Id";
const X_REQUEST_ID_TEXT: &str = "The correlation id of this request: the caller's `X-Request-Id` when acceptable, else a generated one.";

/// Standard texts for headers a handler names without describing.
fn header_text(name: &str) -> Option<&'static str> {
    Some(match name {
        "ETag" => {
            "The record's version as a strong entity tag (`\"3\"`); send it back as `If-Match`."
        }
        "Location" => "Where the created (or matched) resource lives.",
        "Retry-After" => "Seconds to wait before retrying.",
        "WWW-Authenticate" => "`Bearer`.",
        "Idempotent-Replayed" => {
            "`true` when this is the stored response of an earlier request with the same \
             `Idempotency-Key`, `false` when the request ran now; absent without a key."
        }
        _ => return None,
    })
}

fn problem_response(text: &str, retry_after: bool, www_authenticate: bool) -> Response {
    let mut builder = ResponseBuilder::new()
        .description(text)
        .header(X_REQUEST_ID, string_header(X_REQUEST_ID_TEXT))
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        );
    if retry_after {
        builder = builder.header(
            "Retry-After",
            string_header(header_text("Retry-After").unwrap_or("")),
        );
    }
    if www_authenticate {
        builder = builder.header(
            "WWW-Authenticate",
            string_header(header_text("WWW-Authenticate").unwrap_or("")),
        );
    }
    builder.build()
}

fn has_header_param(op: &Operation, name: &str) -> bool {
    op.parameters
        .iter()
        .flatten()
        .any(|p| p.parameter_in == ParameterIn::Header && p.name.eq_ignore_ascii_case(name))
}

fn has_path_param(op: &Operation) -> bool {
    op.parameters
        .iter()
        .flatten()
        .any(|p| p.parameter_in == ParameterIn::Path)
}

fn has_query_param(op: &Operation) -> bool {
    op.parameters
        .iter()
        .flatten()
        .any(|p| p.parameter_in == ParameterIn::Query)
}

fn has_json_body(op: &Operation) -> bool {
    op.request_body
        .as_ref()
        .is_some_and(|b| b.content.contains_key("application/json"))
}

/// The rules every operation follows, so that handlers declare only what is
/// particular to them:
///
/// - every operation takes and returns `X-Request-Id`;
/// - every `4xx`/`5xx` response is `application/problem+json` with `Problem`;
/// - operations with `security` may answer `401`, `403`, `429`, `500` and `503`;
/// - operations with a JSON body may answer `400`, `413`, `415` and `422`,
///   operations with query parameters `422`;
/// - operations with path parameters may answer `404`;
/// - operations with `Idempotency-Key` may answer `400`, `409` (in flight)
///   and `422` (reused), and send `Idempotent-Replayed` on success;
/// - named standard headers (`ETag`, `Location`, …) get their description.
fn finish_operation(op: &mut Operation) {
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    let keyed = has_header_param(op, "Idempotency-Key");
    let mut wanted: Vec<u16> = Vec::new();
    if secured {
        wanted.extend([401, 403, 429, 500, 503]);
    }
    if has_json_body(op) {
        wanted.extend([400, 413, 415, 422]);
    }
    if has_query_param(op) {
        wanted.push(422);
    }
    if has_path_param(op) {
        wanted.push(404);
    }
    if keyed {
        wanted.extend([400, 409, 422]);
    }
    let responses = &mut op.responses.responses;
    for status in wanted {
        let code = status.to_string();
        if responses.contains_key(&code) {
            continue;
        }
        if let Some(name) = shared(status) {
            responses.insert(
                code,
                RefOr::Ref(Ref::new(format!("#/components/responses/{name}"))),
            );
        }
    }
    for (code, response) in responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        let status: u16 = code.parse().unwrap_or(0);
        if status >= 400 {
            response.content.clear();
            response.content.insert(
                PROBLEM_JSON.to_owned(),
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("Problem")))
                    .build(),
            );
            if status == 409 && keyed {
                response.description.push_str(
                    " Also `/problems/idempotency-key-in-flight` (with `Retry-After`) while a \
                     request with the same `Idempotency-Key` is still running.",
                );
                response.headers.insert(
                    "Retry-After".to_owned(),
                    string_header(header_text("Retry-After").unwrap_or("")),
                );
            }
            if status == 503 || status == 429 || status == 401 {
                let name = if status == 401 {
                    "WWW-Authenticate"
                } else {
                    "Retry-After"
                };
                response.headers.insert(
                    name.to_owned(),
                    string_header(header_text(name).unwrap_or("")),
                );
            }
        }
        if keyed && (200..300).contains(&status) {
            response.headers.insert(
                "Idempotent-Replayed".to_owned(),
                string_header(header_text("Idempotent-Replayed").unwrap_or("")),
            );
        }
        for (name, header) in response.headers.iter_mut() {
            if header.description.is_none() {
                header.description = header_text(name).map(str::to_owned);
            }
        }
        response
            .headers
            .insert(X_REQUEST_ID.to_owned(), string_header(X_REQUEST_ID_TEXT));
    }
    let parameters = op.parameters.get_or_insert_with(Vec::new);
    for parameter in parameters.iter_mut() {
        if let Some(schema) = parameter.schema.as_mut() {
            non_null(schema);
        }
    }
    parameters.push(
        ParameterBuilder::new()
            .name(X_REQUEST_ID)
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(
                "Your correlation id for this request (1–64 characters of letters, digits and \
                 `-_.:`); returned in `X-Request-Id` and stored on everything the request writes.",
            ))
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(64)),
            ))
            .build(),
    );
}

/// A parameter is absent or has a value; it is never `null` (which is how
/// utoipa renders an `Option`).
fn non_null(schema: &mut RefOr<Schema>) {
    let RefOr::T(inner) = schema else {
        return;
    };
    match inner {
        Schema::Object(object) => {
            if let SchemaType::Array(types) = &object.schema_type {
                let types: Vec<Type> = types
                    .iter()
                    .filter(|t| **t != Type::Null)
                    .cloned()
                    .collect();
                object.schema_type = match types.as_slice() {
                    [one] => SchemaType::Type(one.clone()),
                    _ => SchemaType::Array(types),
                };
            }
        }
        Schema::OneOf(one_of) => {
            let is_null = |s: &RefOr<Schema>| matches!(s, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
            if one_of.items.len() == 2
                && one_of.items.iter().any(is_null)
                && let Some(item) = one_of.items.iter().find(|s| !is_null(s)).cloned()
            {
                *schema = item;
            }
        }
        _ => {}
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    /// One of each `ApiError` variant: the match makes a new variant a
    /// compile error here until it is added (and its type listed).
    fn every_error() -> Vec<ApiError> {
        let all = vec![
            ApiError::MalformedBody(String::new()),
            ApiError::UnsupportedMediaType,
            ApiError::PayloadTooLarge { limit: 1 },
            ApiError::Validation(Vec::new()),
            ApiError::Unauthorized,
            ApiError::InvalidSignature("x"),
            ApiError::Forbidden(String::new()),
            ApiError::NotFound(String::new()),
            ApiError::Conflict(String::new()),
            ApiError::IllegalTransition {
                from: String::new(),
                to: String::new(),
                allowed: Vec::new(),
            },
            ApiError::IllegalStageMove {
                from: String::new(),
                to: String::new(),
                allowed: Vec::new(),
            },
            ApiError::AlreadyConverted {
                lead_id: 1,
                conversion: serde_json::Value::Null,
            },
            ApiError::UnsupportedImportType,
            ApiError::ReconcileRunning {
                run_id: 1,
                message: String::new(),
            },
            ApiError::PreconditionFailed { current: 1 },
            ApiError::IdempotencyKeyMissing,
            ApiError::IdempotencyKeyInvalid("x"),
            ApiError::IdempotencyKeyInFlight,
            ApiError::IdempotencyKeyReused {
                method: String::new(),
                path: String::new(),
            },
            ApiError::TooManyRequests {
                what: "x",
                retry_after: 1,
            },
            ApiError::Unavailable,
            ApiError::SecretKeyMissing,
            ApiError::Internal(String::new()),
        ];
        for err in &all {
            match err {
                ApiError::MalformedBody(_)
                | ApiError::UnsupportedMediaType
                | ApiError::PayloadTooLarge { .. }
                | ApiError::Validation(_)
                | ApiError::Unauthorized
                | ApiError::InvalidSignature(_)
                | ApiError::Forbidden(_)
                | ApiError::NotFound(_)
                | ApiError::Conflict(_)
                | ApiError::IllegalTransition { .. }
                | ApiError::IllegalStageMove { .. }
                | ApiError::AlreadyConverted { .. }
                | ApiError::UnsupportedImportType
                | ApiError::ReconcileRunning { .. }
                | ApiError::PreconditionFailed { .. }
                | ApiError::IdempotencyKeyMissing
                | ApiError::IdempotencyKeyInvalid(_)
                | ApiError::IdempotencyKeyInFlight
                | ApiError::IdempotencyKeyReused { .. }
                | ApiError::TooManyRequests { .. }
                | ApiError::Unavailable
                | ApiError::SecretKeyMissing
                | ApiError::Internal(_) => {}
            }
        }
        all
    }

    #[test]
    fn every_problem_type_the_api_answers_is_documented_with_its_status() {
        for err in every_error() {
            let body: serde_json::Value =
                serde_json::from_str(&err.problem_body()).expect("problem body is JSON");
            let kind = body["type"].as_str().expect("type is a string");
            let slug = kind
                .strip_prefix("/problems/")
                .expect("relative /problems/ URI");
            let status = body["status"].as_u64().expect("status");
            assert!(
                PROBLEM_TYPES
                    .iter()
                    .any(|(s, st, _)| *s == slug && u64::from(*st) == status),
                "{kind} ({status}) is missing from PROBLEM_TYPES in routes/openapi.rs"
            );
        }
    }

    #[test]
    fn every_documented_problem_type_is_answered_by_some_error() {
        let answered: Vec<String> = every_error()
            .iter()
            .map(|e| {
                let body: serde_json::Value =
                    serde_json::from_str(&e.problem_body()).expect("problem body is JSON");
                body["type"].as_str().unwrap_or_default().to_owned()
            })
            .collect();
        for (slug, _, _) in PROBLEM_TYPES {
            assert!(
                answered.contains(&format!("/problems/{slug}")),
                "/problems/{slug} is documented but no ApiError answers it"
            );
        }
    }

    /// Merging keeps the first schema of a name and drops the others, so two
    /// modules' types with one name would silently share a schema.
    #[test]
    fn no_two_modules_define_different_schemas_under_one_name() {
        let mut seen = std::collections::BTreeMap::new();
        for part in crate::routes::openapi_parts() {
            for (name, schema) in part.components.map(|c| c.schemas).unwrap_or_default() {
                let schema = serde_json::to_value(&schema).expect("schema serialises");
                if let Some(earlier) = seen.insert(name.clone(), schema.clone()) {
                    assert_eq!(
                        earlier, schema,
                        "two different schemas are named {name}: rename one with #[schema(as = …)]"
                    );
                }
            }
        }
    }

    #[test]
    fn operation_ids_are_unique() {
        let doc = build();
        let mut seen = std::collections::HashSet::new();
        for item in doc.paths.paths.values() {
            for op in [&item.get, &item.post, &item.put, &item.patch, &item.delete]
                .into_iter()
                .flatten()
            {
                let id = op.operation_id.clone().unwrap_or_default();
                assert!(!id.is_empty(), "an operation has no operationId");
                assert!(seen.insert(id.clone()), "operationId {id} is used twice");
            }
        }
    }
}
