//! What `/api/ops/inbox` takes and shows: webhook events as ops see them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use domain::entities::inbox_event;
use domain::inbound::inbox::InboxState;
use domain::redact::{mask, mask_json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

/// An inbox event as ops see it; `detail` adds headers and body.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = InboxEvent)]
pub struct InboxEventOut {
    pub id: i64,
    pub source: String,
    /// The sender's id of the event (the dedupe key with `source`).
    pub event_id: String,
    /// Where `event_id` came from: a header, a JSON pointer, or the body hash.
    pub event_id_from: String,
    pub event_type: Option<String>,
    #[schema(value_type = InboxState)]
    pub state: String,
    /// How many times the sender delivered it (duplicates included).
    pub deliveries: i32,
    /// Processing attempts in the current budget.
    pub attempts: i32,
    /// Ops retries so far.
    pub retries: i32,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub locked_by: Option<String>,
    pub outcome: Option<String>,
    pub lead_id: Option<i64>,
    pub correlation_id: Option<String>,
    pub received_at: DateTime<Utc>,
    pub last_delivery_at: DateTime<Utc>,
    pub processed_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    /// `GET /api/ops/inbox/{id}` only: the kept headers (never signatures).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub headers: Option<Value>,
    /// The body as JSON; `body_text` instead when it is not JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub body: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_text: Option<String>,
    /// `GET /api/ops/inbox/{id}` only: how its delivery was verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<VerificationOut>,
}

/// How a stored event's delivery was verified.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = InboxVerification)]
pub struct VerificationOut {
    /// Always `verified`: a delivery whose signature does not verify is
    /// refused (`401`) and never stored.
    pub signature: String,
    /// Whether the signature covers the event id: a header the scheme signs
    /// or a pointer into the signed body. When it does not (`false`), the
    /// body's SHA-256 is kept too, so a replay under a new id is still a
    /// repeat.
    pub event_id_signed: bool,
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
            verification: None,
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

    /// One event as ops see it: [`InboxEventOut::detail`] with every string
    /// of its headers and body masked as log lines are (tokens, secrets,
    /// signatures, email addresses, phone numbers), and how it was verified.
    pub fn shown(e: inbox_event::Model) -> Self {
        let verification = VerificationOut {
            signature: "verified".into(),
            event_id_signed: e.body_sha256.is_none(),
        };
        let detail = Self::detail(e);
        Self {
            headers: detail.headers.map(mask_json),
            body: detail.body.map(mask_json),
            body_text: detail.body_text.map(|text| mask(&text).into_owned()),
            verification: Some(verification),
            ..detail
        }
    }
}

#[derive(Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only events of this source.
    pub source: Option<String>,
    /// Only events in this state.
    #[param(value_type = Option<InboxState>)]
    pub state: Option<String>,
    /// Received at or after (RFC 3339).
    pub received_since: Option<DateTime<Utc>>,
    /// Received before (RFC 3339).
    pub received_until: Option<DateTime<Utc>>,
}

/// Which events to retry: any retryable state unless `state` names one.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = InboxRetryIn)]
pub struct BulkRetryIn {
    pub source: Option<String>,
    #[schema(value_type = Option<InboxState>)]
    pub state: Option<String>,
    pub received_since: Option<DateTime<Utc>>,
    pub received_until: Option<DateTime<Utc>>,
    /// Take `processed` events too: they re-apply historic payloads.
    #[serde(default)]
    pub include_processed: bool,
    /// Only count them.
    #[serde(default)]
    pub dry_run: bool,
}

/// What matched, and what re-applying it came to.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = InboxRetryOut)]
pub struct BulkRetryOut {
    pub dry_run: bool,
    /// Matched events that can be re-applied.
    pub matched: u64,
    /// Events the filter matched whose body was erased (with their person,
    /// or at the end of their retention): skipped, left as they are.
    pub skipped_erased: u64,
    /// The matched events by state.
    pub by_state: BTreeMap<String, u64>,
    pub retried: u64,
    /// The retried events by their new state (`processed`, `skipped`,
    /// `failed`: the workers retry it later, `dead`).
    pub results: BTreeMap<String, u64>,
    /// Present when processed events are among those matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
