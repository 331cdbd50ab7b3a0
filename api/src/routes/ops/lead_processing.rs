//! `/api/ops/lead-processing`: watch and retry lead processing that failed
//! (ops and admin), as `/api/ops/inbox` does for webhook events.

use actix_web::{HttpResponse, web};
use actix_web::{get, post};
use chrono::Utc;
use domain::lead::failures::{self, BulkRetryRequest, RetryReport};
use domain::retry::RetryPolicy;

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::list::{ListParams, listed};
use crate::http::state::AppState;
use crate::http::write::Write;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::lead_processing::{FailureOut, ListQuery, RetryIn, RetryOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list_failures).service(retry);
}

listed! {
    "A page of lead-processing failures." type LeadProcessingFailurePage = Page<FailureOut>;
}

fn parse_state(state: Option<&str>) -> Result<Option<&'static str>, ApiError> {
    state
        .map(|s| failures::parse_state(s).map_err(ApiError::from))
        .transpose()
}

/// List leads whose processing failed, newest lead first.
#[utoipa::path(
    operation_id = "list_lead_processing_failures",
    tag = "ops",
    params(ListQuery, ListParams),
    responses(
        (status = 200, description = "A page of failures", body = LeadProcessingFailurePage, example = json!(examples::lead_processing_failure_page())),
        (status = 422, description = "`/problems/validation`: an unknown state or cursor"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/lead-processing/failures")]
async fn list_failures(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let failure_state = parse_state(query.state.as_deref())?;
    let rows = failures::list(state.reads.db(), failure_state, page.id_window()?).await?;
    Ok(HttpResponse::Ok().json(rows.map(FailureOut::from)))
}

impl RetryOut {
    /// The answer; the retried batches count in the workers' metrics.
    fn new(dry_run: bool, report: RetryReport) -> Self {
        report
            .batches
            .iter()
            .for_each(workers::lead_processor::report);
        Self {
            dry_run,
            matched: report.matched,
            retried: report.retried,
            results: report.results,
        }
    }
}

/// Process failed or dead leads again, now.
///
/// Each lead is claimed by the same statement as a worker's batch and
/// processed before the answer, with a fresh budget of attempts: two
/// retries at once, or a retry and a worker, process it once (one set of
/// activities and outbox events). With `lead_id`, one lead in either
/// state; otherwise up to `limit` leads in `state` (`dead` by default).
#[utoipa::path(
    operation_id = "retry_lead_processing",
    tag = "ops",
    request_body(content = RetryIn, example = json!({"state": "dead", "limit": 100, "dry_run": true})),
    responses(
        (status = 200, description = "What matched and what processing it came to", body = RetryOut, example = json!(examples::lead_processing_retry_counted())),
        (status = 404, description = "`/problems/not-found`: no such lead"),
        (status = 409, description = "`/problems/conflict`: the lead has no failure to retry (processed, or being processed now)"),
        (status = 422, description = "`/problems/validation`: an unknown state, a limit out of range, or `lead_id` with bulk fields"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/ops/lead-processing/retry")]
async fn retry(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    write: Write<RetryIn>,
) -> Result<HttpResponse, ApiError> {
    let input = write.read().await?.input;
    let policy = RetryPolicy::default();
    if let Some(lead_id) = input.lead_id {
        if input.state.is_some() || input.limit.is_some() || input.dry_run {
            return Err(ApiError::invalid(
                "lead_id",
                "give either lead_id or state, limit and dry_run, not both",
            ));
        }
        let report = failures::retry_one(&state.db, lead_id, &policy, Utc::now())
            .await
            .map_err(|e| match e {
                domain::Error::NotFound => ApiError::NotFound(format!("no lead {lead_id}")),
                other => other.into(),
            })?;
        tracing::info!(lead_id, principal = caller.id, "lead processing retried");
        return Ok(HttpResponse::Ok().json(RetryOut::new(false, report)));
    }
    let request = BulkRetryRequest {
        state: parse_state(input.state.as_deref())?.unwrap_or(domain::lead::backlog::DEAD),
        limit: input.limit.unwrap_or(failures::DEFAULT_RETRY_LIMIT),
        dry_run: input.dry_run,
    };
    let report = failures::retry_matching(&state.db, &request, &policy).await?;
    if !input.dry_run {
        tracing::info!(
            count = report.retried,
            principal = caller.id,
            "bulk lead processing retry"
        );
    }
    Ok(HttpResponse::Ok().json(RetryOut::new(input.dry_run, report)))
}
