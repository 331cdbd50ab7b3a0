//! Webhook sources: how each sender signs its deliveries, and where the event
//! id, the event type and the lead record sit in them.
//!
//! Secrets are write-only: they go in through [`SourceConfig`], are stored
//! sealed (see [`crate::sealed`]), are opened into [`Source::scheme`] to
//! verify signatures, and come out nowhere: what the API and CLI show is
//! built from the stored row by the `api` crate, with only their count, and
//! every `Debug` redacts them.
//!
//! Here: the source's types and its storage. What a source may be is decided
//! in `validate`, which parses a [`SourceConfig`] into a [`NewSource`]; how a
//! change applies to a stored source, in `patch` ([`SourcePatch`]); how it
//! is pulled and when, in [`pull`] and [`schedule`]. Creating
//! ([`create`]) and changing ([`update`]) are separate on purpose: a create
//! never replaces a working configuration.

pub mod interval;
mod patch;
pub mod pull;
pub mod schedule;
mod stand_in;
pub mod state;
mod validate;

use std::fmt;

use chrono::Utc;
use sea_orm::{
    ActiveValue::{NotSet, Set},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, SqlErr,
};

use crate::entities::source::{self, Column};
use crate::error::Error;
use crate::inbound::mapping::RecordMapping;
use crate::inbound::signature::{Scheme, SchemeConfig};
use crate::inbound::source::pull::{self as pull_config, PullConfig, SecretChange};
use crate::net_guard::OutboundPolicy;
use crate::precondition::IfMatch;
use crate::sealed::{Keyring, Place};
pub use patch::SourcePatch;
pub use stand_in::StandIn;
pub use state::SourceState;
pub use validate::{NewSource, is_valid_pointer};

pub const DEFAULT_RECORD_POINTER: &str = "/data";
pub const DEFAULT_SOURCE_REF_POINTER: &str = "/id";

/// Where a value sits in a delivery: a request header or a JSON pointer
/// (RFC 6901) into the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locator {
    Header(String),
    Pointer(String),
}

/// A source as the receiver and the worker use it.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    /// Scheme, secrets and tolerance; its `Debug` redacts the secrets.
    pub scheme: SchemeConfig,
    /// `None`: the sender gives no id, so a hash of source and body stands in.
    pub event_id: Option<Locator>,
    pub event_type: Option<Locator>,
    /// Empty: every event type is processed.
    pub allowed_event_types: Vec<String>,
    pub mapping: RecordMapping,
    /// The sender's pull API, for reconcile; `None` without a `pull_url`.
    pub pull: Option<PullConfig>,
    /// Where a delivery's events sit when it carries several (see
    /// [`crate::inbound::events`]); `None`: the body is one event.
    pub events: Option<String>,
    /// The subscription handshake's token (`meta-lead-ads`), opened; never
    /// shown, never logged.
    pub verify_token: Option<Opened>,
}

/// A write-only value, opened for use: its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Opened(pub String);

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Source {
    /// Whether the signature covers where the event id comes from: a header
    /// the scheme signs, a pointer into the (always signed) body, or none (a
    /// hash of the body stands in).
    pub fn event_id_is_signed(&self) -> bool {
        match &self.event_id {
            Some(Locator::Header(name)) => {
                self.scheme.scheme.signed_id_header() == Some(name.as_str())
            }
            Some(Locator::Pointer(_)) | None => true,
        }
    }

    /// Whether events of this type become leads; others are stored as `skipped`.
    pub fn allows(&self, event_type: Option<&str>) -> bool {
        self.allowed_event_types.is_empty()
            || event_type.is_some_and(|t| self.allowed_event_types.iter().any(|a| a == t))
    }
}

/// A source's whole configuration, as given: [`NewSource::parse`] checks it
/// and fills in the defaults. Omitted fields take their defaults; `None`
/// `secrets` (and pull auth value) keep the stored ones: a new source needs
/// its secrets, and a change ([`SourcePatch::merge`]) keeps them unless given.
/// The API's request body as it is (`SourceInput` in the OpenAPI document).
#[derive(Clone, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = SourceInput,
    description = "A source to create. Omitted fields take their defaults."
)]
pub struct SourceConfig {
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
    /// How often the source usually delivers (`30m`, `2h`, `1d`): the quiet
    /// alert compares its silence with this instead of the gap leadpipe
    /// learns from its deliveries.
    pub expected_interval: Option<String>,
    /// Where a delivery's events sit when it carries several: a JSON pointer
    /// whose `*` segments stand for every element of an array
    /// (`/entry/*/changes/*`, `/*`). The event id and type pointers and
    /// `record_pointer` then point into each event.
    pub events_pointer: Option<String>,
    /// `meta-lead-ads`: the token Meta's subscription handshake must name.
    /// Write-only.
    pub verify_token: Option<String>,
}

impl fmt::Debug for SourceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceConfig")
            .field("name", &self.name)
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

/// Creates the source; a name already taken is `Conflict` (changing a
/// source is [`update`]'s, so that a mistyped create never replaces a
/// working configuration). Secrets and the pull auth value are sealed under
/// `keys`. Returns the stored row: secrets sealed, for the caller to show
/// without them.
pub async fn create<C: ConnectionTrait>(
    conn: &C,
    valid: NewSource,
    keys: &Keyring,
) -> Result<source::Model, Error> {
    let taken = || Error::Conflict(format!("source '{}' already exists", valid.name));
    if find_stored(conn, &valid.name).await?.is_some() {
        return Err(taken());
    }
    check_against_stored(&valid, None)?;
    let Some(secrets) = &valid.secrets else {
        return Err(Error::invalid(
            "secrets",
            "are required when creating a source",
        ));
    };
    let mut model = valid.active_model(Utc::now());
    model.secrets = Set(seal_secrets(&valid.name, secrets, keys)?);
    model.version = Set(1);
    model.state = Set(SourceState::Active.as_str().to_owned());
    if let SecretChange::Set(secret) = &valid.pull.auth_secret {
        model.pull_auth_secret = Set(Some(
            keys.seal(secret, &Place::pull_auth_secret(&valid.name))?,
        ));
    }
    if let Some(token) = &valid.verify_token {
        model.verify_token = Set(Some(keys.seal(token, &Place::verify_token(&valid.name))?));
    }
    // A removed source's row still holds the name: the new source takes it
    // over, from the start of reconcile, its version moving on.
    let removed = source::Entity::find_by_id(valid.name.clone())
        .filter(Column::State.eq(SourceState::Removed.as_str()))
        .one(conn)
        .await?;
    if let Some(removed) = removed {
        model.version = Set(removed.version + 1);
        model.reconcile_cursor = Set(None);
        let saved = source::Entity::update_many()
            .set(model)
            .filter(Column::Name.eq(valid.name.as_str()))
            .filter(Column::Version.eq(removed.version))
            .exec_with_returning(conn)
            .await?;
        return saved.into_iter().next().ok_or_else(taken);
    }
    // A create racing this one for the name: the unique key decides.
    source::Entity::insert(model)
        .exec_with_returning(conn)
        .await
        .map_err(|e| match e.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(_)) => taken(),
            _ => e.into(),
        })
}

/// Changes the fields `patch` gives on the source `name` (see
/// [`SourcePatch`] for the merge rule), only at a version `if_match` names.
/// The whole result is checked as a new source is, and stored in one
/// compare-and-set on the version. Returns the stored row.
pub async fn update<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    patch: SourcePatch,
    if_match: &IfMatch,
    outbound: &OutboundPolicy,
    keys: &Keyring,
) -> Result<source::Model, Error> {
    // Without If-Match a concurrent change just means: read again, merge again.
    for _ in 0..3 {
        let stored = find_stored(conn, name).await?.ok_or(Error::NotFound)?;
        if_match.check(stored.version)?;
        if patch.is_empty() {
            return Ok(stored);
        }
        let valid = NewSource::parse(patch.clone().merge(&stored)?, outbound)?;
        check_against_stored(&valid, Some(&stored))?;
        let mut model = valid.active_model(Utc::now());
        model.created_at = NotSet;
        model.version = Set(stored.version + 1);
        if let Some(secrets) = &valid.secrets {
            model.secrets = Set(seal_secrets(name, secrets, keys)?);
        }
        if let SecretChange::Set(secret) = &valid.pull.auth_secret {
            model.pull_auth_secret = Set(Some(keys.seal(secret, &Place::pull_auth_secret(name))?));
        }
        if let Some(token) = &valid.verify_token {
            model.verify_token = Set(Some(keys.seal(token, &Place::verify_token(name))?));
        }
        let saved = source::Entity::update_many()
            .set(model)
            .filter(Column::Name.eq(name))
            .filter(Column::Version.eq(stored.version))
            .exec_with_returning(conn)
            .await?;
        if let Some(saved) = saved.into_iter().next() {
            return Ok(saved);
        }
    }
    let current = find_stored(conn, name).await?.ok_or(Error::NotFound)?;
    Err(Error::PreconditionFailed {
        current: current.version,
    })
}

fn seal_secrets(
    name: &str,
    secrets: &[String],
    keys: &Keyring,
) -> Result<serde_json::Value, Error> {
    let place = Place::source_secrets(name);
    let sealed = secrets
        .iter()
        .map(|secret| keys.seal(secret, &place))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::json!(sealed))
}

/// What a save must agree with in the stored source: a kept pull auth value
/// must exist and keep going to the origin it was given for.
fn check_against_stored(valid: &NewSource, stored: Option<&source::Model>) -> Result<(), Error> {
    let keep_auth = valid.pull.auth_secret == SecretChange::Keep;
    let Some(stored) = stored else {
        if keep_auth {
            return Err(Error::invalid(
                "pull_auth_secret",
                "is required with pull_auth_header (none is stored yet)",
            ));
        }
        return Ok(());
    };
    // A scheme change without new secrets never gets here: the merge
    // refuses it (`SourcePatch::merge`).
    if keep_auth {
        if stored.pull_auth_secret.is_none() {
            return Err(Error::invalid(
                "pull_auth_secret",
                "is required with pull_auth_header (none is stored yet)",
            ));
        }
        let moved = match (&stored.pull_url, &valid.pull.url) {
            (Some(old), Some(new)) => !pull_config::same_origin(old, new),
            _ => true,
        };
        if moved {
            return Err(Error::invalid(
                "pull_auth_secret",
                "is required again: pull_url now points at another origin (scheme, host or \
                 port), and the stored value only goes where it was given for",
            ));
        }
    }
    Ok(())
}

/// The source with its secrets opened, for verifying deliveries and pulling.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    keys: &Keyring,
) -> Result<Option<Source>, Error> {
    Ok(source::Entity::find_by_id(name.to_owned())
        .filter(not_removed())
        .one(conn)
        .await?
        .map(|m| to_source(&m, Some(keys)))
        .transpose()?)
}

/// The source without its secrets (none opened, none in the result): enough
/// to map and process a stored delivery.
pub async fn find_without_secrets<C: ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<Option<Source>, Error> {
    Ok(source::Entity::find_by_id(name.to_owned())
        .filter(not_removed())
        .one(conn)
        .await?
        .map(|m| to_source(&m, None))
        .transpose()?)
}

/// The stored row, secrets sealed, for showing without them.
pub async fn find_stored<C: ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<Option<source::Model>, Error> {
    Ok(source::Entity::find_by_id(name.to_owned())
        .filter(not_removed())
        .one(conn)
        .await?)
}

/// Every stored row, by name; see [`find_stored`].
pub async fn list<C: ConnectionTrait>(conn: &C) -> Result<Vec<source::Model>, Error> {
    Ok(source::Entity::find()
        .filter(not_removed())
        .order_by_asc(Column::Name)
        .all(conn)
        .await?)
}

/// A removed source is kept only for the name its events carry: every
/// look-up passes it by.
fn not_removed() -> sea_orm::Condition {
    sea_orm::Condition::all().add(Column::State.ne(SourceState::Removed.as_str()))
}

/// The stored secrets, opened (legacy plaintext ones as they are).
fn open_secrets(model: &source::Model, keys: &Keyring) -> Result<Vec<String>, DbErr> {
    let stored: Vec<String> = serde_json::from_value(model.secrets.clone())
        .map_err(|_| DbErr::Custom(format!("source {}: secrets are not a list", model.name)))?;
    let place = Place::source_secrets(&model.name);
    stored
        .iter()
        .map(|s| {
            keys.open(s, &place)
                .map_err(|e| DbErr::Custom(format!("source {}: secrets: {e}", model.name)))
        })
        .collect()
}

/// `keys`: open the secrets and the pull auth value; `None`: leave both out.
fn to_source(model: &source::Model, keys: Option<&Keyring>) -> Result<Source, DbErr> {
    let scheme: Scheme = model
        .scheme
        .parse()
        .map_err(|e: crate::inbound::signature::ParseSchemeError| DbErr::Custom(e.to_string()))?;
    let (secrets, pull_auth, verify_token) = match keys {
        Some(keys) => {
            let verify_token = model
                .verify_token
                .as_ref()
                .map(|v| keys.open(v, &Place::verify_token(&model.name)).map(Opened))
                .transpose()
                .map_err(|e| DbErr::Custom(format!("source {}: verify_token: {e}", model.name)))?;
            let pull_auth = model
                .pull_auth_secret
                .as_ref()
                .map(|v| keys.open(v, &Place::pull_auth_secret(&model.name)))
                .transpose()
                .map_err(|e| {
                    DbErr::Custom(format!("source {}: pull_auth_secret: {e}", model.name))
                })?;
            (open_secrets(model, keys)?, pull_auth, verify_token)
        }
        None => (Vec::new(), None, None),
    };
    let mut config = SchemeConfig::new(scheme, secrets);
    config.tolerance_secs = model.tolerance_secs;
    config.signature_header = model.signature_header.clone();
    config.event_id_header = model.event_id_header.clone();
    Ok(Source {
        name: model.name.clone(),
        scheme: config,
        event_id: join(&model.event_id_header, &model.event_id_pointer),
        event_type: join(&model.event_type_header, &model.event_type_pointer),
        allowed_event_types: model.allowed_event_types(),
        mapping: RecordMapping {
            record: model.record_pointer.clone(),
            source_ref: model.source_ref_pointer.clone(),
            email: model.email_pointer.clone(),
            name: model.name_pointer.clone(),
            phone: model.phone_pointer.clone(),
            company: model.company_pointer.clone(),
            updated_at: model.updated_at_pointer.clone(),
        },
        pull: pull_config::from_columns(
            model.pull_url.as_ref(),
            model.pull_auth_header.as_ref(),
            pull_auth.as_ref(),
            model.pull_page_size,
            model.reconcile_cron.as_ref(),
        ),
        events: model.events_pointer.clone(),
        verify_token,
    })
}

fn join(header: &Option<String>, pointer: &Option<String>) -> Option<Locator> {
    match (header, pointer) {
        (Some(h), _) => Some(Locator::Header(h.clone())),
        (None, Some(p)) => Some(Locator::Pointer(p.clone())),
        (None, None) => None,
    }
}

impl source::Model {
    /// Empty: every event type is processed.
    pub fn allowed_event_types(&self) -> Vec<String> {
        self.allowed_event_types
            .clone()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    /// How many secrets are stored; the only thing shown of them.
    pub fn secret_count(&self) -> usize {
        self.secrets.as_array().map_or(0, Vec::len)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::net_guard::OutboundPolicy;

    fn input(scheme: &str, secrets: &[&str]) -> SourceConfig {
        SourceConfig {
            name: "partner".into(),
            scheme: scheme.into(),
            secrets: Some(secrets.iter().map(|s| (*s).to_owned()).collect()),
            ..Default::default()
        }
    }

    const HMAC: &str = "sixteen-byte-key";
    const STRIPE: &str = "whsec_stripe-signing-secret";

    fn validate_strict(input: SourceConfig) -> Result<NewSource, Error> {
        NewSource::parse(input, &OutboundPolicy::default())
    }

    fn fields(err: Error) -> Vec<String> {
        match err {
            Error::Invalid(f) => f.into_iter().map(|f| f.field).collect(),
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_filled_in_per_scheme() {
        let v = validate_strict(input(
            "standard-webhooks",
            &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
        ))
        .unwrap();
        assert_eq!(v.tolerance_secs, 300);
        assert_eq!(v.event_id, Some(Locator::Header("webhook-id".into())));
        assert_eq!(v.event_type, Some(Locator::Pointer("/type".into())));
        assert_eq!(v.mapping.record, "/data");
        assert_eq!(v.mapping.source_ref, "/id");
        assert_eq!(v.mapping.email.as_deref(), Some("/email"));

        let v = validate_strict(input("stripe", &[STRIPE])).unwrap();
        assert_eq!(v.event_id, Some(Locator::Pointer("/id".into())));
        let v = validate_strict(input("github", &[HMAC])).unwrap();
        assert_eq!(v.event_type, Some(Locator::Header("x-github-event".into())));
        let v = validate_strict(input("hmac-sha256", &[HMAC])).unwrap();
        assert_eq!(v.event_id, None);
    }

    #[test]
    fn batching_schemes_default_to_their_senders_shapes() {
        let meta = validate_strict(input("meta-lead-ads", &[HMAC])).unwrap();
        assert_eq!(meta.events.as_deref(), Some("/entry/*/changes/*"));
        assert_eq!(
            meta.event_id,
            Some(Locator::Pointer("/value/leadgen_id".into()))
        );
        assert_eq!(meta.event_type, Some(Locator::Pointer("/field".into())));
        assert_eq!(meta.allowed_event_types, ["leadgen"]);
        assert_eq!(
            (
                meta.mapping.record.as_str(),
                meta.mapping.source_ref.as_str()
            ),
            ("/value", "/leadgen_id")
        );
        let hubspot = validate_strict(input("hubspot-v3", &[HMAC])).unwrap();
        assert_eq!(hubspot.events.as_deref(), Some("/*"));
        assert_eq!(hubspot.event_id, Some(Locator::Pointer("/eventId".into())));
        assert_eq!(
            (
                hubspot.mapping.record.as_str(),
                hubspot.mapping.source_ref.as_str()
            ),
            ("", "/objectId")
        );
        assert!(hubspot.allowed_event_types.is_empty());
        // Others deliver one event at a time unless told.
        assert_eq!(
            validate_strict(input("github", &[HMAC])).unwrap().events,
            None
        );
    }

    #[test]
    fn events_need_a_star_and_ids_from_a_pointer() {
        let mut i = input("hmac-sha256", &[HMAC]);
        i.events_pointer = Some("/items".into());
        assert_eq!(
            fields(validate_strict(i.clone()).unwrap_err()),
            ["events_pointer"]
        );
        i.events_pointer = Some("/items/*".into());
        i.event_id_header = Some("x-event-id".into());
        assert_eq!(
            fields(validate_strict(i.clone()).unwrap_err()),
            ["event_id_pointer"]
        );
        i.event_id_header = None;
        i.event_id_pointer = Some("/id".into());
        assert_eq!(
            validate_strict(i).unwrap().events.as_deref(),
            Some("/items/*")
        );
        // github's id is a header: batching it needs a pointer instead.
        let mut g = input("github", &[HMAC]);
        g.events_pointer = Some("/*".into());
        assert_eq!(
            fields(validate_strict(g).unwrap_err()),
            ["event_id_pointer"]
        );
    }

    #[test]
    fn only_meta_takes_a_verify_token() {
        let mut i = input("meta-lead-ads", &[HMAC]);
        i.verify_token = Some(" token ".into());
        assert_eq!(
            validate_strict(i.clone()).unwrap().verify_token.as_deref(),
            Some("token")
        );
        i.verify_token = Some("  ".into());
        assert_eq!(fields(validate_strict(i).unwrap_err()), ["verify_token"]);
        let mut other = input("github", &[HMAC]);
        other.verify_token = Some("token".into());
        assert_eq!(
            fields(validate_strict(other).unwrap_err()),
            ["verify_token"]
        );
        let i = SourceConfig {
            verify_token: Some("write-only-token".into()),
            ..input("meta-lead-ads", &[HMAC])
        };
        assert!(!format!("{i:?}").contains("write-only-token"));
    }

    #[test]
    fn rejects_bad_name_scheme_secrets_and_pointers() {
        let mut i = input("standard-webhooks", &["not base64 %%"]);
        i.name = "Bad Name".into();
        i.record_pointer = Some("data".into());
        i.tolerance_secs = Some(0);
        assert_eq!(
            fields(validate_strict(i).unwrap_err()),
            ["name", "tolerance_secs", "secrets", "record_pointer"]
        );
        assert_eq!(
            fields(validate_strict(input("svix", &["x"])).unwrap_err()),
            ["scheme"]
        );
        assert_eq!(
            fields(validate_strict(input("github", &[])).unwrap_err()),
            ["secrets"]
        );
    }

    #[test]
    fn event_id_header_and_pointer_are_exclusive() {
        let mut i = input("hmac-sha256", &[HMAC]);
        i.event_id_header = Some("X-Event-Id".into());
        assert_eq!(
            validate_strict(i.clone()).unwrap().event_id,
            Some(Locator::Header("x-event-id".into()))
        );
        i.event_id_pointer = Some("/id".into());
        assert_eq!(
            fields(validate_strict(i).unwrap_err()),
            ["event_id_pointer"]
        );
    }

    #[test]
    fn allow_list_needs_an_event_type() {
        let mut i = input("hmac-sha256", &[HMAC]);
        i.allowed_event_types = Some(vec!["lead.created".into()]);
        assert_eq!(
            fields(validate_strict(i.clone()).unwrap_err()),
            ["allowed_event_types"]
        );
        i.event_type_pointer = Some("/type".into());
        assert!(validate_strict(i).is_ok());
    }

    #[test]
    fn signature_header_only_for_hmac() {
        let mut i = input("github", &[HMAC]);
        i.signature_header = Some("x-sig".into());
        assert_eq!(
            fields(validate_strict(i).unwrap_err()),
            ["signature_header"]
        );
    }

    fn messages(err: Error) -> Vec<String> {
        match err {
            Error::Invalid(f) => f.into_iter().map(|f| f.message).collect(),
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn hmac_schemes_refuse_ed25519_keys_and_short_secrets_naming_the_rule() {
        let public = "whpk_6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw=";
        for scheme in ["github", "stripe", "hmac-sha256"] {
            let m = messages(validate_strict(input(scheme, &[public])).unwrap_err());
            assert!(m[0].contains("ed25519"), "{scheme}: {m:?}");
            let m = messages(validate_strict(input(scheme, &["whsk_c2VjcmV0"])).unwrap_err());
            assert!(m[0].contains("ed25519"), "{scheme}: {m:?}");
            let m = messages(validate_strict(input(scheme, &[HMAC, "s"])).unwrap_err());
            assert!(
                m[0].contains("secret #2") && m[0].contains("16 bytes"),
                "{m:?}"
            );
        }
        // standard-webhooks keeps its public keys, refuses private and tiny keys.
        assert!(validate_strict(input("standard-webhooks", &[public])).is_ok());
        let m =
            messages(validate_strict(input("standard-webhooks", &["whsk_c2VjcmV0"])).unwrap_err());
        assert!(m[0].contains("private signing key"), "{m:?}");
        let m =
            messages(validate_strict(input("standard-webhooks", &["whsec_c2VjcmV0"])).unwrap_err());
        assert!(m[0].contains("16 bytes"), "{m:?}");
    }

    #[test]
    fn pointers() {
        for ok in ["", "/", "/data", "/a~0b/c~1d", "/0"] {
            assert!(is_valid_pointer(ok), "{ok}");
        }
        for bad in ["data", "/a~2", "/a~", &format!("/{}", "x".repeat(255))] {
            assert!(!is_valid_pointer(bad), "{bad}");
        }
    }

    fn stored(secrets: serde_json::Value) -> source::Model {
        source::Model {
            name: "x".into(),
            scheme: "github".into(),
            secrets,
            tolerance_secs: 300,
            signature_header: None,
            event_id_header: None,
            event_id_pointer: None,
            event_type_header: Some("x-github-event".into()),
            event_type_pointer: None,
            allowed_event_types: None,
            record_pointer: "".into(),
            source_ref_pointer: "/id".into(),
            email_pointer: None,
            name_pointer: None,
            phone_pointer: None,
            company_pointer: None,
            updated_at_pointer: None,
            created_at: Utc::now(),
            updated_at: Utc::now(),
            pull_url: Some("https://api.example.com/leads".into()),
            pull_auth_header: Some("authorization".into()),
            pull_auth_secret: Some("Bearer pull-secret-value".into()),
            pull_page_size: 100,
            reconcile_cron: None,
            reconcile_cursor: None,
            expected_interval_secs: None,
            events_pointer: None,
            verify_token: None,
            version: 1,
            state: "active".into(),
        }
    }

    #[test]
    fn allows() {
        let mut s = to_source(&stored(serde_json::json!(["s"])), Some(&Keyring::none())).unwrap();
        assert!(s.allows(None));
        s.allowed_event_types = vec!["push".into()];
        assert!(s.allows(Some("push")));
        assert!(!s.allows(Some("issues")));
        assert!(!s.allows(None));
    }

    #[test]
    fn debug_never_shows_secrets() {
        let i = input("github", &["super-secret-value"]);
        assert!(!format!("{i:?}").contains("super-secret-value"));
        let m = stored(serde_json::json!(["super-secret-value"]));
        assert!(!format!("{m:?}").contains("super-secret-value"));
        let mut s = to_source(&m, Some(&Keyring::none())).unwrap();
        assert!(!format!("{s:?}").contains("super-secret-value"));
        s.verify_token = Some(Opened("opened-verify-token".into()));
        assert!(!format!("{s:?}").contains("opened-verify-token"));
        assert!(!format!("{s:?}").contains("pull-secret-value"));
        assert!(!format!("{m:?}").contains("pull-secret-value"));
    }
}
