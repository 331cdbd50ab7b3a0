//! Parsing a `SourceConfig` into a `NewSource`, defaults filled in: the one
//! place that decides what a source may be, so what is stored is exactly
//! what applies (and what `GET` shows).

use std::fmt;

use chrono::Utc;
use sea_orm::ActiveValue::{NotSet, Set};

use super::{DEFAULT_RECORD_POINTER, DEFAULT_SOURCE_REF_POINTER, Locator, SourceConfig};
use crate::entities::source;
use crate::error::{Error, FieldError};
use crate::inbound::mapping::RecordMapping;
use crate::inbound::signature::{
    DEFAULT_TOLERANCE_SECS, Scheme, secret_problem, standard_webhooks,
};
use crate::inbound::source::pull::{self as pull_config, PullInput, SecretChange, ValidPull};
use crate::net_guard::OutboundPolicy;
use crate::source_name::is_valid_source_name;

const MAX_TOLERANCE_SECS: i64 = 24 * 3600;
const MAX_SECRETS: usize = 8;
const MAX_ALLOWED_TYPES: usize = 100;

/// A source's configuration, checked, with every default filled in, so what
/// is stored is exactly what applies (and what `GET` shows). Only
/// [`NewSource::parse`] makes one.
pub struct NewSource {
    pub(super) name: String,
    pub(super) scheme: Scheme,
    pub(super) secrets: Option<Vec<String>>,
    pub(super) tolerance_secs: i64,
    pub(super) signature_header: Option<String>,
    pub(super) event_id: Option<Locator>,
    pub(super) event_type: Option<Locator>,
    pub(super) allowed_event_types: Vec<String>,
    pub(super) mapping: RecordMapping,
    pub(super) pull: ValidPull,
    pub(super) expected_interval_secs: Option<i64>,
    pub(super) events: Option<String>,
    /// `None`: keep the stored one (none for a new source).
    pub(super) verify_token: Option<String>,
}

impl fmt::Debug for NewSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewSource")
            .field("name", &self.name)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl NewSource {
    /// Checks `config` (a `pull_url` against `outbound`, its allow-list)
    /// and fills in the defaults; every problem found is reported at once.
    pub fn parse(config: SourceConfig, outbound: &OutboundPolicy) -> Result<Self, Error> {
        validate(config, outbound)
    }

    pub(super) fn active_model(&self, now: chrono::DateTime<Utc>) -> source::ActiveModel {
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
            expected_interval_secs: Set(self.expected_interval_secs),
            events_pointer: Set(self.events.clone()),
            // Sealed by the caller when given; only Meta's scheme has one.
            verify_token: if self.scheme == Scheme::MetaLeadAds {
                NotSet
            } else {
                Set(None)
            },
            version: NotSet,
            state: NotSet,
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

fn validate(input: SourceConfig, outbound: &OutboundPolicy) -> Result<NewSource, Error> {
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
                "must be one of standard-webhooks, github, stripe, hmac-sha256, typeform, calendly, slack, meta-lead-ads, hubspot-v3",
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
    let events = match input.events_pointer {
        Some(p) if is_valid_pointer(&p) && p.split('/').any(|t| t == "*") => Some(p),
        Some(_) => {
            errors.push(FieldError::new(
                "events_pointer",
                "must be a JSON pointer with at least one '*' segment (every element of an array), at most 255 characters",
            ));
            None
        }
        None => scheme.and_then(default_events),
    };
    if events.is_some() && matches!(event_id, Some(Locator::Header(_))) {
        errors.push(FieldError::new(
            "event_id_pointer",
            "is needed with events_pointer: a header cannot tell the events of one delivery apart; give a pointer into each event",
        ));
    }
    let verify_token = input.verify_token.map(|t| t.trim().to_owned());
    if let Some(token) = &verify_token {
        if scheme.is_some_and(|s| s != Scheme::MetaLeadAds) {
            errors.push(FieldError::new(
                "verify_token",
                "only the meta-lead-ads scheme has a subscription handshake",
            ));
        } else if token.is_empty() || token.len() > 255 {
            errors.push(FieldError::new(
                "verify_token",
                "must be 1 to 255 characters",
            ));
        }
    }
    let event_type = locator(
        &mut errors,
        ("event_type_header", input.event_type_header),
        ("event_type_pointer", input.event_type_pointer),
    )
    .or_else(|| scheme.and_then(default_event_type));
    let allowed_event_types: Vec<String> = input
        .allowed_event_types
        .unwrap_or_else(|| scheme.map(default_allowed_event_types).unwrap_or_default())
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
    let defaults = scheme.map_or(DEFAULT_MAPPING, default_mapping);
    let mapping = RecordMapping {
        record: pointer("record_pointer", input.record_pointer, defaults.0),
        source_ref: pointer("source_ref_pointer", input.source_ref_pointer, defaults.1),
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
            defaults.2,
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

    let expected_interval_secs = match input
        .expected_interval
        .as_deref()
        .map(super::interval::parse)
    {
        None => None,
        Some(Ok(secs)) => Some(secs),
        Some(Err(rule)) => {
            errors.push(FieldError::new("expected_interval", rule));
            None
        }
    };

    match scheme {
        Some(scheme) if errors.is_empty() => Ok(NewSource {
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
            expected_interval_secs,
            events,
            verify_token,
        }),
        _ => Err(Error::Invalid(errors)),
    }
}

fn secret_rule(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::StandardWebhooks => {
            "must be 1 to 8 secrets, each whsec_<base64> (HMAC) or whpk_<base64> (ed25519 public key)"
        }
        Scheme::Github
        | Scheme::Stripe
        | Scheme::HmacSha256
        | Scheme::Typeform
        | Scheme::Calendly
        | Scheme::Slack
        | Scheme::MetaLeadAds
        | Scheme::HubspotV3 => {
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
        // So do Typeform's payloads and Slack's event callbacks.
        Scheme::Typeform | Scheme::Slack => Some(Locator::Pointer("/event_id".into())),
        // Calendly's events have none: the signed body's hash stands in.
        Scheme::HmacSha256 | Scheme::Calendly => None,
        // Into each event of the delivery (`default_events`).
        Scheme::MetaLeadAds => Some(Locator::Pointer("/value/leadgen_id".into())),
        Scheme::HubspotV3 => Some(Locator::Pointer("/eventId".into())),
    }
}

/// Senders that batch: Meta puts each lead in a change of an entry,
/// HubSpot sends an array of events.
fn default_events(scheme: Scheme) -> Option<String> {
    match scheme {
        Scheme::MetaLeadAds => Some("/entry/*/changes/*".into()),
        Scheme::HubspotV3 => Some("/*".into()),
        _ => None,
    }
}

/// A Page subscribed for leads may be subscribed to other fields too:
/// only `leadgen` changes are leads.
fn default_allowed_event_types(scheme: Scheme) -> Vec<String> {
    match scheme {
        Scheme::MetaLeadAds => vec!["leadgen".into()],
        _ => Vec::new(),
    }
}

/// `record_pointer`, `source_ref_pointer` and `updated_at_pointer` by default.
const DEFAULT_MAPPING: (&str, &str, &str) = (
    DEFAULT_RECORD_POINTER,
    DEFAULT_SOURCE_REF_POINTER,
    "/updated_at",
);

fn default_mapping(scheme: Scheme) -> (&'static str, &'static str, &'static str) {
    match scheme {
        // A change's value: `{leadgen_id, form_id, page_id, ad_id, created_time}`.
        Scheme::MetaLeadAds => ("/value", "/leadgen_id", "/created_time"),
        // An event is the record: the CRM object's id, and when it happened (ms).
        Scheme::HubspotV3 => ("", "/objectId", "/occurredAt"),
        _ => DEFAULT_MAPPING,
    }
}

fn default_event_type(scheme: Scheme) -> Option<Locator> {
    match scheme {
        Scheme::StandardWebhooks | Scheme::Stripe => Some(Locator::Pointer("/type".into())),
        Scheme::Github => Some(Locator::Header("x-github-event".into())),
        Scheme::Typeform => Some(Locator::Pointer("/event_type".into())),
        Scheme::Calendly => Some(Locator::Pointer("/event".into())),
        Scheme::Slack => Some(Locator::Pointer("/event/type".into())),
        Scheme::MetaLeadAds => Some(Locator::Pointer("/field".into())),
        Scheme::HubspotV3 => Some(Locator::Pointer("/subscriptionType".into())),
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
