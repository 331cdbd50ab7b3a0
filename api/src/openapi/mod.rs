//! `GET /openapi.json`: the OpenAPI 3.1 description of this API, generated
//! from code — `#[utoipa::path]` on every handler, `ToSchema` on the types
//! they read and write — and finished here by rules that hold for every
//! endpoint (problem responses, correlation ids, Idempotency-Key headers).
//!
//! The operations come from the same registration that serves the routes
//! (`crate::routes::registered`, handed to `document`), so a route cannot be
//! served undescribed.
//! `api/openapi.json` is the committed copy. The `openapi` test fails when
//! the served document differs from it, or when actix serves a route the
//! document lacks; `LEADPIPE_UPDATE_OPENAPI=1 cargo test -p leadpipe-tests
//! --test it openapi::` rewrites the file.

pub mod examples;

use std::sync::OnceLock;

use utoipa::OpenApi as _;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::example::{Example, ExampleBuilder};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn, Paths};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::SchemaType;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ComponentsBuilder, InfoBuilder, LicenseBuilder, ObjectBuilder, OpenApi, Ref, RefOr, Required,
    Response, Schema, Type,
};

use crate::http::error::{PROBLEM_JSON, Problem, ProblemKind, ProblemType, problem_table_markdown};

/// The operations the routes register, and every schema they name.
pub type Registered = (Paths, Vec<(String, RefOr<Schema>)>);

/// The document as served: pretty-printed JSON and a final newline, built
/// once per process from what `registered` returns (the routes' own
/// registration, `crate::routes::registered`).
pub fn document(registered: fn() -> Registered) -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let mut text = build(registered())
            .to_pretty_json()
            .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"));
        text.push('\n');
        text
    })
}

#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(Problem, ProblemType, domain::FieldError)))]
struct Meta;

/// Every operation the routes register, and the rules below.
pub fn build((paths, schemas): Registered) -> OpenApi {
    let mut doc = Meta::openapi();
    doc.paths = paths;
    doc.components
        .get_or_insert_with(Default::default)
        .schemas
        .extend(schemas);
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
                         create --name N --role R [--source S] [--expires-in 90d]` (or by a \
                         signed-in user, `POST /api/tokens`) and printed once; only their \
                         SHA-256 is stored. An expired token answers `401 /problems/token-expired`. Roles: `intake` (posts leads for its one source), \
                         `sales`, `ops`, `admin`; each operation's `security` scopes list the \
                         roles that may call it, and its description says so. Missing, unknown or revoked token: `401`; a role that may not: \
                         `403`.",
                    ))
                    .build(),
            ),
        )
        .security_scheme(
            SESSION,
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                crate::http::session::COOKIE,
                "The page's session, from `POST /api/session` (a user's email and password). \
                 Every operation that takes a bearer token takes the session cookie instead, \
                 with the same roles (the user's); a request with an `Authorization` header is \
                 judged by that header alone. A write (`POST`, `PATCH`, `PUT`, `DELETE`) by \
                 cookie needs the session's CSRF token in `X-CSRF-Token` (`GET /api/session`), \
                 else `403 /problems/csrf-token-invalid`. A bearer token is never taken from a \
                 cookie.",
            ))),
        )
        .build();
    components.security_schemes.extend(extra.security_schemes);
    for (status, name, kinds, retry_after) in SHARED_RESPONSES {
        components.responses.insert(
            (*name).to_owned(),
            problem_response(
                &shared_description(kinds),
                problem_examples(kinds),
                *retry_after,
                *status == 401,
            )
            .into(),
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
/// The session cookie's security scheme.
pub const SESSION: &str = "session";

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

const IDEMPOTENCY_RETENTION: &str = "72 hours";

/// The API's prose, `description.md` beside this file, with the
/// problem catalogue's table and the retention filled in.
fn description() -> String {
    include_str!("description.md")
        .trim_end()
        .replace("{{IDEMPOTENCY_RETENTION}}", IDEMPOTENCY_RETENTION)
        .replace("{{PROBLEM_TABLE}}", &problem_table_markdown())
}

/// Responses shared by many operations, in `components/responses`:
/// (status, name, the problem kinds it stands for, sends `Retry-After`). Their
/// descriptions and examples come from the problem catalogue.
const SHARED_RESPONSES: &[(u16, &str, &[ProblemKind], bool)] = &[
    (404, "NotFound", &[ProblemKind::NotFound], false),
    (
        400,
        "BadRequest",
        &[
            ProblemKind::MalformedBody,
            ProblemKind::IdempotencyKeyMissing,
            ProblemKind::IdempotencyKeyInvalid,
        ],
        false,
    ),
    (
        401,
        "Unauthorized",
        &[ProblemKind::Unauthorized, ProblemKind::TokenExpired],
        false,
    ),
    (
        403,
        "Forbidden",
        &[ProblemKind::Forbidden, ProblemKind::CsrfTokenInvalid],
        false,
    ),
    (408, "RequestTimeout", &[ProblemKind::BodyTimeout], false),
    (
        409,
        "IdempotencyKeyInFlight",
        &[ProblemKind::IdempotencyKeyInFlight],
        true,
    ),
    (
        413,
        "PayloadTooLarge",
        &[ProblemKind::PayloadTooLarge],
        false,
    ),
    (
        415,
        "UnsupportedMediaType",
        &[ProblemKind::UnsupportedMediaType],
        false,
    ),
    (
        422,
        "ValidationFailed",
        &[ProblemKind::Validation, ProblemKind::IdempotencyKeyReused],
        false,
    ),
    (
        429,
        "TooManyRequests",
        &[ProblemKind::TooManyRequests],
        true,
    ),
    (500, "Internal", &[ProblemKind::Internal], false),
    (
        503,
        "Unavailable",
        &[ProblemKind::Unavailable, ProblemKind::SecretKeyMissing],
        true,
    ),
];

/// "`/problems/a`: when. `/problems/b`: when."
fn shared_description(kinds: &[ProblemKind]) -> String {
    kinds
        .iter()
        .map(|k| format!("`{}`: {}.", k.type_uri(), k.info().description))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One example body per problem kind, named by its slug.
fn problem_examples(kinds: &[ProblemKind]) -> Vec<(String, Example)> {
    kinds
        .iter()
        .map(|k| {
            let info = k.info();
            let value = serde_json::json!({
                "type": k.type_uri(),
                "title": info.title,
                "status": info.status,
                "detail": info.description,
            });
            (
                info.slug.to_owned(),
                ExampleBuilder::new().value(Some(value)).build(),
            )
        })
        .collect()
}

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
const PRECONDITION_FAILED_TEXT: &str = "`/problems/precondition-failed`: `If-Match` names an old version; `current_version` is the current one";
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

fn problem_response(
    text: &str,
    examples: Vec<(String, Example)>,
    retry_after: bool,
    www_authenticate: bool,
) -> Response {
    let mut builder = ResponseBuilder::new()
        .description(text)
        .header(X_REQUEST_ID, string_header(X_REQUEST_ID_TEXT))
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .examples_from_iter(examples)
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
/// - operations with any request body may answer `408` (it came too slowly);
/// - operations with path parameters may answer `404`;
/// - operations with `If-Match` may answer `412`;
/// - operations with `Idempotency-Key` may answer `400`, `409` (in flight)
///   and `422` (reused), and send `Idempotent-Replayed` on success;
/// - named standard headers (`ETag`, `Location`, …) get their description;
/// - the description starts with the `**Roles:**` the `security` scopes name.
fn finish_operation(op: &mut Operation) {
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    if let Some(roles) = roles(op) {
        op.description = Some(match op.description.take().filter(|d| !d.is_empty()) {
            Some(rest) => format!("**Roles:** {roles}.\n\n{rest}"),
            None => format!("**Roles:** {roles}."),
        });
    }
    let keyed = has_header_param(op, "Idempotency-Key");
    let mut wanted: Vec<u16> = Vec::new();
    if secured {
        wanted.extend([401, 403, 429, 500, 503]);
    }
    if has_json_body(op) {
        wanted.extend([400, 413, 415, 422]);
    }
    if op.request_body.is_some() {
        wanted.push(408);
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
    let versioned = has_header_param(op, "If-Match");
    let responses = &mut op.responses.responses;
    if versioned && !responses.contains_key("412") {
        responses.insert(
            "412".to_owned(),
            ResponseBuilder::new()
                .description(PRECONDITION_FAILED_TEXT)
                .build()
                .into(),
        );
    }
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

/// The roles that may call an operation: its `bearer` (or, for the
/// session's own operations, `session`) requirement's scopes,
/// which each route writes once (`security(("bearer" = ["ops", "admin"]))`)
/// and which a test checks against what its `Caller<R>` lets through.
fn roles(op: &Operation) -> Option<String> {
    let requirement = serde_json::to_value(op.security.as_ref()?.first()?).ok()?;
    let scopes: Vec<&str> = requirement
        .get(BEARER)
        .or_else(|| requirement.get(SESSION))?
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    (!scopes.is_empty()).then(|| scopes.join(", "))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::error::{ApiError, PROBLEMS};

    /// One of each `ApiError` variant: the match makes a new variant a
    /// compile error here until it is added (and its type listed).
    fn every_error() -> Vec<ApiError> {
        let all = vec![
            ApiError::MalformedBody(String::new()),
            ApiError::UnsupportedMediaType,
            ApiError::PayloadTooLarge { limit: 1 },
            ApiError::BodyTimeout {
                received: 0,
                elapsed_secs: 1.0,
                grace_secs: 1.0,
                min_rate: 1,
            },
            ApiError::Validation(Vec::new()),
            ApiError::Unauthorized,
            ApiError::InvalidSignature("x"),
            ApiError::Forbidden(String::new()),
            ApiError::NotFound(String::new()),
            ApiError::MethodNotAllowed {
                method: String::new(),
                allow: String::new(),
            },
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
            ApiError::LeadMerged {
                lead_id: 1,
                survivor_id: 2,
            },
            ApiError::UnsupportedImportType,
            ApiError::ReconcileRunning {
                run_id: 1,
                message: String::new(),
            },
            ApiError::InboxEventErased(String::new()),
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
            ApiError::DatabaseUnreachable(String::new()),
            ApiError::KeysDoNotOpen,
            ApiError::SecretKeyMissing,
            ApiError::InboxBacklogFull {
                backlog: 1,
                limit: 1,
                retry_after: 1,
            },
            ApiError::SignInFailed,
            ApiError::CsrfTokenInvalid,
            ApiError::TokenExpired,
            ApiError::Internal(String::new()),
        ];
        for err in &all {
            match err {
                ApiError::MalformedBody(_)
                | ApiError::UnsupportedMediaType
                | ApiError::PayloadTooLarge { .. }
                | ApiError::BodyTimeout { .. }
                | ApiError::Validation(_)
                | ApiError::Unauthorized
                | ApiError::SignInFailed
                | ApiError::CsrfTokenInvalid
                | ApiError::TokenExpired
                | ApiError::InvalidSignature(_)
                | ApiError::Forbidden(_)
                | ApiError::NotFound(_)
                | ApiError::MethodNotAllowed { .. }
                | ApiError::Conflict(_)
                | ApiError::IllegalTransition { .. }
                | ApiError::IllegalStageMove { .. }
                | ApiError::AlreadyConverted { .. }
                | ApiError::LeadMerged { .. }
                | ApiError::UnsupportedImportType
                | ApiError::ReconcileRunning { .. }
                | ApiError::InboxEventErased(_)
                | ApiError::PreconditionFailed { .. }
                | ApiError::IdempotencyKeyMissing
                | ApiError::IdempotencyKeyInvalid(_)
                | ApiError::IdempotencyKeyInFlight
                | ApiError::IdempotencyKeyReused { .. }
                | ApiError::TooManyRequests { .. }
                | ApiError::Unavailable
                | ApiError::DatabaseUnreachable(_)
                | ApiError::KeysDoNotOpen
                | ApiError::SecretKeyMissing
                | ApiError::InboxBacklogFull { .. }
                | ApiError::Internal(_) => {}
            }
        }
        all
    }

    #[test]
    fn every_error_answers_its_catalogue_row() {
        for err in every_error() {
            let body: serde_json::Value =
                serde_json::from_str(&err.problem_body()).expect("problem body is JSON");
            let info = err.problem_kind().info();
            assert_eq!(body["type"], format!("/problems/{}", info.slug));
            assert_eq!(body["title"], info.title);
            assert_eq!(body["status"], info.status);
            assert_eq!(
                actix_web::ResponseError::status_code(&err).as_u16(),
                info.status
            );
        }
    }

    #[test]
    fn every_catalogued_problem_is_answered_by_some_error() {
        let answered: Vec<ProblemKind> = every_error().iter().map(ApiError::problem_kind).collect();
        for p in PROBLEMS {
            assert!(
                answered.contains(&p.kind),
                "{:?} (/problems/{}) is catalogued but no ApiError answers it",
                p.kind,
                p.slug
            );
        }
    }

    #[test]
    fn one_title_and_status_per_row_and_every_type_in_the_description() {
        let text = description();
        for p in PROBLEMS {
            assert!(text.contains(&format!("| `/problems/{}` | {} |", p.slug, p.title)));
        }
        assert!(
            !text.contains("{{"),
            "a placeholder was left in the description"
        );
    }
}
