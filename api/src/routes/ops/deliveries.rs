//! `/api/ops/deliveries`: watching and repairing outgoing webhooks.

use crate::wire::deliveries as wire;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use actix_web::{get, post};
use domain::outbound::delivery::{self, DeliveryFilter};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, Reply};
use crate::http::list::{ListParams, listed, one_of};
use crate::http::params::IdempotencyKey;
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use wire::OutboxDeliveryOut;
use wire::{Filter, RetryManyIn};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list).service(retry_many).service(retry_one);
}

const STATES: &[&str] = &[
    delivery::PENDING,
    delivery::DELIVERING,
    delivery::FAILED,
    delivery::DELIVERED,
    delivery::DEAD,
];

listed! {
    "A page of deliveries." type DeliveryPage = Page<OutboxDeliveryOut>;
}

/// List outgoing webhook deliveries, newest first.
#[utoipa::path(
    operation_id = "list_deliveries",
    tag = "ops",
    params(Filter, ListParams),
    responses((status = 200, description = "A page of deliveries", body = DeliveryPage, example = json!(examples::delivery_page()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/deliveries")]
async fn list(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    one_of("state", filter.state.as_deref(), STATES)?;
    let mut window = page.id_window()?;
    window.before = window.before.or(filter.before);
    let filter = DeliveryFilter {
        state: filter.state.clone(),
        subscription_id: filter.subscription_id,
    };
    let rows = delivery::list(state.reads.db(), &filter, window).await?;
    Ok(HttpResponse::Ok().json(rows.map(OutboxDeliveryOut::from)))
}

/// Put one dead delivery back in line.
///
/// The same delivery with the same `webhook-id`, so a receiver that did get
/// it after all can tell it is a repeat.
#[utoipa::path(
    operation_id = "retry_delivery",
    tag = "ops",
    params(("id" = i64, Path, description = "The delivery's id"), IdempotencyKey),
    responses(
        (status = 200, description = "Retried (`retried: 1`)", body = domain::outbound::delivery::RetryReport, example = json!(examples::delivery_retried())),
        (status = 409, description = "`/problems/conflict`: no such delivery, or it is not `dead`"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/ops/deliveries/{id}/retry")]
async fn retry_one(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    idempotency::run(&state, &caller, &req, b"", KeyRule::Optional, move |txn| {
        Box::pin(async move {
            let report =
                delivery::retry_dead(txn, Some(&[id]), &DeliveryFilter::default(), false).await?;
            if report.retried == 0 {
                return Err(ApiError::Conflict(format!(
                    "delivery {id} does not exist or is not dead"
                )));
            }
            Reply::new(StatusCode::OK, &report)
        })
    })
    .await
}

/// Retry every dead delivery that matches.
///
/// With `dry_run` only counts them.
#[utoipa::path(
    operation_id = "retry_deliveries",
    tag = "ops",
    params(IdempotencyKey),
    request_body(content = RetryManyIn, example = json!({"subscription_id": 3, "dry_run": true})),
    responses((status = 200, description = "How many matched and were retried", body = domain::outbound::delivery::RetryReport, example = json!(examples::deliveries_counted()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/ops/deliveries/retry")]
async fn retry_many(caller: Caller<OpsUp>, write: Write<RetryManyIn>) -> WriteResult {
    write
        .run(&caller, KeyRule::Optional, move |txn, input, _| {
            Box::pin(async move {
                let filter = DeliveryFilter {
                    state: None,
                    subscription_id: input.subscription_id,
                };
                let report = delivery::retry_dead(txn, None, &filter, input.dry_run).await?;
                Reply::new(StatusCode::OK, &report)
            })
        })
        .await
}
