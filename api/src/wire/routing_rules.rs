//! What `/api/routing-rules` takes and shows.

use chrono::{DateTime, Utc};
use domain::routing::router::Preview;
use domain::routing::rules::RuleSet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// One rule and its parts: the domain's own.
pub use domain::routing::choice::{SkipReason, Skipped};
pub use domain::routing::rules::{RoutingRule, RuleCondition, Strategy, Weight};

/// The routing rules, first match first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = RoutingRules)]
pub struct RoutingRulesOut {
    pub rules: Vec<RoutingRule>,
    /// Goes up with every change; the `ETag` is `"{version}"`.
    pub version: i64,
    /// `null` until the first change.
    pub updated_at: Option<DateTime<Utc>>,
    /// The principal who changed them last.
    pub updated_by: Option<i64>,
}

impl From<RuleSet> for RoutingRulesOut {
    fn from(set: RuleSet) -> Self {
        Self {
            rules: set.rules,
            version: set.version,
            updated_at: set.updated_at,
            updated_by: set.updated_by,
        }
    }
}

crate::wire::versioned::versioned!(RoutingRulesOut);
crate::wire::about::about_nobody!(RoutingRulesOut);

/// The body of `PUT /api/routing-rules`: the whole new list.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutingRulesIn {
    /// At most 100; the first that matches a lead decides.
    pub rules: Vec<RoutingRule>,
}

/// The lead to route: a stored one (`lead_id`), or one described by its
/// `source` and `payload`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewIn {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// What the sender would send beside the lead's own fields (an object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
}

/// Who the next turn would give the lead to, and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = RoutingPreview)]
pub struct PreviewOut {
    /// The index of the rule that matched; `null`: none did, so the pool is
    /// every active sales principal.
    pub rule: Option<usize>,
    /// The matched rule's team.
    pub team: Option<String>,
    /// The turn counter the pool takes its turns from (`sales`, `team:{team}`).
    pub pool: String,
    /// The pool's principals, by id.
    pub candidates: Vec<i64>,
    /// Who the next turn gives it to; `null`: nobody can take it now, so it
    /// would wait for an owner.
    pub owner_id: Option<i64>,
    /// Who the next turn passes by, and why.
    pub skipped: Vec<Skipped>,
    /// Whether routing would route this lead at all: `false` for a stored
    /// lead that has an owner (a person's choice is never undone) or is
    /// closed.
    pub routed: bool,
}

impl PreviewOut {
    pub fn new(preview: Preview, routed: bool) -> Self {
        Self {
            rule: preview.rule,
            team: preview.team,
            pool: preview.pool,
            candidates: preview.candidates,
            owner_id: preview.owner_id,
            skipped: preview.skipped,
            routed,
        }
    }
}
