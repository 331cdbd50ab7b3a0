//! `/api/deals`: stage machine `open → won | lost`, amounts in minor units.
//! A deal has no natural key, so creating one requires an `Idempotency-Key`.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::auth::Role;
use domain::crm::deal::{self, DealFilter, DealInput, DealPatch, DealStage};
use domain::crm::timeline::Subject;
use domain::entities::deal as entity;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{PageParams, author, get_tagged, invalid, present, tagged, window};
use crate::http::auth::{Authenticated, SALES_AND_UP};
use crate::http::body::{parse_json, read_json_bytes};
use crate::http::correlation::CorrelationId;
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, if_match_version};
use crate::http::params::{IdempotencyKey, IdempotencyKeyRequired, IfMatch};
use crate::http::state::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/deals")
            .route("", web::post().to(create))
            .route("", web::get().to(list))
            .route("/{id}", web::get().to(get))
            .route("/{id}", web::patch().to(patch))
            .route("/{id}/transitions", web::post().to(transition))
            .route("/{id}/activities", web::get().to(activities)),
    );
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(create, list, get, patch, transition, activities))]
pub(super) struct Api;

/// A deal as the API takes it, also inside a conversion request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DealIn {
    pub name: Option<String>,
    /// The amount in minor units (`1250000` is 12,500.00); never a float.
    pub amount_cents: Option<i64>,
    /// ISO 4217, e.g. `EUR` (`eur` is accepted).
    pub currency: Option<String>,
    /// An active `sales` principal; defaults to a `sales` caller.
    pub owner_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub company_id: Option<i64>,
}

impl DealIn {
    pub fn into_input(self) -> DealInput {
        DealInput {
            name: self.name,
            amount_cents: self.amount_cents,
            currency: self.currency,
            owner_id: self.owner_id,
            contact_id: self.contact_id,
            company_id: self.company_id,
        }
    }
}

fn reply(
    status: StatusCode,
    deal: &entity::Model,
) -> Result<crate::http::idempotency::Reply, ApiError> {
    tagged(status, deal, deal.version)
}

/// Create an `open` deal.
///
/// **Roles:** sales, ops, admin.
///
/// A deal has no natural key, so `Idempotency-Key` is required. The owner
/// defaults to the caller when a `sales` principal (else `owner_id` is
/// required); it must be an active `sales` principal.
#[utoipa::path(
    post,
    path = "/api/deals",
    operation_id = "create_deal",
    tag = "crm",
    params(IdempotencyKeyRequired),
    request_body = DealIn,
    responses(
        (status = 201, description = "The new deal", body = entity::Model,
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
    let mut input = parse_json::<DealIn>(&body)?.into_input();
    if input.owner_id.is_none() {
        if caller.role != Role::Sales {
            return Err(invalid(
                "owner_id",
                "is required (an active sales principal)",
            ));
        }
        input.owner_id = Some(caller.id);
    }
    let author = author(&caller, correlation);
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Required,
        move |txn| {
            Box::pin(async move {
                let deal = deal::create(txn, input, None, &author).await?;
                let location = format!("/api/deals/{}", deal.id);
                Ok(reply(StatusCode::CREATED, &deal)?.location(location))
            })
        },
    )
    .await
}

/// One deal.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/deals/{id}",
    operation_id = "get_deal",
    tag = "crm",
    params(("id" = i64, Path, description = "The deal's id")),
    responses(
        (status = 200, description = "The deal", body = entity::Model, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such deal"),
    ),
    security(("bearer" = [])),
)]
async fn get(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let deal = deal::find(&state.db, id.into_inner()).await?;
    Ok(get_tagged(&deal, deal.version))
}

/// Fields to change; absent fields stay as they are, `null` clears a link.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DealPatch)]
struct PatchIn {
    name: Option<String>,
    amount_cents: Option<i64>,
    currency: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    owner_id: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    contact_id: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    company_id: Option<Option<i64>>,
}

/// Change a deal's name, amount, currency, owner or links.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    patch,
    path = "/api/deals/{id}",
    operation_id = "patch_deal",
    tag = "crm",
    params(("id" = i64, Path, description = "The deal's id"), IdempotencyKey, IfMatch),
    request_body = PatchIn,
    responses(
        (status = 200, description = "The deal after the change", body = entity::Model, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such deal"),
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
                let patch = DealPatch {
                    name: input.name,
                    amount_cents: input.amount_cents,
                    currency: input.currency,
                    owner_id: input.owner_id,
                    contact_id: input.contact_id,
                    company_id: input.company_id,
                };
                let deal = deal::update(txn, id, patch, &if_match, &author).await?;
                reply(StatusCode::OK, &deal)
            })
        },
    )
    .await
}

/// A move of the deal stage machine.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DealTransition)]
struct TransitionIn {
    /// `won` or `lost`.
    to: DealStage,
    /// Why the deal was lost.
    reason: Option<String>,
}

/// Close a deal: `won` or `lost`.
///
/// **Roles:** sales, ops, admin.
///
/// A deal's stage is `open → won | lost`; a closed deal stays closed. Writes
/// the outbox event `deal.stage_changed`.
#[utoipa::path(
    post,
    path = "/api/deals/{id}/transitions",
    operation_id = "transition_deal",
    tag = "crm",
    params(("id" = i64, Path, description = "The deal's id"), IdempotencyKey, IfMatch),
    request_body = TransitionIn,
    responses(
        (status = 200, description = "The deal after the move", body = entity::Model, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such deal"),
        (status = 409, description = "`/problems/illegal-transition`: the stage machine forbids the move; `allowed` lists the legal targets."),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names an old version; `current_version` is the current one"),
    ),
    security(("bearer" = [])),
)]
async fn transition(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: TransitionIn = parse_json(&body)?;
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
                let deal =
                    deal::transition(txn, id, input.to, input.reason, &if_match, &author).await?;
                reply(StatusCode::OK, &deal)
            })
        },
    )
    .await
}

#[derive(Deserialize, IntoParams)]
struct ListParams {
    /// Only deals in this stage.
    #[param(value_type = Option<DealStage>)]
    stage: Option<String>,
    /// A principal id or `me`.
    owner: Option<String>,
    /// Only deals of this contact.
    contact_id: Option<i64>,
    /// Only deals of this company.
    company_id: Option<i64>,
    /// Case-insensitive text in the name.
    q: Option<String>,
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

/// A page of deals.
#[derive(Serialize, ToSchema)]
struct DealPage {
    data: Vec<entity::Model>,
    next_cursor: Option<String>,
}

/// List deals, newest first.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/deals",
    operation_id = "list_deals",
    tag = "crm",
    params(ListParams),
    responses((status = 200, description = "A page of deals", body = DealPage)),
    security(("bearer" = [])),
)]
async fn list(
    caller: Authenticated,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let params = params.into_inner();
    let stage = params
        .stage
        .as_deref()
        .map(|s| s.parse::<DealStage>().map_err(|e| invalid("stage", &e)))
        .transpose()?;
    let owner_id = match params.owner.as_deref() {
        None => None,
        Some("me") => Some(caller.id),
        Some(id) => Some(
            id.parse()
                .map_err(|_| invalid("owner", "must be a principal id or 'me'"))?,
        ),
    };
    let window = window(
        params.updated_since.as_deref(),
        params.sort.as_deref(),
        params.limit,
        params.cursor,
    )?;
    let filter = DealFilter {
        stage,
        owner_id,
        contact_id: params.contact_id,
        company_id: params.company_id,
        q: params.q,
    };
    let page = deal::list(state.reads.db(), &filter, &window).await?;
    Ok(HttpResponse::Ok().json(DealPage {
        data: page.data,
        next_cursor: page.next_cursor,
    }))
}

/// A deal's timeline, newest first.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/deals/{id}/activities",
    operation_id = "list_deal_activities",
    tag = "crm",
    params(("id" = i64, Path, description = "The deal's id"), PageParams),
    responses(
        (status = 200, description = "A page of the timeline", body = super::ActivityPage),
        (status = 404, description = "`/problems/not-found`: no such deal"),
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
    deal::find(&state.db, id).await?;
    super::timeline_page(&state, Subject::Deal, id, &params).await
}
