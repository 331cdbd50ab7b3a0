//! A change to an existing source, and the one rule for how it applies to
//! the stored configuration (shared by `PATCH /api/sources/{name}` and
//! `leadpipe source update`).

use std::fmt;

use super::SourceConfig;
use crate::entities::source;
use crate::error::Error;
use crate::field_presence::Patch;
use crate::inbound::signature::Scheme;

/// What to change in a source: a field absent stays as it is; `null`
/// ([`Patch::Null`]) puts it back to its default (or clears it). The secrets and the pull auth
/// value are write-only: given, they replace the stored ones.
///
/// [`SourcePatch::merge`] applies it to the stored configuration:
/// - a new `scheme` needs new `secrets` (they are checked against the scheme
///   they are for), and the fields that only mean something for a scheme
///   (`signature_header`, `event_id_*`, `event_type_*`) go back to the new
///   scheme's defaults unless the same change gives them;
/// - a header and a pointer for the same thing (`event_id_header` and
///   `event_id_pointer`; the same for `event_type`) are one choice: giving
///   either replaces both;
/// - `pull_url: null` (cleared) turns reconcile off: its auth header, value
///   and schedule go with it.
///
/// The API's request body as it is (`SourcePatch` in the OpenAPI document).
#[derive(Clone, Default, PartialEq, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = SourcePatch,
    description = "What to change in a source; fields left out stay as they are, `null`\nputs one back to its default. A new `scheme` needs new `secrets`, and\nresets `signature_header`, `event_id_*` and `event_type_*` to the new\nscheme's defaults unless given too; giving a header or a pointer for the\nevent id (or type) replaces both; `\"pull_url\": null` turns reconcile off\nwith its auth header, value and `cron`."
)]
pub struct SourcePatch {
    /// A new scheme: only with new `secrets` (`422` naming `secrets` without).
    pub scheme: Option<String>,
    /// Write-only: replace the stored secrets (absent or `null`: kept).
    pub secrets: Option<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub tolerance_secs: Patch<i64>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub signature_header: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub event_id_header: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub event_id_pointer: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub event_type_header: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub event_type_pointer: Patch<String>,
    /// The full new list; `null` or `[]`: every event type.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_event_types: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub record_pointer: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub source_ref_pointer: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub email_pointer: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name_pointer: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub phone_pointer: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub company_pointer: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub updated_at_pointer: Patch<String>,
    /// `null` turns reconcile off (with `pull_auth_header`, its value and `cron`).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub pull_url: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub pull_auth_header: Patch<String>,
    /// Write-only: replace the stored value (absent or `null`: kept, unless
    /// `pull_url` moves to another origin: then it is required again).
    pub pull_auth_secret: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub pull_page_size: Patch<i64>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub cron: Patch<String>,
    /// `null`: learn the usual gap from the deliveries again.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub expected_interval: Patch<String>,
    /// `null`: the scheme's default (`/entry/*/changes/*` for
    /// meta-lead-ads, `/*` for hubspot-v3, else none: one event a delivery).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub events_pointer: Patch<String>,
    /// Write-only: replace the stored token (absent or `null`: kept).
    pub verify_token: Option<String>,
}

// Hand-written so the secrets never reach logs through `{:?}`.
impl fmt::Debug for SourcePatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourcePatch")
            .field("scheme", &self.scheme)
            .field(
                "secrets",
                &self
                    .secrets
                    .as_ref()
                    .map(|s| format!("[{} redacted]", s.len())),
            )
            .finish_non_exhaustive()
    }
}

impl SourcePatch {
    /// Whether the patch changes nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The whole configuration after this change to `stored`, to be parsed
    /// as a new one is (`NewSource::parse`). Refuses a scheme change without
    /// new secrets, naming `secrets`.
    pub fn merge(self, stored: &source::Model) -> Result<SourceConfig, Error> {
        let new_scheme = self
            .scheme
            .as_deref()
            .and_then(|s| s.trim().parse::<Scheme>().ok())
            .filter(|s| s.as_str() != stored.scheme);
        if let Some(scheme) = new_scheme
            && self.secrets.is_none()
        {
            return Err(Error::invalid(
                "secrets",
                &format!(
                    "must be given again to change the scheme from {} to {scheme}: \
                     the stored secrets were checked for {} only",
                    stored.scheme, stored.scheme
                ),
            ));
        }
        // The stored values of scheme-bound fields are that scheme's.
        let bound = |value: &Option<String>| {
            if new_scheme.is_some() {
                None
            } else {
                value.clone()
            }
        };
        let (event_id_header, event_id_pointer) = pair(
            (self.event_id_header, self.event_id_pointer),
            (
                bound(&stored.event_id_header),
                bound(&stored.event_id_pointer),
            ),
        );
        let (event_type_header, event_type_pointer) = pair(
            (self.event_type_header, self.event_type_pointer),
            (
                bound(&stored.event_type_header),
                bound(&stored.event_type_pointer),
            ),
        );
        let pull_off = self.pull_url == Patch::Null;
        let (pull_auth_header, cron) = if pull_off {
            (self.pull_auth_header.value(), self.cron.value())
        } else {
            (
                or_stored(self.pull_auth_header, &stored.pull_auth_header),
                or_stored(self.cron, &stored.reconcile_cron),
            )
        };
        Ok(SourceConfig {
            name: stored.name.clone(),
            scheme: self.scheme.unwrap_or_else(|| stored.scheme.clone()),
            secrets: self.secrets,
            tolerance_secs: or_stored(self.tolerance_secs, &Some(stored.tolerance_secs)),
            signature_header: or_stored(self.signature_header, &bound(&stored.signature_header)),
            event_id_header,
            event_id_pointer,
            event_type_header,
            event_type_pointer,
            allowed_event_types: Some(
                or_stored(
                    self.allowed_event_types,
                    &Some(stored.allowed_event_types()),
                )
                .unwrap_or_default(),
            ),
            record_pointer: or_stored(self.record_pointer, &Some(stored.record_pointer.clone())),
            source_ref_pointer: or_stored(
                self.source_ref_pointer,
                &Some(stored.source_ref_pointer.clone()),
            ),
            email_pointer: or_stored(self.email_pointer, &stored.email_pointer),
            name_pointer: or_stored(self.name_pointer, &stored.name_pointer),
            phone_pointer: or_stored(self.phone_pointer, &stored.phone_pointer),
            company_pointer: or_stored(self.company_pointer, &stored.company_pointer),
            updated_at_pointer: or_stored(self.updated_at_pointer, &stored.updated_at_pointer),
            pull_url: or_stored(self.pull_url, &stored.pull_url),
            pull_auth_header,
            // `None` keeps the stored value (`SecretChange::Keep`).
            pull_auth_secret: self.pull_auth_secret,
            pull_page_size: or_stored(self.pull_page_size, &Some(stored.pull_page_size)),
            cron,
            expected_interval: or_stored(
                self.expected_interval,
                &stored.expected_interval_secs.map(super::interval::show),
            ),
            events_pointer: or_stored(self.events_pointer, &bound(&stored.events_pointer)),
            // `None` keeps the stored token.
            verify_token: self.verify_token,
        })
    }
}

fn or_stored<T: Clone>(given: Patch<T>, stored: &Option<T>) -> Option<T> {
    match given {
        Patch::Absent => stored.clone(),
        given => given.value(),
    }
}

/// A header-or-pointer choice: either given replaces both.
fn pair(
    given: (Patch<String>, Patch<String>),
    stored: (Option<String>, Option<String>),
) -> (Option<String>, Option<String>) {
    match given {
        (Patch::Absent, Patch::Absent) => stored,
        (header, pointer) => (header.value(), pointer.value()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::inbound::source::{Locator, NewSource};
    use crate::net_guard::OutboundPolicy;
    use chrono::Utc;

    fn stored() -> source::Model {
        source::Model {
            name: "partner".into(),
            scheme: "hmac-sha256".into(),
            secrets: serde_json::json!(["sealed"]),
            tolerance_secs: 600,
            signature_header: Some("x-partner-signature".into()),
            event_id_header: Some("x-request-id".into()),
            event_id_pointer: None,
            event_type_header: None,
            event_type_pointer: Some("/type".into()),
            allowed_event_types: Some(serde_json::json!(["lead.created"])),
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
            pull_auth_secret: Some("sealed-pull".into()),
            pull_page_size: 50,
            reconcile_cron: Some("0 */15 * * * *".into()),
            reconcile_cursor: None,
            expected_interval_secs: None,
            events_pointer: None,
            verify_token: None,
            version: 3,
            state: "active".into(),
        }
    }

    fn parse(config: SourceConfig) -> NewSource {
        NewSource::parse(config, &OutboundPolicy::default()).unwrap()
    }

    #[test]
    fn an_empty_patch_keeps_every_field() {
        assert!(SourcePatch::default().is_empty());
        let config = SourcePatch::default().merge(&stored()).unwrap();
        let valid = parse(config);
        assert_eq!(valid.scheme, Scheme::HmacSha256);
        assert!(valid.secrets.is_none());
        assert_eq!(valid.tolerance_secs, 600);
        assert_eq!(
            valid.signature_header.as_deref(),
            Some("x-partner-signature")
        );
        assert_eq!(valid.event_id, Some(Locator::Header("x-request-id".into())));
        assert_eq!(valid.event_type, Some(Locator::Pointer("/type".into())));
        assert_eq!(valid.allowed_event_types, ["lead.created"]);
        assert_eq!(valid.pull.page_size, 50);
        assert_eq!(valid.pull.cron.as_deref(), Some("0 */15 * * * *"));
        assert!(valid.pull.auth_secret == crate::inbound::source::pull::SecretChange::Keep);
    }

    #[test]
    fn a_scheme_change_needs_the_secrets_and_resets_what_belongs_to_the_scheme() {
        let patch = SourcePatch {
            scheme: Some("standard-webhooks".into()),
            record_pointer: Patch::Value("/lead".into()),
            ..Default::default()
        };
        let Error::Invalid(fields) = patch.clone().merge(&stored()).unwrap_err() else {
            panic!("expected invalid");
        };
        assert_eq!(fields[0].field, "secrets");
        assert!(
            fields[0]
                .message
                .contains("hmac-sha256 to standard-webhooks")
        );

        let patch = SourcePatch {
            secrets: Some(vec!["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()]),
            ..patch
        };
        let valid = parse(patch.merge(&stored()).unwrap());
        assert_eq!(valid.scheme, Scheme::StandardWebhooks);
        assert_eq!(valid.signature_header, None);
        assert_eq!(valid.event_id, Some(Locator::Header("webhook-id".into())));
        assert_eq!(valid.mapping.record, "/lead");
        assert_eq!(valid.tolerance_secs, 600);

        // The same scheme again is no change.
        let same = SourcePatch {
            scheme: Some("hmac-sha256".into()),
            ..Default::default()
        };
        assert!(same.merge(&stored()).is_ok());
    }

    #[test]
    fn a_locator_given_replaces_its_pair_and_null_means_the_default() {
        let patch = SourcePatch {
            event_id_pointer: Patch::Value("/id".into()),
            signature_header: Patch::Null,
            allowed_event_types: Patch::Null,
            ..Default::default()
        };
        let valid = parse(patch.merge(&stored()).unwrap());
        assert_eq!(valid.event_id, Some(Locator::Pointer("/id".into())));
        assert_eq!(valid.signature_header, None);
        assert!(valid.allowed_event_types.is_empty());
    }

    #[test]
    fn clearing_the_pull_url_turns_reconcile_off() {
        let patch = SourcePatch {
            pull_url: Patch::Null,
            ..Default::default()
        };
        let valid = parse(patch.merge(&stored()).unwrap());
        assert_eq!(valid.pull.url, None);
        assert_eq!(valid.pull.auth_header, None);
        assert_eq!(valid.pull.cron, None);
        assert!(valid.pull.auth_secret == crate::inbound::source::pull::SecretChange::Clear);
    }
}
