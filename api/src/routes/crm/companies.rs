//! `/api/companies`: matched by normalised domain (from `domain` or
//! `website`) or, lacking one, by normalised name.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::crm::company::{self, CompanyFilter, CompanyInput, CompanyPatch};
use domain::crm::timeline::Subject;
use domain::entities::company as entity;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{MatchOutcome, PageParams, author, get_tagged, present, tagged, window};
use crate::http::auth::{Authenticated, SALES_AND_UP};
use crate::http::body::{parse_json, read_json_bytes};
use crate::http::correlation::CorrelationId;
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, if_match_version};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::state::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/companies")
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

/// A company; after a create, with what the create did.
#[derive(Serialize, ToSchema)]
struct CompanyOut {
    #[serde(flatten)]
    company: entity::Model,
    /// Only in the answer to `POST /api/companies`.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<MatchOutcome>,
}

/// A company to match or create; give a `domain` (or a `website`) or a `name`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CompanyIn {
    /// Defaults to the domain.
    name: Option<String>,
    /// Normalised: lower-case, no scheme, path, port or `www.`; free-mail domains are refused.
    domain: Option<String>,
    /// A URL; its host becomes the domain when `domain` is absent.
    website: Option<String>,
}

/// Create a company, or find the one that matches.
///
/// **Roles:** sales, ops, admin.
///
/// Matched by its normalised domain or, without one, by its normalised
/// name, through unique keys in the database: a repeat answers the existing
/// company (`200`, `outcome: matched`) and never duplicates it.
#[utoipa::path(
    post,
    path = "/api/companies",
    operation_id = "create_company",
    tag = "crm",
    params(IdempotencyKey),
    request_body = CompanyIn,
    responses(
        (status = 201, description = "Created (`outcome: created`)", body = CompanyOut,
            headers(("Location" = String), ("ETag" = String))),
        (status = 200, description = "An existing company matched (`outcome: matched`), unchanged", body = CompanyOut,
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
    let input: CompanyIn = parse_json(&body)?;
    let new = CompanyInput {
        name: input.name,
        domain: input.domain.or(input.website),
    }
    .validate()?;
    let author = author(&caller, correlation);
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Optional,
        move |txn| {
            Box::pin(async move {
                let found = company::match_or_create(txn, &new, &author).await?;
                let outcome = MatchOutcome::of(found.created);
                let version = found.model.version;
                let location = format!("/api/companies/{}", found.model.id);
                let out = CompanyOut {
                    company: found.model,
                    outcome: Some(outcome),
                };
                Ok(tagged(outcome.status(), &out, version)?.location(location))
            })
        },
    )
    .await
}

/// One company.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/companies/{id}",
    operation_id = "get_company",
    tag = "crm",
    params(("id" = i64, Path, description = "The company's id")),
    responses(
        (status = 200, description = "The company", body = CompanyOut, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such company"),
    ),
    security(("bearer" = [])),
)]
async fn get(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let company = company::find(&state.db, id.into_inner()).await?;
    let version = company.version;
    Ok(get_tagged(
        &CompanyOut {
            company,
            outcome: None,
        },
        version,
    ))
}

/// Fields to change; absent fields stay as they are.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CompanyPatch)]
struct PatchIn {
    name: Option<String>,
    /// `null` clears it; a domain another company has is `409`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    domain: Option<Option<String>>,
}

/// Change a company's name or domain.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    patch,
    path = "/api/companies/{id}",
    operation_id = "patch_company",
    tag = "crm",
    params(("id" = i64, Path, description = "The company's id"), IdempotencyKey, IfMatch),
    request_body = PatchIn,
    responses(
        (status = 200, description = "The company after the change", body = CompanyOut, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such company"),
        (status = 409, description = "`/problems/conflict`: another company has this domain"),
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
                let patch = CompanyPatch {
                    name: input.name,
                    domain: input.domain,
                };
                let company = company::update(txn, id, patch, &if_match, &author).await?;
                let version = company.version;
                tagged(
                    StatusCode::OK,
                    &CompanyOut {
                        company,
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
    /// Case-insensitive text in name or domain.
    q: Option<String>,
    /// Only the company with this (normalised) domain.
    domain: Option<String>,
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

/// A page of companies.
#[derive(Serialize, ToSchema)]
struct CompanyPage {
    data: Vec<entity::Model>,
    next_cursor: Option<String>,
}

/// List companies, newest first.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/companies",
    operation_id = "list_companies",
    tag = "crm",
    params(ListParams),
    responses((status = 200, description = "A page of companies", body = CompanyPage)),
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
    let filter = CompanyFilter {
        q: params.q,
        domain: params.domain,
    };
    let page = company::list(state.reads.db(), &filter, &window).await?;
    Ok(HttpResponse::Ok().json(CompanyPage {
        data: page.data,
        next_cursor: page.next_cursor,
    }))
}

/// A company's timeline, newest first.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/companies/{id}/activities",
    operation_id = "list_company_activities",
    tag = "crm",
    params(("id" = i64, Path, description = "The company's id"), PageParams),
    responses(
        (status = 200, description = "A page of the timeline", body = super::ActivityPage),
        (status = 404, description = "`/problems/not-found`: no such company"),
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
    company::find(&state.db, id).await?;
    super::timeline_page(&state, Subject::Company, id, &params).await
}
