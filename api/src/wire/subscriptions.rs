//! What `/api/subscriptions` takes and shows.

use domain::field_presence::Patch;
use domain::outbound::subscription::SubscriptionView;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::wire::versioned::Versioned;

/// A downstream system to send events to.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionIn {
    /// Where to POST; internal addresses are refused unless
    /// `LEADPIPE_OUTBOUND_ALLOW` names the host.
    pub url: String,
    /// Names from `GET /api/event-types`; empty: all.
    #[serde(default)]
    pub event_types: Vec<String>,
    pub description: Option<String>,
    /// Deliveries a second at most (1 to 10000), across every worker
    /// process; left out: no cap.
    pub rate_limit: Option<i32>,
}

/// A new subscription with its signing secret.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = SubscriptionCreated)]
pub struct CreatedOut {
    #[serde(flatten)]
    pub subscription: SubscriptionView,
    /// Shown only in this response: verify our signatures with it.
    pub secret: String,
}

/// Every subscription, without secrets.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct SubscriptionList {
    pub data: Vec<SubscriptionView>,
}

/// What to change; fields left out stay as they are.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SubscriptionPatch)]
pub struct PatchIn {
    /// Checked as on creation: internal addresses are `422`.
    pub url: Option<String>,
    /// The full new list (see `GET /api/event-types`); empty: all.
    pub event_types: Option<Vec<String>>,
    /// An empty string clears it.
    pub description: Option<String>,
    /// `false` stops deliveries; `true` resumes them (also after a `410`).
    pub enabled: Option<bool>,
    /// Deliveries a second at most (1 to 10000); `null` lifts the cap.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i32>)]
    pub rate_limit: Patch<i32>,
}

impl Versioned for SubscriptionView {
    fn version(&self) -> i64 {
        self.version
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RotateSecretIn)]
pub struct RotateIn {
    /// How long the old secret still signs, next to the new one: 0 to
    /// 604800 (7 days); default 86400 (24 h).
    pub overlap_seconds: Option<i64>,
}

/// The new signing secret.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = RotatedSecret)]
pub struct RotatedOut {
    /// Shown only in this response.
    pub secret: String,
    /// Until then deliveries carry a signature with each secret.
    pub previous_secret_valid_until: chrono::DateTime<chrono::Utc>,
}

/// A test event on its way.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = TestEventQueued)]
pub struct TestOut {
    /// The `webhook-id` it is sent with; its delivery is listed under
    /// `GET /api/ops/deliveries?subscription_id=…`.
    pub event_id: String,
}

crate::wire::about::about_nobody!(
    CreatedOut,
    SubscriptionView,
    RotatedOut,
    domain::outbound::delivery::Recovery,
);

/// Enabling takes no body (an empty object is accepted).
#[derive(Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = EnableSubscriptionIn)]
pub struct EnableIn {}

/// From when to send again what failed.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RecoverSubscriptionIn)]
pub struct RecoverIn {
    /// Deliveries created at or after this instant (RFC 3339) that failed
    /// or died are sent again.
    pub since: chrono::DateTime<chrono::Utc>,
}
