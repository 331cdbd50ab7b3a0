//! `/api/ops/deliveries`: watching and repairing outgoing webhooks.

pub mod wire;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use actix_web::{get, post};
use domain::FieldError;
use domain::outbound::delivery::{self, DeliveryFilter};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, Reply};
use crate::http::params::IdempotencyKey;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::routes::Routes;
use wire::OutboxDeliveryOut;

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

#[derive(Deserialize, IntoParams)]
struct ListParams {
    /// `pending`, `delivering`, `failed`, `delivered` or `dead`.
    #[param(pattern = "^(pending|delivering|failed|delivered|dead)$")]
    state: Option<String>,
    /// Only deliveries to this subscription.
    subscription_id: Option<i64>,
    /// Page size, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
    /// Continue below this delivery id (the last one of the previous page).
    before: Option<i64>,
}

/// A page of deliveries.
#[derive(Serialize, ToSchema)]
struct DeliveryPage {
    data: Vec<OutboxDeliveryOut>,
    /// Pass as `before` for the next page; `null` on the last page.
    next_before: Option<i64>,
}

fn check_state(state: &Option<String>) -> Result<(), ApiError> {
    match state {
        Some(s) if !STATES.contains(&s.as_str()) => {
            Err(ApiError::Validation(vec![FieldError::new(
                "state",
                format!("must be one of {}", STATES.join(", ")),
            )]))
        }
        _ => Ok(()),
    }
}

/// List outgoing webhook deliveries, newest first.
///
/// **Roles:** ops, admin.
#[utoipa::path(
    operation_id = "list_deliveries",
    tag = "ops",
    params(ListParams),
    responses((status = 200, description = "A page of deliveries", body = DeliveryPage)),
    security(("bearer" = [])),
)]
#[get("/api/ops/deliveries")]
async fn list(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    check_state(&params.state)?;
    let filter = DeliveryFilter {
        state: params.state.clone(),
        subscription_id: params.subscription_id,
    };
    let limit = domain::page::clamp_limit(params.limit);
    let data = delivery::list(state.reads.db(), &filter, limit, params.before).await?;
    let next_before = (data.len() as u64 == limit)
        .then(|| data.last().map(|d| d.id))
        .flatten();
    let data = data.into_iter().map(OutboxDeliveryOut::from).collect();
    Ok(HttpResponse::Ok().json(DeliveryPage { data, next_before }))
}

/// Put one dead delivery back in line.
///
/// **Roles:** ops, admin.
///
/// The same delivery with the same `webhook-id`, so a receiver that did get
/// it after all can tell it is a repeat.
#[utoipa::path(
    operation_id = "retry_delivery",
    tag = "ops",
    params(("id" = i64, Path, description = "The delivery's id"), IdempotencyKey),
    responses(
        (status = 200, description = "Retried (`retried: 1`)", body = domain::outbound::delivery::RetryReport),
        (status = 409, description = "`/problems/conflict`: no such delivery, or it is not `dead`"),
    ),
    security(("bearer" = [])),
)]
#[post("/api/ops/deliveries/{id}/retry")]
async fn retry_one(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
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

/// Which dead deliveries to retry.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DeliveryRetryIn)]
struct RetryManyIn {
    /// Only deliveries to this subscription.
    subscription_id: Option<i64>,
    /// Only count them.
    #[serde(default)]
    dry_run: bool,
}

/// Retry every dead delivery that matches.
///
/// **Roles:** ops, admin.
///
/// With `dry_run` only counts them.
#[utoipa::path(
    operation_id = "retry_deliveries",
    tag = "ops",
    params(IdempotencyKey),
    request_body = RetryManyIn,
    responses((status = 200, description = "How many matched and were retried", body = domain::outbound::delivery::RetryReport)),
    security(("bearer" = [])),
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
