//! What `/api/sources` and `leadpipe source` take and show. Secrets are
//! write-only: `SourceIn` and `SourcePatchIn` carry them in, `SourceOut` is
//! built from the stored row field by field and shows only their count, and
//! whether a pull auth value is set.

use std::fmt;

use chrono::{DateTime, Utc};
use domain::entities::source;
use domain::inbound::source::{SourceConfig, SourcePatch};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::body::present;
use crate::http::idempotency::Versioned;

/// A source to create. Omitted fields take their defaults.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SourceInput)]
pub struct SourceIn {
    pub name: String,
    pub scheme: String,
    pub secrets: Option<Vec<String>>,
    pub tolerance_secs: Option<i64>,
    pub signature_header: Option<String>,
    pub event_id_header: Option<String>,
    pub event_id_pointer: Option<String>,
    pub event_type_header: Option<String>,
    pub event_type_pointer: Option<String>,
    pub allowed_event_types: Option<Vec<String>>,
    pub record_pointer: Option<String>,
    pub source_ref_pointer: Option<String>,
    pub email_pointer: Option<String>,
    pub name_pointer: Option<String>,
    pub phone_pointer: Option<String>,
    pub company_pointer: Option<String>,
    pub updated_at_pointer: Option<String>,
    /// Reconcile: the sender's pull API (`GET {pull_url}?since=…&limit=…`).
    pub pull_url: Option<String>,
    /// A header sent with every pull (e.g. `authorization`)…
    pub pull_auth_header: Option<String>,
    /// …and its value. Write-only.
    pub pull_auth_secret: Option<String>,
    pub pull_page_size: Option<i64>,
    /// When to reconcile by itself: cron with a seconds field (`0 */5 * * * *`).
    pub cron: Option<String>,
}

// Hand-written so the secrets never reach logs through `{:?}`.
impl fmt::Debug for SourceIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceIn")
            .field("name", &self.name)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl From<SourceIn> for SourceConfig {
    fn from(i: SourceIn) -> Self {
        Self {
            name: i.name,
            scheme: i.scheme,
            secrets: i.secrets,
            tolerance_secs: i.tolerance_secs,
            signature_header: i.signature_header,
            event_id_header: i.event_id_header,
            event_id_pointer: i.event_id_pointer,
            event_type_header: i.event_type_header,
            event_type_pointer: i.event_type_pointer,
            allowed_event_types: i.allowed_event_types,
            record_pointer: i.record_pointer,
            source_ref_pointer: i.source_ref_pointer,
            email_pointer: i.email_pointer,
            name_pointer: i.name_pointer,
            phone_pointer: i.phone_pointer,
            company_pointer: i.company_pointer,
            updated_at_pointer: i.updated_at_pointer,
            pull_url: i.pull_url,
            pull_auth_header: i.pull_auth_header,
            pull_auth_secret: i.pull_auth_secret,
            pull_page_size: i.pull_page_size,
            cron: i.cron,
        }
    }
}

/// What to change in a source; fields left out stay as they are, `null`
/// puts one back to its default. A new `scheme` needs new `secrets`, and
/// resets `signature_header`, `event_id_*` and `event_type_*` to the new
/// scheme's defaults unless given too; giving a header or a pointer for the
/// event id (or type) replaces both; `"pull_url": null` turns reconcile off
/// with its auth header, value and `cron`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SourcePatch)]
pub struct SourcePatchIn {
    /// A new scheme: only with new `secrets` (`422` naming `secrets` without).
    pub scheme: Option<String>,
    /// Write-only: replace the stored secrets (absent or `null`: kept).
    pub secrets: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub tolerance_secs: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub signature_header: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub event_id_header: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub event_id_pointer: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub event_type_header: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub event_type_pointer: Option<Option<String>>,
    /// The full new list; `null` or `[]`: every event type.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_event_types: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub record_pointer: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub source_ref_pointer: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub email_pointer: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub name_pointer: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub phone_pointer: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub company_pointer: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub updated_at_pointer: Option<Option<String>>,
    /// `null` turns reconcile off (with `pull_auth_header`, its value and `cron`).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub pull_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub pull_auth_header: Option<Option<String>>,
    /// Write-only: replace the stored value (absent or `null`: kept, unless
    /// `pull_url` moves to another origin: then it is required again).
    pub pull_auth_secret: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub pull_page_size: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub cron: Option<Option<String>>,
}

// Hand-written so the secrets never reach logs through `{:?}`.
impl fmt::Debug for SourcePatchIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourcePatchIn")
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl From<SourcePatchIn> for SourcePatch {
    fn from(i: SourcePatchIn) -> Self {
        Self {
            scheme: i.scheme,
            secrets: i.secrets,
            tolerance_secs: i.tolerance_secs,
            signature_header: i.signature_header,
            event_id_header: i.event_id_header,
            event_id_pointer: i.event_id_pointer,
            event_type_header: i.event_type_header,
            event_type_pointer: i.event_type_pointer,
            allowed_event_types: i.allowed_event_types,
            record_pointer: i.record_pointer,
            source_ref_pointer: i.source_ref_pointer,
            email_pointer: i.email_pointer,
            name_pointer: i.name_pointer,
            phone_pointer: i.phone_pointer,
            company_pointer: i.company_pointer,
            updated_at_pointer: i.updated_at_pointer,
            pull_url: i.pull_url,
            pull_auth_header: i.pull_auth_header,
            pull_auth_secret: i.pull_auth_secret,
            pull_page_size: i.pull_page_size,
            cron: i.cron,
        }
    }
}

/// A source's configuration as the API and CLI show it: everything but the
/// secrets, of which only the count is shown.
#[derive(Debug, Clone, Serialize, ToSchema)]
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
    /// The configuration's version, also its `ETag` (`"3"`): send it as
    /// `If-Match` with a change. Moving the reconcile cursor leaves it.
    pub version: i64,
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
            version: m.version,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::routes::wire_check::assert_documented;

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
            version: 1,
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
        let input: SourceIn = serde_json::from_value(serde_json::json!({
            "name": "partner", "scheme": "github", "secrets": [SECRET],
            "pull_auth_secret": PULL_SECRET,
        }))
        .unwrap();
        let debug = format!("{input:?}");
        assert!(!debug.contains(SECRET), "{debug}");
        assert!(!debug.contains("sealed-pull-secret-value"), "{debug}");
        let patch: SourcePatchIn = serde_json::from_value(serde_json::json!({
            "secrets": [SECRET], "pull_auth_secret": PULL_SECRET,
        }))
        .unwrap();
        for debug in [
            format!("{patch:?}"),
            format!("{:?}", SourcePatch::from(patch)),
        ] {
            assert!(!debug.contains(SECRET), "{debug}");
            assert!(!debug.contains("sealed-pull-secret-value"), "{debug}");
        }
    }
}
