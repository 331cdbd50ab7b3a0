//! `/api/ops/inbox`: watch and repair webhook processing (ops and admin).

use actix_web::{HttpResponse, web};
use actix_web::{get, post};
use chrono::Utc;
use domain::inbound::inbox::InboxState;
use domain::inbound::inbox::ops::{self, BulkRetryRequest, InboxFilter};
use domain::retry::RetryPolicy;

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::list::{ListParams, listed};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::Write;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::inbox::{BulkRetryIn, BulkRetryOut, InboxEventOut, ListQuery};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list_events)
        .service(retry_matching)
        .service(get_event)
        .service(retry_event);
}

listed! {
    "A page of inbox events." type InboxPage = Page<InboxEventOut>;
}

fn parse_state(state: Option<&str>) -> Result<Option<InboxState>, ApiError> {
    state
        .map(|s| s.parse().map_err(|e: String| ApiError::invalid("state", e)))
        .transpose()
}

/// List inbox events (webhook deliveries, one per event), newest first.
#[utoipa::path(
    operation_id = "list_inbox_events",
    tag = "ops",
    params(ListQuery, ListParams),
    responses((status = 200, description = "A page of events", body = InboxPage, example = json!(examples::inbox_page()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/inbox")]
async fn list_events(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let filter = InboxFilter {
        source: q.source,
        state: parse_state(q.state.as_deref())?,
        received_since: q.received_since,
        received_until: q.received_until,
    };
    let page = ops::list(state.reads.db(), &filter, page.id_window()?).await?;
    Ok(HttpResponse::Ok().json(page.map(InboxEventOut::summary)))
}

/// One inbox event, with its kept headers and its body.
///
/// Every string of the headers and the body is masked as log lines are
/// (tokens, secrets, signatures, email addresses, phone numbers:
/// `***@example.com`); `verification` says how its delivery was verified,
/// `state`, `outcome` and `lead_id` what it became. The lead's export
/// (`GET /api/leads/{id}/export`) has the bodies unmasked.
#[utoipa::path(
    operation_id = "get_inbox_event",
    tag = "ops",
    params(("id" = i64, Path, description = "The event's id")),
    responses(
        (status = 200, description = "The event", body = InboxEventOut, example = json!(examples::inbox_event_detail())),
        (status = 404, description = "`/problems/not-found`: no such event"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/inbox/{id}")]
async fn get_event(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    let event = ops::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no inbox event {id}")))?;
    Ok(HttpResponse::Ok().json(InboxEventOut::shown(event)))
}

/// Send one event back for processing.
///
/// A `failed`, `dead`, `skipped` or `processed` event goes back to
/// `received` with a fresh budget of attempts. The same row is reprocessed —
/// same source, event id and natural-key upsert — so it never creates a
/// second lead. An event whose body was erased (with its person, or at the
/// end of its retention) has nothing to process: `409`, and it stays as it is.
#[utoipa::path(
    operation_id = "retry_inbox_event",
    tag = "ops",
    params(("id" = i64, Path, description = "The event's id")),
    responses(
        (status = 202, description = "Queued again", body = InboxEventOut, example = json!(examples::inbox_event_requeued())),
        (status = 404, description = "`/problems/not-found`: no such event"),
        (status = 409, description = "`/problems/conflict`: the event is already waiting or being processed; `/problems/inbox-event-erased`: its body was erased, nothing is left to process"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/ops/inbox/{id}/retry")]
async fn retry_event(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    let event = ops::retry(&state.db, id, Utc::now())
        .await
        .map_err(|e| match e {
            domain::Error::NotFound => ApiError::NotFound(format!("no inbox event {id}")),
            other => other.into(),
        })?;
    state.db.enqueued(domain::store::Work::Inbox);
    tracing::info!(
        inbox_event_id = id,
        principal = caller.id,
        "inbox event retry requested"
    );
    Ok(HttpResponse::Accepted().json(InboxEventOut::summary(event)))
}

/// Retry every event that matches a filter.
///
/// Events are re-applied one at a time in the order they were received, so
/// two events for one lead end with the later one on the lead; the answer
/// says what each came to. Events whose body was erased are skipped and
/// counted in `skipped_erased`. `processed` events are refused unless
/// `include_processed` is true: they re-apply historic payloads. With
/// `dry_run`, only counts them by state.
#[utoipa::path(
    operation_id = "retry_inbox_events",
    tag = "ops",
    request_body(content = BulkRetryIn, example = json!({"source": "partner", "state": "dead", "received_since": "2026-11-30T00:00:00Z", "received_until": "2026-12-01T00:00:00Z", "include_processed": false, "dry_run": true})),
    responses(
        (status = 200, description = "What matched and what re-applying it came to", body = BulkRetryOut, example = json!(examples::inbox_retry_counted())),
        (status = 422, description = "`/problems/validation`: a state that cannot be retried, or `processed` without `include_processed`"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/ops/inbox/retry")]
async fn retry_matching(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    write: Write<BulkRetryIn>,
) -> Result<HttpResponse, ApiError> {
    let input = write.read().await?.input;
    let request = BulkRetryRequest {
        filter: InboxFilter {
            source: input.source,
            state: parse_state(input.state.as_deref())?,
            received_since: input.received_since,
            received_until: input.received_until,
        },
        include_processed: input.include_processed,
        dry_run: input.dry_run,
    };
    let done = ops::retry_matching(&state.db, &request, &RetryPolicy::default()).await?;
    if !input.dry_run {
        tracing::info!(
            count = done.retried,
            principal = caller.id,
            "bulk inbox retry"
        );
    }
    let note = ops::historic_note(&done, input.dry_run);
    Ok(HttpResponse::Ok().json(BulkRetryOut {
        dry_run: input.dry_run,
        matched: done.matched,
        skipped_erased: done.skipped_erased,
        by_state: done.by_state,
        retried: done.retried,
        results: done.results,
        note,
    }))
}
