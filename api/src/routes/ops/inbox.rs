//! `/api/ops/inbox`: watch and repair webhook processing (ops and admin).

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use actix_web::{get, post};
use chrono::{DateTime, Utc};
use domain::entities::inbox_event;
use domain::inbound::inbox::InboxState;
use domain::inbound::inbox::ops::{self, BulkRetryRequest, InboxFilter};
use domain::retry::RetryPolicy;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::list::{ListParams, Page, listed};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::Write;
use crate::routes::Routes;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list_events)
        .service(retry_matching)
        .service(get_event)
        .service(retry_event);
}

/// An inbox event as ops see it; `detail` adds headers and body.
#[derive(Serialize, ToSchema)]
#[schema(as = InboxEvent)]
pub struct InboxEventOut {
    id: i64,
    source: String,
    /// The sender's id of the event (the dedupe key with `source`).
    event_id: String,
    /// Where `event_id` came from: a header, a JSON pointer, or the body hash.
    event_id_from: String,
    event_type: Option<String>,
    #[schema(value_type = InboxState)]
    state: String,
    /// How many times the sender delivered it (duplicates included).
    deliveries: i32,
    /// Processing attempts in the current budget.
    attempts: i32,
    /// Ops retries so far.
    retries: i32,
    last_error: Option<String>,
    next_attempt_at: Option<DateTime<Utc>>,
    locked_by: Option<String>,
    outcome: Option<String>,
    lead_id: Option<i64>,
    correlation_id: Option<String>,
    received_at: DateTime<Utc>,
    last_delivery_at: DateTime<Utc>,
    processed_at: Option<DateTime<Utc>>,
    updated_at: DateTime<Utc>,
    /// `GET /api/ops/inbox/{id}` only: the kept headers (never signatures).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    headers: Option<Value>,
    /// The body as JSON; `body_text` instead when it is not JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    body: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_text: Option<String>,
}

impl InboxEventOut {
    pub fn summary(e: inbox_event::Model) -> Self {
        Self {
            id: e.id,
            source: e.source,
            event_id: e.event_id,
            event_id_from: e.event_id_from,
            event_type: e.event_type,
            state: e.state,
            deliveries: e.deliveries,
            attempts: e.attempts,
            retries: e.retries,
            last_error: e.last_error,
            next_attempt_at: e.next_attempt_at,
            locked_by: e.locked_by,
            outcome: e.outcome,
            lead_id: e.lead_id,
            correlation_id: e.correlation_id,
            received_at: e.received_at,
            last_delivery_at: e.last_delivery_at,
            processed_at: e.processed_at,
            updated_at: e.updated_at,
            headers: None,
            body: None,
            body_text: None,
        }
    }

    pub fn detail(e: inbox_event::Model) -> Self {
        let headers = e.headers.clone();
        let parsed: Option<Value> = serde_json::from_slice(&e.body).ok();
        let body_text = parsed
            .is_none()
            .then(|| String::from_utf8_lossy(&e.body).into_owned());
        Self {
            headers: Some(headers),
            body: parsed,
            body_text,
            ..Self::summary(e)
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only events of this source.
    source: Option<String>,
    /// Only events in this state.
    #[param(value_type = Option<InboxState>)]
    state: Option<String>,
    /// Received at or after (RFC 3339).
    received_since: Option<DateTime<Utc>>,
    /// Received before (RFC 3339).
    received_until: Option<DateTime<Utc>>,
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
    responses((status = 200, description = "A page of events", body = InboxPage)),
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
    let page = Page::from(ops::list(state.reads.db(), &filter, page.id_window()?).await?);
    Ok(HttpResponse::Ok().json(page.map(InboxEventOut::summary)))
}

/// One inbox event, with its kept headers and its body.
#[utoipa::path(
    operation_id = "get_inbox_event",
    tag = "ops",
    params(("id" = i64, Path, description = "The event's id")),
    responses(
        (status = 200, description = "The event", body = InboxEventOut),
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
    Ok(HttpResponse::Ok().json(InboxEventOut::detail(event)))
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
        (status = 202, description = "Queued again", body = InboxEventOut),
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

/// Which events to retry: any retryable state unless `state` names one.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = InboxRetryIn)]
struct BulkRetryIn {
    source: Option<String>,
    #[schema(value_type = Option<InboxState>)]
    state: Option<String>,
    received_since: Option<DateTime<Utc>>,
    received_until: Option<DateTime<Utc>>,
    /// Take `processed` events too: they re-apply historic payloads.
    #[serde(default)]
    include_processed: bool,
    /// Only count them.
    #[serde(default)]
    dry_run: bool,
}

/// What matched, and what re-applying it came to.
#[derive(Serialize, ToSchema)]
#[schema(as = InboxRetryOut)]
struct BulkRetryOut {
    dry_run: bool,
    /// Matched events that can be re-applied.
    matched: u64,
    /// Events the filter matched whose body was erased (with their person,
    /// or at the end of their retention): skipped, left as they are.
    skipped_erased: u64,
    /// The matched events by state.
    by_state: BTreeMap<String, u64>,
    retried: u64,
    /// The retried events by their new state (`processed`, `skipped`,
    /// `failed`: the workers retry it later, `dead`).
    results: BTreeMap<String, u64>,
    /// Present when processed events are among those matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
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
    request_body = BulkRetryIn,
    responses(
        (status = 200, description = "What matched and what re-applying it came to", body = BulkRetryOut),
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
