//! `/api/deals`: stage machine `open → won | lost`, amounts in minor units.
//! A deal has no natural key, so creating one requires an `Idempotency-Key`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, patch, post};
use domain::auth::Role;
use domain::crm::deal::{self, DealFilter, DealStage};
use domain::crm::timeline::Subject;
use domain::ids::{CompanyId, ContactId, PrincipalId};

use super::wire::DealOut;
use crate::http::auth::{Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply, ok_tagged};
use crate::http::list::{ListParams, WindowParams};
use crate::http::params::{IdempotencyKey, IdempotencyKeyRequired, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::deals::{DealIn, DealPatch, Filter, TransitionIn};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(create)
        .service(list)
        .service(get)
        .service(patch)
        .service(transition)
        .service(activities);
}

/// Create an `open` deal.
///
/// A deal has no natural key, so `Idempotency-Key` is required. The owner
/// defaults to the caller when a `sales` principal (else `owner_id` is
/// required); it must be an active `sales` principal.
#[utoipa::path(
    operation_id = "create_deal",
    tag = "crm",
    params(IdempotencyKeyRequired),
    request_body(content = DealIn, example = json!({"name": "Acme: fleet tracking, 40 vans", "amount_cents": 1850000, "currency": "EUR", "owner_id": 7, "contact_id": 31, "company_id": 12})),
    responses(
        (status = 201, description = "The new deal", body = DealOut,
            headers(("Location" = String), ("ETag" = String)), example = json!(examples::deal())),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/deals")]
async fn create(caller: Caller<SalesUp>, write: Write<DealIn>) -> WriteResult {
    let author = caller.actor();
    let write = write.read().await?.try_map(|input| {
        let mut input = input.into_input();
        if input.owner_id.is_none() {
            if caller.role != Role::Sales {
                return Err(ApiError::invalid(
                    "owner_id",
                    "is required (an active sales principal)",
                ));
            }
            input.owner_id = Some(PrincipalId(caller.id));
        }
        Ok(input)
    })?;
    write
        .run(&caller, KeyRule::Required, move |txn, input, _| {
            Box::pin(async move {
                let deal = deal::create(txn, input, None, &author).await?;
                let location = format!("/api/deals/{}", deal.id);
                Ok(Reply::tagged(StatusCode::CREATED, &DealOut::from(deal))?.location(location))
            })
        })
        .await
}

/// One deal.
#[utoipa::path(
    operation_id = "get_deal",
    tag = "crm",
    params(("id" = i64, Path, description = "The deal's id")),
    responses(
        (status = 200, description = "The deal", body = DealOut, headers(("ETag" = String)), example = json!(examples::deal())),
        (status = 404, description = "`/problems/not-found`: no such deal"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/deals/{id}")]
async fn get(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let deal = deal::find(&state.db, id.into_inner().0).await?;
    Ok(ok_tagged(&DealOut::from(deal)))
}

/// Change a deal's name, amount, currency, owner or links.
#[utoipa::path(
    operation_id = "patch_deal",
    tag = "crm",
    params(("id" = i64, Path, description = "The deal's id"), IdempotencyKey, IfMatch),
    request_body(content = DealPatch, example = json!({"amount_cents": 2100000, "owner_id": 9})),
    responses(
        (status = 200, description = "The deal after the change", body = DealOut, headers(("ETag" = String)), example = json!(examples::deal_changed())),
        (status = 404, description = "`/problems/not-found`: no such deal"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[patch("/api/deals/{id}")]
async fn patch(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<DealPatch>,
) -> WriteResult {
    let (id, author) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let deal = deal::update(txn, id, input, &if_match, &author).await?;
                Reply::tagged(StatusCode::OK, &DealOut::from(deal))
            })
        })
        .await
}

/// Close a deal: `won` or `lost`.
///
/// A deal's stage is `open → won | lost`; a closed deal stays closed. Writes
/// the outbox event `deal.stage_changed`.
#[utoipa::path(
    operation_id = "transition_deal",
    tag = "crm",
    params(("id" = i64, Path, description = "The deal's id"), IdempotencyKey, IfMatch),
    request_body(content = TransitionIn, example = json!({"to": "won", "reason": "Signed the annual contract"})),
    responses(
        (status = 200, description = "The deal after the move", body = DealOut, headers(("ETag" = String)), example = json!(examples::deal_won())),
        (status = 404, description = "`/problems/not-found`: no such deal"),
        (status = 409, description = "`/problems/illegal-transition`: the stage machine forbids the move; `allowed` lists the legal targets."),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/deals/{id}/transitions")]
async fn transition(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<TransitionIn>,
) -> WriteResult {
    let (id, author) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let deal =
                    deal::transition(txn, id, input.to, input.reason, &if_match, &author).await?;
                Reply::tagged(StatusCode::OK, &DealOut::from(deal))
            })
        })
        .await
}

/// List deals, newest first.
#[utoipa::path(
    operation_id = "list_deals",
    tag = "crm",
    params(Filter, WindowParams, ListParams),
    responses((status = 200, description = "A page of deals", body = super::DealPage, example = json!(examples::deal_page()))),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/deals")]
async fn list(
    caller: Caller<SalesUp>,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
    window: web::Query<WindowParams>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let window = page.into_inner().window(&window)?;
    let params = filter.into_inner();
    let stage = params
        .stage
        .as_deref()
        .map(|s| {
            s.parse::<DealStage>()
                .map_err(|e| ApiError::invalid("stage", e))
        })
        .transpose()?;
    let owner_id = super::owner_filter(params.owner.as_deref(), caller.id)?;
    let filter = DealFilter {
        stage,
        owner_id: owner_id.map(PrincipalId),
        contact_id: params.contact_id.map(ContactId),
        company_id: params.company_id.map(CompanyId),
        q: params.q,
    };
    let page = deal::list(state.reads.db(), &filter, &window).await?;
    Ok(HttpResponse::Ok().json(page.map(DealOut::from)))
}

/// A deal's timeline, newest first.
#[utoipa::path(
    operation_id = "list_deal_activities",
    tag = "crm",
    params(("id" = i64, Path, description = "The deal's id"), ListParams),
    responses(
        (status = 200, description = "A page of the timeline", body = super::CrmActivityPage, example = json!(examples::deal_activity_page())),
        (status = 404, description = "`/problems/not-found`: no such deal"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/deals/{id}/activities")]
async fn activities(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    deal::find(&state.db, id).await?;
    super::timeline_page(&state, Subject::Deal, id, page.into_inner()).await
}
