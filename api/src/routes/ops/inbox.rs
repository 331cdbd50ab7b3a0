//! `/api/ops/inbox`: watch and repair webhook processing (ops and admin).

use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{DateTime, Utc};
use domain::FieldError;
use domain::entities::inbox_event;
use domain::inbound::inbox::InboxState;
use domain::inbound::inbox::ops::{self, InboxFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::http::auth::{Caller, OpsUp};
use crate::http::body::read_json;
use crate::http::error::ApiError;
use crate::http::list::{Page, listed};
use crate::http::state::AppState;

const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 200;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/ops/inbox")
            .route("", web::get().to(list_events))
            .route("/retry", web::post().to(retry_matching))
            .route("/{id}", web::get().to(get_event))
            .route("/{id}/retry", web::post().to(retry_event)),
    );
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list_events, get_event, retry_event, retry_matching))]
pub struct Api;

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
#[serde(deny_unknown_fields)]
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
    /// Page size, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

listed! {
    "A page of inbox events." type InboxPage = Page<InboxEventOut>;
}

fn parse_state(state: Option<&str>) -> Result<Option<InboxState>, ApiError> {
    state
        .map(|s| {
            s.parse()
                .map_err(|e: String| ApiError::Validation(vec![FieldError::new("state", e)]))
        })
        .transpose()
}

/// List inbox events (webhook deliveries, one per event), newest first.
///
/// **Roles:** ops, admin.
#[utoipa::path(
    get,
    path = "/api/ops/inbox",
    operation_id = "list_inbox_events",
    tag = "ops",
    params(ListQuery),
    responses((status = 200, description = "A page of events", body = InboxPage)),
    security(("bearer" = [])),
)]
async fn list_events(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::Validation(vec![FieldError::new(
            "limit",
            "must be between 1 and 200",
        )]));
    }
    let before = q
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<i64>().map_err(|_| {
                ApiError::Validation(vec![FieldError::new("cursor", "is not a cursor we issued")])
            })
        })
        .transpose()?;
    let filter = InboxFilter {
        source: q.source,
        state: parse_state(q.state.as_deref())?,
        received_since: q.received_since,
        received_until: q.received_until,
    };
    let events = ops::list(state.reads.db(), &filter, before, limit).await?;
    // A full page may have more after it; its last id continues the list.
    let next_cursor = (events.len() as u64 == limit)
        .then(|| events.last().map(|e| e.id.to_string()))
        .flatten();
    let page = Page {
        data: events,
        next_cursor,
    };
    Ok(HttpResponse::Ok().json(page.map(InboxEventOut::summary)))
}

/// One inbox event, with its kept headers and its body.
///
/// **Roles:** ops, admin.
#[utoipa::path(
    get,
    path = "/api/ops/inbox/{id}",
    operation_id = "get_inbox_event",
    tag = "ops",
    params(("id" = i64, Path, description = "The event's id")),
    responses(
        (status = 200, description = "The event", body = InboxEventOut),
        (status = 404, description = "`/problems/not-found`: no such event"),
    ),
    security(("bearer" = [])),
)]
async fn get_event(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let event = ops::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no inbox event {id}")))?;
    Ok(HttpResponse::Ok().json(InboxEventOut::detail(event)))
}

/// Send one event back for processing.
///
/// **Roles:** ops, admin.
///
/// A `failed`, `dead`, `skipped` or `processed` event goes back to
/// `received` with a fresh budget of attempts. The same row is reprocessed —
/// same source, event id and natural-key upsert — so it never creates a
/// second lead.
#[utoipa::path(
    post,
    path = "/api/ops/inbox/{id}/retry",
    operation_id = "retry_inbox_event",
    tag = "ops",
    params(("id" = i64, Path, description = "The event's id")),
    responses(
        (status = 202, description = "Queued again", body = InboxEventOut),
        (status = 404, description = "`/problems/not-found`: no such event"),
        (status = 409, description = "`/problems/conflict`: the event is already waiting or being processed"),
    ),
    security(("bearer" = [])),
)]
async fn retry_event(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let event = ops::retry(&state.db, id, Utc::now())
        .await
        .map_err(|e| match e {
            domain::Error::NotFound => ApiError::NotFound(format!("no inbox event {id}")),
            other => other.into(),
        })?;
    tracing::info!(
        inbox_event_id = id,
        principal = caller.id,
        "inbox event retry requested"
    );
    queue(&state, &[id]).await;
    Ok(HttpResponse::Accepted().json(InboxEventOut::summary(event)))
}

/// Which events to retry; `state` is required.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = InboxRetryIn)]
struct BulkRetryIn {
    source: Option<String>,
    #[schema(value_type = Option<InboxState>)]
    state: Option<String>,
    received_since: Option<DateTime<Utc>>,
    received_until: Option<DateTime<Utc>>,
    /// Only count them.
    #[serde(default)]
    dry_run: bool,
}

/// How many events matched and were retried.
#[derive(Serialize, ToSchema)]
#[schema(as = InboxRetryOut)]
struct BulkRetryOut {
    dry_run: bool,
    matched: u64,
    retried: u64,
}

/// Retry every event that matches a filter.
///
/// **Roles:** ops, admin.
///
/// `state` is required; with `dry_run` only counts them.
#[utoipa::path(
    post,
    path = "/api/ops/inbox/retry",
    operation_id = "retry_inbox_events",
    tag = "ops",
    request_body = BulkRetryIn,
    responses((status = 200, description = "How many matched and were retried", body = BulkRetryOut)),
    security(("bearer" = [])),
)]
async fn retry_matching(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let input: BulkRetryIn = read_json(&req, body, state.http.max_body_bytes).await?;
    let filter = InboxFilter {
        source: input.source,
        state: parse_state(input.state.as_deref())?,
        received_since: input.received_since,
        received_until: input.received_until,
    };
    let done = ops::retry_matching(&state.db, &filter, Utc::now(), input.dry_run).await?;
    if !input.dry_run {
        tracing::info!(
            count = done.retried.len(),
            principal = caller.id,
            "bulk inbox retry"
        );
        queue(&state, &done.retried).await;
    }
    Ok(HttpResponse::Ok().json(BulkRetryOut {
        dry_run: input.dry_run,
        matched: done.matched,
        retried: done.retried.len() as u64,
    }))
}

/// Best effort: an event whose push fails is `received` and the sweeper
/// queues it.
async fn queue(state: &AppState, ids: &[i64]) {
    for id in ids {
        if let Err(error) = state.jobs.push(*id, None).await {
            tracing::warn!(%error, "retry not queued; the sweeper will");
        }
    }
}
