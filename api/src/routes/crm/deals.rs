//! `/api/deals`: stage machine `open → won | lost`, amounts in minor units.
//! A deal has no natural key, so creating one requires an `Idempotency-Key`.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::auth::Role;
use domain::crm::deal::{self, DealFilter, DealInput, DealPatch, DealStage};
use domain::crm::timeline::Subject;
use domain::entities::deal as entity;
use serde::{Deserialize, Serialize};

use super::{PageParams, author, get_tagged, invalid, present, tagged, window};
use crate::auth::{Authenticated, SALES_AND_UP};
use crate::body::{parse_json, read_json_bytes};
use crate::correlation::CorrelationId;
use crate::error::ApiError;
use crate::idempotency::{self, KeyRule, if_match_version};
use crate::startup::AppState;

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

/// A deal as the API takes it, also inside a conversion request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DealIn {
    pub name: Option<String>,
    pub amount_cents: Option<i64>,
    pub currency: Option<String>,
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

fn reply(status: StatusCode, deal: &entity::Model) -> Result<crate::idempotency::Reply, ApiError> {
    tagged(status, deal, deal.version)
}

/// Creates an `open` deal; the owner defaults to the caller when a sales principal.
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

async fn get(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let deal = deal::find(&state.db, id.into_inner()).await?;
    Ok(get_tagged(&deal, deal.version))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchIn {
    name: Option<String>,
    amount_cents: Option<i64>,
    currency: Option<String>,
    #[serde(default, deserialize_with = "present")]
    owner_id: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    contact_id: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    company_id: Option<Option<i64>>,
}

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
    let if_match = if_match_version(&req)?;
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
                let deal = deal::update(txn, id, patch, if_match, &author).await?;
                reply(StatusCode::OK, &deal)
            })
        },
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransitionIn {
    to: DealStage,
    reason: Option<String>,
}

/// Moves a deal to `won` or `lost`; honours `If-Match` and `Idempotency-Key`.
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
    let if_match = if_match_version(&req)?;
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
                    deal::transition(txn, id, input.to, input.reason, if_match, &author).await?;
                reply(StatusCode::OK, &deal)
            })
        },
    )
    .await
}

#[derive(Deserialize)]
struct ListParams {
    stage: Option<String>,
    owner: Option<String>,
    contact_id: Option<i64>,
    company_id: Option<i64>,
    q: Option<String>,
    updated_since: Option<String>,
    sort: Option<String>,
    limit: Option<u64>,
    cursor: Option<String>,
}

#[derive(Serialize)]
struct DealPage {
    data: Vec<entity::Model>,
    next_cursor: Option<String>,
}

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
    let page = deal::list(&state.db, &filter, &window).await?;
    Ok(HttpResponse::Ok().json(DealPage {
        data: page.data,
        next_cursor: page.next_cursor,
    }))
}

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
