//! `/api/contacts`: matched by normalised email. A contact without an email
//! cannot be matched, so creating one requires an `Idempotency-Key`.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::crm::contact::{self, ContactFilter, ContactInput, ContactPatch};
use domain::crm::timeline::Subject;
use domain::entities::contact as entity;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{MatchOutcome, PageParams, author, get_tagged, invalid, present, tagged, window};
use crate::http::auth::{Authenticated, SALES_AND_UP};
use crate::http::body::{parse_json, read_json_bytes};
use crate::http::correlation::CorrelationId;
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, if_match_version};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::state::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/contacts")
            .route("", web::post().to(create))
            .route("", web::get().to(list))
            .route("/{id}", web::get().to(get))
            .route("/{id}", web::patch().to(patch))
            .route("/{id}/activities", web::get().to(activities)),
    );
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(create, list, get, patch, activities))]
pub(super) struct Api;

/// A contact; after a create, with what the create did.
#[derive(Serialize, ToSchema)]
struct ContactOut {
    #[serde(flatten)]
    contact: entity::Model,
    /// Only in the answer to `POST /api/contacts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<MatchOutcome>,
}

/// A contact to match (by email) or create; needs an email, a name or a phone.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ContactIn {
    /// Trimmed and lower-cased; the contact's match key.
    email: Option<String>,
    name: Option<String>,
    phone: Option<String>,
    company_id: Option<i64>,
}

/// Create a contact, or find the one with the same email.
///
/// **Roles:** sales, ops, admin.
///
/// A contact with the same normalised email is answered as it is (`200`,
/// `outcome: matched`). A contact without an email cannot be matched, so
/// creating one requires an `Idempotency-Key`.
#[utoipa::path(
    post,
    path = "/api/contacts",
    operation_id = "create_contact",
    tag = "crm",
    params(IdempotencyKey),
    request_body = ContactIn,
    responses(
        (status = 201, description = "Created (`outcome: created`)", body = ContactOut,
            headers(("Location" = String), ("ETag" = String))),
        (status = 200, description = "An existing contact matched (`outcome: matched`), unchanged", body = ContactOut,
            headers(("Location" = String), ("ETag" = String))),
    ),
    security(("bearer" = [])),
)]
async fn create(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: ContactIn = parse_json(&body)?;
    let new = ContactInput {
        email: input.email,
        name: input.name,
        phone: input.phone,
        company_id: input.company_id,
    }
    .validate()?;
    if new.email.is_none() && new.name.is_none() && new.phone.is_none() {
        return Err(invalid(
            "email",
            "a contact needs an email, a name or a phone",
        ));
    }
    let rule = if new.email.is_some() {
        KeyRule::Optional
    } else {
        KeyRule::Required
    };
    let author = author(&caller, correlation);
    idempotency::run(&state, &caller, &req, &body, rule, move |txn| {
        Box::pin(async move {
            let found = contact::match_or_create(txn, &new, &author).await?;
            let outcome = MatchOutcome::of(found.created);
            let version = found.model.version;
            let location = format!("/api/contacts/{}", found.model.id);
            let out = ContactOut {
                contact: found.model,
                outcome: Some(outcome),
            };
            Ok(tagged(outcome.status(), &out, version)?.location(location))
        })
    })
    .await
}

/// One contact.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/contacts/{id}",
    operation_id = "get_contact",
    tag = "crm",
    params(("id" = i64, Path, description = "The contact's id")),
    responses(
        (status = 200, description = "The contact", body = ContactOut, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such contact"),
    ),
    security(("bearer" = [])),
)]
async fn get(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let contact = contact::find(&state.db, id.into_inner()).await?;
    let version = contact.version;
    Ok(get_tagged(
        &ContactOut {
            contact,
            outcome: None,
        },
        version,
    ))
}

/// Fields to change; absent fields stay as they are, `null` clears one.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ContactPatch)]
struct PatchIn {
    /// An email another contact has is `409`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    email: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    phone: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    company_id: Option<Option<i64>>,
}

/// Change a contact.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    patch,
    path = "/api/contacts/{id}",
    operation_id = "patch_contact",
    tag = "crm",
    params(("id" = i64, Path, description = "The contact's id"), IdempotencyKey, IfMatch),
    request_body = PatchIn,
    responses(
        (status = 200, description = "The contact after the change", body = ContactOut, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such contact"),
        (status = 409, description = "`/problems/conflict`: another contact has this email"),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names an old version; `current_version` is the current one"),
    ),
    security(("bearer" = [])),
)]
async fn patch(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: PatchIn = parse_json(&body)?;
    let if_match = if_match_version(&req);
    let (id, author) = (id.into_inner(), author(&caller, correlation));
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Optional,
        move |txn| {
            Box::pin(async move {
                let patch = ContactPatch {
                    email: input.email,
                    name: input.name,
                    phone: input.phone,
                    company_id: input.company_id,
                };
                let contact = contact::update(txn, id, patch, &if_match, &author).await?;
                let version = contact.version;
                tagged(
                    StatusCode::OK,
                    &ContactOut {
                        contact,
                        outcome: None,
                    },
                    version,
                )
            })
        },
    )
    .await
}

#[derive(Deserialize, IntoParams)]
struct ListParams {
    /// Case-insensitive text in name or email.
    q: Option<String>,
    /// Only the contact with this (normalised) email.
    email: Option<String>,
    /// Only contacts of this company.
    company_id: Option<i64>,
    /// Only records changed at or after this time (RFC 3339).
    #[param(format = DateTime)]
    updated_since: Option<String>,
    /// `updated_at` (default) or `created_at`.
    #[param(pattern = "^(updated_at|created_at)$")]
    sort: Option<String>,
    /// Page size, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// A page of contacts.
#[derive(Serialize, ToSchema)]
struct ContactPage {
    data: Vec<entity::Model>,
    next_cursor: Option<String>,
}

/// List contacts, newest first.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/contacts",
    operation_id = "list_contacts",
    tag = "crm",
    params(ListParams),
    responses((status = 200, description = "A page of contacts", body = ContactPage)),
    security(("bearer" = [])),
)]
async fn list(
    caller: Authenticated,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let params = params.into_inner();
    let window = window(
        params.updated_since.as_deref(),
        params.sort.as_deref(),
        params.limit,
        params.cursor,
    )?;
    let filter = ContactFilter {
        q: params.q,
        email: params.email,
        company_id: params.company_id,
    };
    let page = contact::list(state.reads.db(), &filter, &window).await?;
    Ok(HttpResponse::Ok().json(ContactPage {
        data: page.data,
        next_cursor: page.next_cursor,
    }))
}

/// A contact's timeline, newest first.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/contacts/{id}/activities",
    operation_id = "list_contact_activities",
    tag = "crm",
    params(("id" = i64, Path, description = "The contact's id"), PageParams),
    responses(
        (status = 200, description = "A page of the timeline", body = super::ActivityPage),
        (status = 404, description = "`/problems/not-found`: no such contact"),
    ),
    security(("bearer" = [])),
)]
async fn activities(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    params: web::Query<PageParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let id = id.into_inner();
    contact::find(&state.db, id).await?;
    super::timeline_page(&state, Subject::Contact, id, &params).await
}
