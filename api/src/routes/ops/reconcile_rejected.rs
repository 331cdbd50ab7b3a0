//! `/api/ops/reconcile/rejected`: the records reconcile pages rejected, and
//! re-applying them after a mapping fix (ops and admin).

use actix_web::{HttpRequest, HttpResponse, web};
use domain::FieldError;
use domain::entities::reconcile_rejected;
use domain::reconcile::rejected::{self, RejectedFilter};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::auth::{Authenticated, OPS_AND_UP};
use crate::http::body::read_json;
use crate::http::error::ApiError;
use crate::http::state::AppState;

const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 200;

/// Registered before `/api/ops/reconcile/{source}`, which would take the
/// path otherwise.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/ops/reconcile/rejected", web::get().to(list))
        .route("/api/ops/reconcile/rejected/retry", web::post().to(retry));
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list, retry))]
pub struct Api;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// Only records of this source.
    source: Option<String>,
    /// `rejected` (waiting for a retry) or `resolved`.
    state: Option<String>,
    /// Page size, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// A page of rejected reconcile records.
#[derive(Serialize, ToSchema)]
#[schema(as = ReconcileRejectedPage)]
struct RejectedPage {
    data: Vec<reconcile_rejected::Model>,
    next_cursor: Option<String>,
}

/// List the records reconcile rejected, newest first.
///
/// **Roles:** ops, admin.
///
/// A record that does not map to a lead is kept with its source, run and
/// reason while the run moves on; once the mapping is fixed,
/// `POST /api/ops/reconcile/rejected/retry` re-applies it.
#[utoipa::path(
    get,
    path = "/api/ops/reconcile/rejected",
    operation_id = "list_reconcile_rejected",
    tag = "ops",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of records", body = RejectedPage),
        (status = 422, description = "`/problems/validation`: a bad state, limit or cursor"),
    ),
    security(("bearer" = [])),
)]
async fn list(
    caller: Authenticated,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    let q = query.into_inner();
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(invalid("limit", "must be between 1 and 200"));
    }
    if q.state
        .as_deref()
        .is_some_and(|s| ![rejected::REJECTED, rejected::RESOLVED].contains(&s))
    {
        return Err(invalid("state", "must be rejected or resolved"));
    }
    let before = q
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<i64>()
                .map_err(|_| invalid("cursor", "is not a cursor we issued"))
        })
        .transpose()?;
    let filter = RejectedFilter {
        source: q.source,
        state: q.state,
    };
    let data = rejected::list(&state.db, &filter, before, limit).await?;
    let next_cursor = (data.len() as u64 == limit)
        .then(|| data.last().map(|r| r.id.to_string()))
        .flatten();
    Ok(HttpResponse::Ok().json(RejectedPage { data, next_cursor }))
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::Validation(vec![FieldError::new(field, message)])
}

/// Which rejected records to retry: one source's, or all.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ReconcileRejectedRetryIn)]
struct RetryIn {
    source: Option<String>,
}

/// What a retry came to.
#[derive(Serialize, ToSchema)]
#[schema(as = ReconcileRejectedRetryOut)]
struct RetryOut {
    retried: u64,
    /// Applied now, each once, and marked `resolved`.
    resolved: u64,
    /// Still do not map; their reason is updated.
    still_rejected: u64,
}

/// Re-apply the rejected records, after a mapping fix.
///
/// **Roles:** ops, admin.
///
/// Each `rejected` record is mapped again by its source's current mapping
/// and, if it now maps, written through the same write path as reconcile
/// (origin `reconcile`) and marked `resolved` in the same transaction: a
/// record is never applied twice, however many retries run at once.
#[utoipa::path(
    post,
    path = "/api/ops/reconcile/rejected/retry",
    operation_id = "retry_reconcile_rejected",
    tag = "ops",
    request_body = RetryIn,
    responses((status = 200, description = "What the retry came to", body = RetryOut)),
    security(("bearer" = [])),
)]
async fn retry(
    caller: Authenticated,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    let input: RetryIn = read_json(&req, body, state.http.max_body_bytes).await?;
    let done = rejected::retry(&state.db, input.source.as_deref()).await?;
    tracing::info!(
        retried = done.retried,
        resolved = done.resolved,
        principal = caller.id,
        "rejected reconcile records retried"
    );
    Ok(HttpResponse::Ok().json(RetryOut {
        retried: done.retried,
        resolved: done.resolved,
        still_rejected: done.still_rejected,
    }))
}
