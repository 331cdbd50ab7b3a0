//! `/api/ops/reconcile/rejected`: the records reconcile pages rejected, and
//! re-applying them after a mapping fix (ops and admin).

use actix_web::{HttpResponse, web};
use actix_web::{get, post};
use domain::reconcile::rejected::{self, RejectedFilter};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::list::{ListParams, listed, one_of};
use crate::http::state::AppState;
use crate::http::write::Write;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::reconcile::ReconcileRejectedOut;
use crate::wire::reconcile_rejected::{Filter, RetryIn, RetryOut};

/// Registered before `/api/ops/reconcile/{source}`, which would take the
/// path otherwise.
pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list);
    cfg.service(retry);
}

listed! {
    "A page of rejected reconcile records." type ReconcileRejectedPage = Page<ReconcileRejectedOut>;
}

/// List the records reconcile rejected, newest first.
///
/// A record that does not map to a lead is kept with its source, run and
/// reason while the run moves on; once the mapping is fixed,
/// `POST /api/ops/reconcile/rejected/retry` re-applies it.
#[utoipa::path(
    operation_id = "list_reconcile_rejected",
    tag = "ops",
    params(Filter, ListParams),
    responses(
        (status = 200, description = "A page of records", body = ReconcileRejectedPage, example = json!(examples::reconcile_rejected_page())),
        (status = 422, description = "`/problems/validation`: a bad state or cursor"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/reconcile/rejected")]
async fn list(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let Filter {
        source,
        state: wanted,
    } = filter.into_inner();
    one_of(
        "state",
        wanted.as_deref(),
        &[rejected::REJECTED, rejected::RESOLVED],
    )?;
    let filter = RejectedFilter {
        source,
        state: wanted,
    };
    let rows = rejected::list(state.reads.db(), &filter, page.id_window()?).await?;
    let page = rows.map(ReconcileRejectedOut::from);
    Ok(HttpResponse::Ok().json(page))
}

/// Re-apply the rejected records, after a mapping fix.
///
/// Each `rejected` record is mapped again by its source's current mapping
/// and, if it now maps, written through the same write path as reconcile
/// (origin `reconcile`) and marked `resolved` in the same transaction: a
/// record is never applied twice, however many retries run at once.
#[utoipa::path(
    operation_id = "retry_reconcile_rejected",
    tag = "ops",
    request_body(content = RetryIn, example = json!({"source": "partner"})),
    responses((status = 200, description = "What the retry came to", body = RetryOut, example = json!(examples::reconcile_rejected_retried()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/ops/reconcile/rejected/retry")]
async fn retry(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    write: Write<RetryIn>,
) -> Result<HttpResponse, ApiError> {
    let input = write.read().await?.input;
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
