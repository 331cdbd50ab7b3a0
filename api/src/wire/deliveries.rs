//! What the API shows of outbox events and their deliveries, field by field,
//! so a column kept for the publisher's own use stays off the wire.

use chrono::{DateTime, Utc};
use domain::entities::{outbox_delivery, outbox_event};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = OutboxEvent)]
pub struct OutboxEventOut {
    pub id: i64,
    pub event_id: String,
    pub event_type: String,
    pub lead_id: Option<i64>,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    pub correlation_id: Option<String>,
    /// Set for a test event: only this subscription receives it.
    pub target_subscription_id: Option<i64>,
    pub state: String,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub published_at: Option<DateTime<Utc>>,
}

impl From<outbox_event::Model> for OutboxEventOut {
    fn from(m: outbox_event::Model) -> Self {
        Self {
            id: m.id,
            event_id: m.event_id,
            event_type: m.event_type,
            lead_id: m.lead_id,
            payload: m.payload,
            correlation_id: m.correlation_id,
            target_subscription_id: m.target_subscription_id,
            state: m.state,
            created_at: m.created_at,
            published_at: m.published_at,
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = OutboxDelivery)]
pub struct OutboxDeliveryOut {
    pub id: i64,
    pub outbox_event_id: i64,
    pub subscription_id: i64,
    pub lead_id: Option<i64>,
    /// `pending`, `delivering`, `failed`, `delivered` or `dead`.
    pub state: String,
    pub attempts: i32,
    #[schema(value_type = String, format = DateTime)]
    pub next_attempt_at: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub locked_until: Option<DateTime<Utc>>,
    pub last_status: Option<i16>,
    pub last_error: Option<String>,
    /// How long the last attempt took, request sent to answer (or failure).
    pub last_duration_ms: Option<i32>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<DateTime<Utc>>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

impl From<outbox_delivery::Model> for OutboxDeliveryOut {
    fn from(m: outbox_delivery::Model) -> Self {
        Self {
            id: m.id,
            outbox_event_id: m.outbox_event_id,
            subscription_id: m.subscription_id,
            lead_id: m.lead_id,
            state: m.state,
            attempts: m.attempts,
            next_attempt_at: m.next_attempt_at,
            locked_until: m.locked_until,
            last_status: m.last_status,
            last_error: m.last_error,
            last_duration_ms: m.last_duration_ms,
            delivered_at: m.delivered_at,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::wire::check::assert_documented;

    #[test]
    fn outbox_events_and_deliveries_show_their_documented_fields() {
        let now = Utc::now();
        assert_documented(
            &OutboxEventOut::from(outbox_event::Model {
                id: 1,
                event_id: "e".into(),
                event_type: "lead.created".into(),
                lead_id: Some(7),
                payload: json!({}),
                correlation_id: None,
                target_subscription_id: None,
                state: "published".into(),
                created_at: now,
                published_at: Some(now),
            }),
            &[],
        );
        assert_documented(
            &OutboxDeliveryOut::from(outbox_delivery::Model {
                id: 1,
                outbox_event_id: 1,
                subscription_id: 2,
                lead_id: Some(7),
                state: "delivered".into(),
                attempts: 1,
                next_attempt_at: now,
                locked_until: None,
                last_status: Some(200),
                last_error: None,
                last_duration_ms: Some(12),
                delivered_at: Some(now),
                created_at: now,
                updated_at: now,
            }),
            &[],
        );
    }
}

/// Which deliveries to list.
#[derive(Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Filter {
    /// `pending`, `delivering`, `failed`, `delivered` or `dead`.
    #[param(pattern = "^(pending|delivering|failed|delivered|dead)$")]
    pub state: Option<String>,
    /// Only deliveries to this subscription.
    pub subscription_id: Option<i64>,
    /// Deprecated (removed in the next release): use `cursor`. Continues
    /// below this delivery id; ignored when `cursor` is given.
    pub before: Option<i64>,
}

/// Which dead deliveries to retry.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DeliveryRetryIn)]
pub struct RetryManyIn {
    /// Only deliveries to this subscription.
    pub subscription_id: Option<i64>,
    /// Only count them.
    #[serde(default)]
    pub dry_run: bool,
}

// Counts only.
crate::wire::about::about_nobody!(domain::outbound::delivery::RetryReport);
