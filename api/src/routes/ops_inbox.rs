//! `/api/ops/inbox`: watch and repair webhook processing (ops and admin).

use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{DateTime, Utc};
use domain::FieldError;
use domain::auth::Role;
use domain::entities::inbox_event;
use domain::inbox::InboxState;
use domain::inbox::ops::{self, InboxFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Authenticated;
use crate::body::read_json;
use crate::error::ApiError;
use crate::startup::AppState;

const OPS: &[Role] = &[Role::Ops, Role::Admin];
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

/// An inbox event as ops see it; `detail` adds headers and body.
#[derive(Serialize)]
pub struct InboxEventOut {
    id: i64,
    source: String,
    event_id: String,
    event_id_from: String,
    event_type: Option<String>,
    state: String,
    deliveries: i32,
    attempts: i32,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    headers: Option<Value>,
    /// The body as JSON; `body_text` instead when it is not JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    source: Option<String>,
    state: Option<String>,
    received_since: Option<DateTime<Utc>>,
    received_until: Option<DateTime<Utc>>,
    limit: Option<u64>,
    cursor: Option<String>,
}

fn parse_state(state: Option<&str>) -> Result<Option<InboxState>, ApiError> {
    state
        .map(|s| {
            s.parse()
                .map_err(|e: String| ApiError::Validation(vec![FieldError::new("state", e)]))
        })
        .transpose()
}

async fn list_events(
    caller: Authenticated,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS)?;
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
    let events = ops::list(&state.db, &filter, before, limit).await?;
    // A full page may have more after it; its last id continues the list.
    let next_cursor = (events.len() as u64 == limit)
        .then(|| events.last().map(|e| e.id.to_string()))
        .flatten();
    let data: Vec<InboxEventOut> = events.into_iter().map(InboxEventOut::summary).collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "data": data, "next_cursor": next_cursor })))
}

async fn get_event(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS)?;
    let id = id.into_inner();
    let event = ops::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no inbox event {id}")))?;
    Ok(HttpResponse::Ok().json(InboxEventOut::detail(event)))
}

/// Sends one event back for processing; `202` with the event.
async fn retry_event(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS)?;
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkRetryIn {
    source: Option<String>,
    state: Option<String>,
    received_since: Option<DateTime<Utc>>,
    received_until: Option<DateTime<Utc>>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Serialize)]
struct BulkRetryOut {
    dry_run: bool,
    matched: u64,
    retried: u64,
}

/// Retries every event matching the filter (`state` required); with
/// `dry_run` only counts them.
async fn retry_matching(
    caller: Authenticated,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS)?;
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
