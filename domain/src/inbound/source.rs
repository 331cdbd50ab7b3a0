//! Webhook sources: how each sender signs its deliveries, and where the event
//! id, the event type and the lead record sit in them.
//!
//! Secrets are write-only: they go in through [`SourceInput`], are stored
//! sealed (see [`crate::sealed`]), are opened into [`Source::scheme`] to
//! verify signatures, and come out nowhere — [`SourceView`] carries only
//! their count, and every `Debug` redacts them.

use std::fmt;

use chrono::Utc;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveValue::{NotSet, Set},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
};
use serde::{Deserialize, Serialize};

use crate::entities::source::{self, Column};
use crate::error::{Error, FieldError};
use crate::inbound::mapping::RecordMapping;
use crate::inbound::signature::{
    DEFAULT_TOLERANCE_SECS, Scheme, SchemeConfig, secret_problem, standard_webhooks,
};
use crate::lead::record::is_valid_source_name;
use crate::outbound::net_guard::OutboundPolicy;
use crate::reconcile::config::{
    self as pull_config, PullConfig, PullInput, SecretChange, ValidPull,
};
use crate::sealed::{Keyring, Place};

pub const DEFAULT_RECORD_POINTER: &str = "/data";
pub const DEFAULT_SOURCE_REF_POINTER: &str = "/id";
const MAX_TOLERANCE_SECS: i64 = 24 * 3600;
const MAX_SECRETS: usize = 8;
const MAX_ALLOWED_TYPES: usize = 100;

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

/// A source's configuration as the API and CLI show it: everything but the
/// secrets, of which only the count is shown.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = Source)]
pub struct SourceView {
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
    pub created_at: chrono::DateTime<Utc>,
    pub updated_at: chrono::DateTime<Utc>,
    // Reconcile. The auth value is write-only: only whether one is set shows.
    pub pull_url: Option<String>,
    pub pull_auth_header: Option<String>,
    pub pull_auth_configured: bool,
    pub pull_page_size: i64,
    pub cron: Option<String>,
    /// Where the next reconcile run continues (`null`: from the start).
    pub reconcile_cursor: Option<String>,
}

/// A source to create, or the new configuration of an existing one. Omitted
/// fields take their defaults; omitted `secrets` keep the stored ones (a new
/// source needs them).
#[derive(Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceInput {
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
    /// …and its value. Write-only; omitted on an update: the stored one stays.
    pub pull_auth_secret: Option<String>,
    pub pull_page_size: Option<i64>,
    /// When to reconcile by itself: cron with a seconds field (`0 */5 * * * *`).
    pub cron: Option<String>,
}

impl fmt::Debug for SourceInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceInput")
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

/// Whether an upsert created the source or replaced its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    Created,
    Updated,
}

/// Creates the source, or replaces the configuration of the one with this
/// name, in one statement (`INSERT .. ON CONFLICT (name) DO UPDATE`). A
/// `pull_url` must pass the strict outbound policy; see [`upsert_with`].
pub async fn upsert<C: ConnectionTrait>(
    conn: &C,
    input: SourceInput,
    keys: &Keyring,
) -> Result<(SourceView, Saved), Error> {
    upsert_with(conn, input, &OutboundPolicy::default(), keys).await
}

/// [`upsert`], checking a `pull_url` against `outbound` (its allow-list).
/// New secrets and pull auth values are sealed under `keys`.
pub async fn upsert_with<C: ConnectionTrait>(
    conn: &C,
    input: SourceInput,
    outbound: &OutboundPolicy,
    keys: &Keyring,
) -> Result<(SourceView, Saved), Error> {
    let valid = validate(input, outbound)?;
    let stored = source::Entity::find_by_id(valid.name.clone())
        .one(conn)
        .await?;
    check_against_stored(&valid, stored.as_ref(), keys)?;
    let now = Utc::now();
    let mut model = valid.active_model(now);
    if let SecretChange::Set(secret) = &valid.pull.auth_secret {
        model.pull_auth_secret = Set(Some(
            keys.seal(secret, &Place::pull_auth_secret(&valid.name))?,
        ));
    }
    let mut updated = vec![
        Column::Scheme,
        Column::ToleranceSecs,
        Column::SignatureHeader,
        Column::EventIdHeader,
        Column::EventIdPointer,
        Column::EventTypeHeader,
        Column::EventTypePointer,
        Column::AllowedEventTypes,
        Column::RecordPointer,
        Column::SourceRefPointer,
        Column::EmailPointer,
        Column::NamePointer,
        Column::PhonePointer,
        Column::CompanyPointer,
        Column::UpdatedAtPointer,
        Column::UpdatedAt,
        Column::PullUrl,
        Column::PullAuthHeader,
        Column::PullPageSize,
        Column::ReconcileCron,
    ];
    // The cursor is never part of a configuration: saving keeps it.
    match &valid.pull.auth_secret {
        SecretChange::Keep => model.pull_auth_secret = NotSet,
        SecretChange::Set(_) | SecretChange::Clear => updated.push(Column::PullAuthSecret),
    }
    let stored = match &valid.secrets {
        Some(secrets) => {
            let place = Place::source_secrets(&valid.name);
            let sealed = secrets
                .iter()
                .map(|secret| keys.seal(secret, &place))
                .collect::<Result<Vec<_>, _>>()?;
            model.secrets = Set(serde_json::json!(sealed));
            updated.push(Column::Secrets);
            source::Entity::insert(model)
                .on_conflict(
                    OnConflict::column(Column::Name)
                        .update_columns(updated)
                        .to_owned(),
                )
                .exec_with_returning(conn)
                .await?
        }
        // Without secrets only an existing source can be updated.
        None => {
            model.created_at = NotSet;
            let found = source::Entity::update_many()
                .set(model)
                .filter(Column::Name.eq(&valid.name))
                .exec_with_returning(conn)
                .await?;
            found
                .into_iter()
                .next()
                .ok_or_else(|| Error::invalid("secrets", "are required when creating a source"))?
        }
    };
    // Both timestamps are `now` only on insert.
    let saved = if stored.created_at == stored.updated_at {
        Saved::Created
    } else {
        Saved::Updated
    };
    Ok((view(&stored)?, saved))
}

/// What a save must agree with in the stored source: the stored secrets must
/// fit a new scheme, and a kept pull auth value must exist and keep going to
/// the origin it was given for.
fn check_against_stored(
    valid: &ValidInput,
    stored: Option<&source::Model>,
    keys: &Keyring,
) -> Result<(), Error> {
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
    if valid.secrets.is_none() && stored.scheme != valid.scheme.as_str() {
        let secrets = open_secrets(stored, keys)?;
        if let Some(problem) = secrets
            .iter()
            .find_map(|secret| secret_problem(valid.scheme, secret))
        {
            return Err(Error::invalid(
                "secrets",
                &format!(
                    "the stored secrets do not fit scheme {}: {problem}; send new secrets",
                    valid.scheme
                ),
            ));
        }
    }
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
) -> Result<Option<Source>, DbErr> {
    source::Entity::find_by_id(name.to_owned())
        .one(conn)
        .await?
        .map(|m| to_source(&m, Some(keys)))
        .transpose()
}

/// The source without its secrets (none opened, none in the result): enough
/// to map and process a stored delivery.
pub async fn find_without_secrets<C: ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<Option<Source>, DbErr> {
    source::Entity::find_by_id(name.to_owned())
        .one(conn)
        .await?
        .map(|m| to_source(&m, None))
        .transpose()
}

pub async fn find_view<C: ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<Option<SourceView>, DbErr> {
    source::Entity::find_by_id(name.to_owned())
        .one(conn)
        .await?
        .map(|m| view(&m))
        .transpose()
}

pub async fn list<C: ConnectionTrait>(conn: &C) -> Result<Vec<SourceView>, DbErr> {
    source::Entity::find()
        .order_by_asc(Column::Name)
        .all(conn)
        .await?
        .iter()
        .map(view)
        .collect()
}

/// A validated input with every default filled in, so what is stored is
/// exactly what applies (and what `GET` shows).
struct ValidInput {
    name: String,
    scheme: Scheme,
    secrets: Option<Vec<String>>,
    tolerance_secs: i64,
    signature_header: Option<String>,
    event_id: Option<Locator>,
    event_type: Option<Locator>,
    allowed_event_types: Vec<String>,
    mapping: RecordMapping,
    pull: ValidPull,
}

impl fmt::Debug for ValidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValidInput")
            .field("name", &self.name)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl ValidInput {
    fn active_model(&self, now: chrono::DateTime<Utc>) -> source::ActiveModel {
        let (id_header, id_pointer) = split(self.event_id.clone());
        let (type_header, type_pointer) = split(self.event_type.clone());
        let m = &self.mapping;
        source::ActiveModel {
            name: Set(self.name.clone()),
            scheme: Set(self.scheme.as_str().to_owned()),
            secrets: NotSet,
            tolerance_secs: Set(self.tolerance_secs),
            signature_header: Set(self.signature_header.clone()),
            event_id_header: Set(id_header),
            event_id_pointer: Set(id_pointer),
            event_type_header: Set(type_header),
            event_type_pointer: Set(type_pointer),
            allowed_event_types: Set(Some(serde_json::json!(self.allowed_event_types))),
            record_pointer: Set(m.record.clone()),
            source_ref_pointer: Set(m.source_ref.clone()),
            email_pointer: Set(m.email.clone()),
            name_pointer: Set(m.name.clone()),
            phone_pointer: Set(m.phone.clone()),
            company_pointer: Set(m.company.clone()),
            updated_at_pointer: Set(m.updated_at.clone()),
            created_at: Set(now),
            updated_at: Set(now),
            pull_url: Set(self.pull.url.clone()),
            pull_auth_header: Set(self.pull.auth_header.clone()),
            pull_auth_secret: match &self.pull.auth_secret {
                SecretChange::Set(secret) => Set(Some(secret.clone())),
                SecretChange::Clear => Set(None),
                SecretChange::Keep => NotSet,
            },
            pull_page_size: Set(self.pull.page_size),
            reconcile_cron: Set(self.pull.cron.clone()),
            reconcile_cursor: NotSet,
        }
    }
}

fn split(locator: Option<Locator>) -> (Option<String>, Option<String>) {
    match locator {
        Some(Locator::Header(h)) => (Some(h), None),
        Some(Locator::Pointer(p)) => (None, Some(p)),
        None => (None, None),
    }
}

fn validate(input: SourceInput, outbound: &OutboundPolicy) -> Result<ValidInput, Error> {
    let mut errors = Vec::new();
    let name = input.name.trim().to_owned();
    if !is_valid_source_name(&name) {
        errors.push(FieldError::new(
            "name",
            "must be 1 to 64 characters: lower-case letters, digits, '.', '_' or '-', starting with a letter or digit",
        ));
    }
    let scheme = match input.scheme.parse::<Scheme>() {
        Ok(s) => Some(s),
        Err(_) => {
            errors.push(FieldError::new(
                "scheme",
                "must be one of standard-webhooks, github, stripe, hmac-sha256",
            ));
            None
        }
    };
    let tolerance_secs = input.tolerance_secs.unwrap_or(DEFAULT_TOLERANCE_SECS);
    if !(1..=MAX_TOLERANCE_SECS).contains(&tolerance_secs) {
        errors.push(FieldError::new(
            "tolerance_secs",
            "must be between 1 and 86400",
        ));
    }
    let signature_header = header_field(&mut errors, "signature_header", input.signature_header);
    if signature_header.is_some() && scheme.is_some_and(|s| s != Scheme::HmacSha256) {
        errors.push(FieldError::new(
            "signature_header",
            "only the hmac-sha256 scheme has a configurable signature header",
        ));
    }
    let secrets = input.secrets.map(|s| {
        s.into_iter()
            .map(|secret| secret.trim().to_owned())
            .collect::<Vec<_>>()
    });
    if let (Some(secrets), Some(scheme)) = (&secrets, scheme) {
        if secrets.is_empty() || secrets.len() > MAX_SECRETS {
            errors.push(FieldError::new("secrets", secret_rule(scheme)));
        } else if let Some((n, problem)) = secrets
            .iter()
            .enumerate()
            .find_map(|(n, secret)| secret_problem(scheme, secret).map(|p| (n, p)))
        {
            errors.push(FieldError::new(
                "secrets",
                format!("secret #{} does not fit scheme {scheme}: {problem}", n + 1),
            ));
        }
    }

    let event_id = locator(
        &mut errors,
        ("event_id_header", input.event_id_header),
        ("event_id_pointer", input.event_id_pointer),
    )
    .or_else(|| scheme.and_then(default_event_id));
    if let (Some(Locator::Header(header)), Some(signed)) =
        (&event_id, scheme.and_then(Scheme::signed_id_header))
        && header != signed
    {
        errors.push(FieldError::new(
            "event_id_header",
            format!(
                "{} signs its own event id ({signed}); an id from another header would not be covered by the signature",
                scheme.map_or("", Scheme::as_str)
            ),
        ));
    }
    let event_type = locator(
        &mut errors,
        ("event_type_header", input.event_type_header),
        ("event_type_pointer", input.event_type_pointer),
    )
    .or_else(|| scheme.and_then(default_event_type));
    let allowed_event_types: Vec<String> = input
        .allowed_event_types
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.trim().to_owned())
        .collect();
    if allowed_event_types.len() > MAX_ALLOWED_TYPES
        || allowed_event_types
            .iter()
            .any(|t| t.is_empty() || t.len() > 255)
    {
        errors.push(FieldError::new(
            "allowed_event_types",
            "must be at most 100 event types of 1 to 255 characters",
        ));
    }
    if !allowed_event_types.is_empty() && event_type.is_none() {
        errors.push(FieldError::new(
            "allowed_event_types",
            "needs event_type_header or event_type_pointer to find an event's type",
        ));
    }

    let mut pointer = |field: &str, value: Option<String>, default: &str| {
        let value = value.unwrap_or_else(|| default.to_owned());
        if !is_valid_pointer(&value) {
            errors.push(FieldError::new(
                field,
                "must be a JSON pointer: empty or starting with '/', at most 255 characters",
            ));
        }
        value
    };
    let mapping = RecordMapping {
        record: pointer(
            "record_pointer",
            input.record_pointer,
            DEFAULT_RECORD_POINTER,
        ),
        source_ref: pointer(
            "source_ref_pointer",
            input.source_ref_pointer,
            DEFAULT_SOURCE_REF_POINTER,
        ),
        email: Some(pointer("email_pointer", input.email_pointer, "/email")),
        name: Some(pointer("name_pointer", input.name_pointer, "/name")),
        phone: Some(pointer("phone_pointer", input.phone_pointer, "/phone")),
        company: Some(pointer(
            "company_pointer",
            input.company_pointer,
            "/company",
        )),
        updated_at: Some(pointer(
            "updated_at_pointer",
            input.updated_at_pointer,
            "/updated_at",
        )),
    };

    let pull = pull_config::validate(
        &mut errors,
        PullInput {
            url: input.pull_url,
            auth_header: input.pull_auth_header,
            auth_secret: input.pull_auth_secret,
            page_size: input.pull_page_size,
            cron: input.cron,
        },
        outbound,
    );

    match scheme {
        Some(scheme) if errors.is_empty() => Ok(ValidInput {
            name,
            scheme,
            secrets,
            tolerance_secs,
            signature_header,
            event_id,
            event_type,
            allowed_event_types,
            mapping,
            pull,
        }),
        _ => Err(Error::Invalid(errors)),
    }
}

fn secret_rule(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::StandardWebhooks => {
            "must be 1 to 8 secrets, each whsec_<base64> (HMAC) or whpk_<base64> (ed25519 public key)"
        }
        Scheme::Github | Scheme::Stripe | Scheme::HmacSha256 => {
            "must be 1 to 8 secrets of at least 16 bytes (never whpk_/whsk_ keys)"
        }
    }
}

/// Where the scheme's senders put the event id when the source says nothing.
fn default_event_id(scheme: Scheme) -> Option<Locator> {
    match scheme {
        Scheme::StandardWebhooks => Some(Locator::Header(standard_webhooks::ID_HEADER.into())),
        Scheme::Github => Some(Locator::Header(
            crate::inbound::signature::github::DELIVERY_HEADER.into(),
        )),
        // Stripe's event object carries its id (`evt_…`) at the top.
        Scheme::Stripe => Some(Locator::Pointer("/id".into())),
        Scheme::HmacSha256 => None,
    }
}

fn default_event_type(scheme: Scheme) -> Option<Locator> {
    match scheme {
        Scheme::StandardWebhooks | Scheme::Stripe => Some(Locator::Pointer("/type".into())),
        Scheme::Github => Some(Locator::Header("x-github-event".into())),
        Scheme::HmacSha256 => None,
    }
}

fn locator(
    errors: &mut Vec<FieldError>,
    (header_name, header): (&str, Option<String>),
    (pointer_name, pointer): (&str, Option<String>),
) -> Option<Locator> {
    let header = header_field(errors, header_name, header);
    match (header, pointer) {
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                pointer_name,
                format!("give either {header_name} or {pointer_name}, not both"),
            ));
            None
        }
        (Some(h), None) => Some(Locator::Header(h)),
        (None, Some(p)) if is_valid_pointer(&p) => Some(Locator::Pointer(p)),
        (None, Some(_)) => {
            errors.push(FieldError::new(
                pointer_name,
                "must be a JSON pointer: empty or starting with '/', at most 255 characters",
            ));
            None
        }
        (None, None) => None,
    }
}

/// Header names are stored lower-case; HTTP compares them case-insensitively.
fn header_field(
    errors: &mut Vec<FieldError>,
    field: &str,
    value: Option<String>,
) -> Option<String> {
    let value = value?.trim().to_ascii_lowercase();
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if value.is_empty() || value.len() > 128 || !value.bytes().all(token) {
        errors.push(FieldError::new(field, "must be an HTTP header name"));
        return None;
    }
    Some(value)
}

/// RFC 6901: empty (the whole document) or `/`-separated tokens in which `~`
/// only appears as `~0` or `~1`.
pub fn is_valid_pointer(pointer: &str) -> bool {
    let escapes_ok = || {
        let bytes = pointer.as_bytes();
        bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'~')
            .all(|(i, _)| matches!(bytes.get(i + 1), Some(b'0' | b'1')))
    };
    pointer.len() <= 255 && (pointer.is_empty() || pointer.starts_with('/')) && escapes_ok()
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
    let (secrets, pull_auth) = match keys {
        Some(keys) => {
            let pull_auth = model
                .pull_auth_secret
                .as_ref()
                .map(|v| keys.open(v, &Place::pull_auth_secret(&model.name)))
                .transpose()
                .map_err(|e| {
                    DbErr::Custom(format!("source {}: pull_auth_secret: {e}", model.name))
                })?;
            (open_secrets(model, keys)?, pull_auth)
        }
        None => (Vec::new(), None),
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
        allowed_event_types: allowed_types(model),
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
    })
}

fn join(header: &Option<String>, pointer: &Option<String>) -> Option<Locator> {
    match (header, pointer) {
        (Some(h), _) => Some(Locator::Header(h.clone())),
        (None, Some(p)) => Some(Locator::Pointer(p.clone())),
        (None, None) => None,
    }
}

fn allowed_types(model: &source::Model) -> Vec<String> {
    model
        .allowed_event_types
        .clone()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

fn view(model: &source::Model) -> Result<SourceView, DbErr> {
    let secret_count = model.secrets.as_array().map_or(0, Vec::len);
    Ok(SourceView {
        name: model.name.clone(),
        scheme: model.scheme.clone(),
        secret_count,
        tolerance_secs: model.tolerance_secs,
        signature_header: model.signature_header.clone(),
        event_id_header: model.event_id_header.clone(),
        event_id_pointer: model.event_id_pointer.clone(),
        event_type_header: model.event_type_header.clone(),
        event_type_pointer: model.event_type_pointer.clone(),
        allowed_event_types: allowed_types(model),
        record_pointer: model.record_pointer.clone(),
        source_ref_pointer: model.source_ref_pointer.clone(),
        email_pointer: model.email_pointer.clone(),
        name_pointer: model.name_pointer.clone(),
        phone_pointer: model.phone_pointer.clone(),
        company_pointer: model.company_pointer.clone(),
        updated_at_pointer: model.updated_at_pointer.clone(),
        created_at: model.created_at,
        updated_at: model.updated_at,
        pull_url: model.pull_url.clone(),
        pull_auth_header: model.pull_auth_header.clone(),
        pull_auth_configured: model.pull_auth_secret.is_some(),
        pull_page_size: model.pull_page_size,
        cron: model.reconcile_cron.clone(),
        reconcile_cursor: model.reconcile_cursor.clone(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn input(scheme: &str, secrets: &[&str]) -> SourceInput {
        SourceInput {
            name: "partner".into(),
            scheme: scheme.into(),
            secrets: Some(secrets.iter().map(|s| (*s).to_owned()).collect()),
            ..Default::default()
        }
    }

    const HMAC: &str = "sixteen-byte-key";
    const STRIPE: &str = "whsec_stripe-signing-secret";

    fn validate_strict(input: SourceInput) -> Result<ValidInput, Error> {
        validate(input, &OutboundPolicy::default())
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
    fn debug_and_view_never_show_secrets() {
        let i = input("github", &["super-secret-value"]);
        assert!(!format!("{i:?}").contains("super-secret-value"));
        let m = stored(serde_json::json!(["super-secret-value"]));
        assert!(!format!("{m:?}").contains("super-secret-value"));
        let s = to_source(&m, Some(&Keyring::none())).unwrap();
        assert!(!format!("{s:?}").contains("super-secret-value"));
        let v = serde_json::to_string(&view(&m).unwrap()).unwrap();
        assert!(!v.contains("super-secret-value"), "{v}");
        assert!(!v.contains("pull-secret-value"), "{v}");
        assert!(!format!("{s:?}").contains("pull-secret-value"));
        assert!(!format!("{m:?}").contains("pull-secret-value"));
        assert!(v.contains(r#""secret_count":1"#), "{v}");
    }
}
