//! What `/api/sources` and `leadpipe source` show. Secrets are write-only:
//! they come in through the domain's own input types (`SourceConfig` and
//! `SourcePatch`, the request bodies as they are), and `SourceOut` is built
//! from the stored row field by field and shows only their count, and
//! whether a pull auth value is set.

use chrono::{DateTime, Utc};
use domain::entities::source;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::wire::versioned::Versioned;

/// A source's configuration as the API and CLI show it: everything but the
/// secrets, of which only the count is shown.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = Source)]
pub struct SourceOut {
    pub name: String,
    pub scheme: String,
    pub secret_count: usize,
    pub tolerance_secs: i64,
    pub signature_header: Option<String>,
    pub event_id_header: Option<String>,
    pub event_id_pointer: Option<String>,
    pub event_type_header: Option<String>,
    pub event_type_pointer: Option<String>,
    pub allowed_event_types: Vec<String>,
    pub record_pointer: String,
    pub source_ref_pointer: String,
    pub email_pointer: Option<String>,
    pub name_pointer: Option<String>,
    pub phone_pointer: Option<String>,
    pub company_pointer: Option<String>,
    pub updated_at_pointer: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    // Reconcile. The auth value is write-only: only whether one is set shows.
    pub pull_url: Option<String>,
    pub pull_auth_header: Option<String>,
    pub pull_auth_configured: bool,
    pub pull_page_size: i64,
    pub cron: Option<String>,
    /// Where the next reconcile run continues (`null`: from the start).
    pub reconcile_cursor: Option<String>,
    /// How often the source usually delivers (`2h`), when configured; `null`:
    /// learned from its deliveries (`usual_gap_seconds` in `/api/ops/stats`).
    pub expected_interval: Option<String>,
    /// Where a delivery's events sit when it carries several (`*`: every
    /// element of an array); `null`: a delivery is one event.
    pub events_pointer: Option<String>,
    /// Whether a subscription handshake token is stored (`meta-lead-ads`);
    /// the token itself is write-only.
    pub verify_token_set: bool,
    /// The configuration's version, also its `ETag` (`"3"`): send it as
    /// `If-Match` with a change. Moving the reconcile cursor leaves it.
    pub version: i64,
    /// `active`, or `paused`: its deliveries are stored and answered, not
    /// processed until it is resumed.
    #[schema(value_type = domain::inbound::source::SourceState)]
    pub state: String,
}

/// What removing a source did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = SourceRemoved)]
pub struct SourceRemovedOut {
    pub name: String,
    /// Intake principals bound to the source, revoked with it.
    pub revoked_intake_principals: u64,
    /// Its events that still waited, now `dead`.
    pub abandoned_events: u64,
}

impl Versioned for SourceOut {
    fn version(&self) -> i64 {
        self.version
    }
}

impl From<source::Model> for SourceOut {
    fn from(m: source::Model) -> Self {
        Self {
            secret_count: m.secret_count(),
            allowed_event_types: m.allowed_event_types(),
            pull_auth_configured: m.pull_auth_secret.is_some(),
            verify_token_set: m.verify_token.is_some(),
            events_pointer: m.events_pointer,
            name: m.name,
            scheme: m.scheme,
            tolerance_secs: m.tolerance_secs,
            signature_header: m.signature_header,
            event_id_header: m.event_id_header,
            event_id_pointer: m.event_id_pointer,
            event_type_header: m.event_type_header,
            event_type_pointer: m.event_type_pointer,
            record_pointer: m.record_pointer,
            source_ref_pointer: m.source_ref_pointer,
            email_pointer: m.email_pointer,
            name_pointer: m.name_pointer,
            phone_pointer: m.phone_pointer,
            company_pointer: m.company_pointer,
            updated_at_pointer: m.updated_at_pointer,
            created_at: m.created_at,
            updated_at: m.updated_at,
            pull_url: m.pull_url,
            pull_auth_header: m.pull_auth_header,
            pull_page_size: m.pull_page_size,
            cron: m.reconcile_cron,
            reconcile_cursor: m.reconcile_cursor,
            expected_interval: m
                .expected_interval_secs
                .map(domain::inbound::source::interval::show),
            version: m.version,
            state: m.state,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::check::assert_documented;
    use domain::inbound::source::{SourceConfig, SourcePatch};

    const SECRET: &str = "sealed-webhook-secret-value";
    const PULL_SECRET: &str = "Bearer sealed-pull-secret-value";

    // Every column set, the secret ones included.
    fn stored() -> source::Model {
        source::Model {
            name: "partner".into(),
            scheme: "github".into(),
            secrets: serde_json::json!([SECRET, "second-secret-value"]),
            tolerance_secs: 300,
            signature_header: Some("x-sig".into()),
            event_id_header: Some("x-github-delivery".into()),
            event_id_pointer: Some("/id".into()),
            event_type_header: Some("x-github-event".into()),
            event_type_pointer: Some("/type".into()),
            allowed_event_types: Some(serde_json::json!(["push"])),
            record_pointer: "/data".into(),
            source_ref_pointer: "/id".into(),
            email_pointer: Some("/email".into()),
            name_pointer: Some("/name".into()),
            phone_pointer: Some("/phone".into()),
            company_pointer: Some("/company".into()),
            updated_at_pointer: Some("/updated_at".into()),
            created_at: Utc::now(),
            updated_at: Utc::now(),
            pull_url: Some("https://api.example.com/leads".into()),
            pull_auth_header: Some("authorization".into()),
            pull_auth_secret: Some(PULL_SECRET.into()),
            pull_page_size: 100,
            reconcile_cron: Some("0 */5 * * * *".into()),
            reconcile_cursor: Some("cursor-1".into()),
            expected_interval_secs: Some(7200),
            events_pointer: None,
            verify_token: Some("sealed-verify-token".into()),
            version: 1,
            state: "active".into(),
        }
    }

    #[test]
    fn a_source_is_shown_without_its_secrets() {
        let secrets = [SECRET, "second-secret-value", "sealed-pull-secret-value"];
        let out = SourceOut::from(stored());
        assert_documented(&out, &secrets);
        assert_eq!(out.secret_count, 2);
        assert!(out.pull_auth_configured);
        assert_eq!(out.allowed_event_types, ["push"]);
    }

    #[test]
    fn debug_of_an_input_hides_its_secrets() {
        let input: SourceConfig = serde_json::from_value(serde_json::json!({
            "name": "partner", "scheme": "github", "secrets": [SECRET],
            "pull_auth_secret": PULL_SECRET,
        }))
        .unwrap();
        let debug = format!("{input:?}");
        assert!(!debug.contains(SECRET), "{debug}");
        assert!(!debug.contains("sealed-pull-secret-value"), "{debug}");
        let patch: SourcePatch = serde_json::from_value(serde_json::json!({
            "secrets": [SECRET], "pull_auth_secret": PULL_SECRET,
        }))
        .unwrap();
        let debug = format!("{patch:?}");
        assert!(!debug.contains(SECRET), "{debug}");
        assert!(!debug.contains("sealed-pull-secret-value"), "{debug}");
    }
}

/// Every source, without secrets.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
pub struct SourceList {
    pub data: Vec<SourceOut>,
}
