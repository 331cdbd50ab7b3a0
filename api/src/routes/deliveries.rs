//! `/api/ops/deliveries`: watching and repairing outgoing webhooks.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::FieldError;
use domain::delivery::{self, DeliveryFilter};
use domain::entities::outbox_delivery;
use serde::{Deserialize, Serialize};

use crate::auth::{Authenticated, OPS_AND_UP};
use crate::body::{parse_json, read_json_bytes};
use crate::error::ApiError;
use crate::idempotency::{self, KeyRule, Reply};
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/ops/deliveries")
            .route("", web::get().to(list))
            .route("/retry", web::post().to(retry_many))
            .route("/{id}/retry", web::post().to(retry_one)),
    );
}

const STATES: &[&str] = &[
    delivery::PENDING,
    delivery::DELIVERING,
    delivery::FAILED,
    delivery::DELIVERED,
    delivery::DEAD,
];

#[derive(Deserialize)]
struct ListParams {
    state: Option<String>,
    subscription_id: Option<i64>,
    limit: Option<u64>,
    /// Continue below this delivery id (the last one of the previous page).
    before: Option<i64>,
}

#[derive(Serialize)]
struct DeliveryPage {
    data: Vec<outbox_delivery::Model>,
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

async fn list(
    caller: Authenticated,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    check_state(&params.state)?;
    let filter = DeliveryFilter {
        state: params.state.clone(),
        subscription_id: params.subscription_id,
    };
    let limit = domain::lead_query::clamp_limit(params.limit);
    let data = delivery::list(&state.db, &filter, limit, params.before).await?;
    let next_before = (data.len() as u64 == limit)
        .then(|| data.last().map(|d| d.id))
        .flatten();
    Ok(HttpResponse::Ok().json(DeliveryPage { data, next_before }))
}

async fn retry_one(
    caller: Authenticated,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryManyIn {
    subscription_id: Option<i64>,
    #[serde(default)]
    dry_run: bool,
}

/// Retries every dead delivery matching the filter; `dry_run` only counts.
async fn retry_many(
    caller: Authenticated,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: RetryManyIn = parse_json(&body)?;
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Optional,
        move |txn| {
            Box::pin(async move {
                let filter = DeliveryFilter {
                    state: None,
                    subscription_id: input.subscription_id,
                };
                let report = delivery::retry_dead(txn, None, &filter, input.dry_run).await?;
                Reply::new(StatusCode::OK, &report)
            })
        },
    )
    .await
}
