//! A lead record as a sender states it, and its validated, normalised form.

use chrono::{DateTime, Datelike, SubsecRound, TimeDelta, TimeZone, Utc};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use validator::Validate;

use crate::error::{Error, FieldError, field_errors};
use crate::json_number;
use crate::source_name::is_valid_source_name;

pub const MAX_SOURCE_REF_LEN: usize = 255;
/// How far ahead of this server's clock a sender's `source_updated_at` may
/// be. Clocks drift by seconds; a record dated hours ahead would make every
/// real update from its sender `stale` until that time comes.
pub const MAX_FUTURE_SKEW: TimeDelta = TimeDelta::minutes(5);

/// What a sender says about a lead: every door (API, webhook, reconcile,
/// import) produces one of these before calling `ingest`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct LeadRecord {
    /// 1–64 of `a-z 0-9 . _ -`, starting with a letter or digit.
    pub source: String,
    /// The sender's id of the lead, 1–255 characters, trimmed.
    pub source_ref: Option<String>,
    /// Trimmed and lower-cased; must be an address.
    pub email: Option<String>,
    /// Reduced to a leading `+` and digits (5–20 digits).
    pub phone: Option<String>,
    /// Trimmed, at most 255 characters.
    pub name: Option<String>,
    /// Trimmed, at most 255 characters.
    pub company: Option<String>,
    /// When the sender last changed the record; an older one than stored is `stale`.
    pub source_updated_at: Option<DateTime<Utc>>,
    /// Anything else the sender wants kept (an object).
    #[schema(value_type = Option<Object>)]
    pub payload: Option<serde_json::Value>,
}

/// A record that passed validation: strings trimmed, empties dropped, email
/// lower-cased, phone reduced to `+` and digits, timestamps in microseconds.
#[derive(Debug, Clone, PartialEq, Validate)]
pub struct NewLead {
    #[validate(custom(function = "validate_source_name"))]
    pub source: String,
    #[validate(length(min = 1, max = 255, message = "must be 1 to 255 characters"))]
    pub source_ref: String,
    #[validate(email(message = "must be an email address"), length(max = 320))]
    pub email: Option<String>,
    #[validate(custom(function = "validate_phone"))]
    pub phone: Option<String>,
    #[validate(length(max = 255, message = "must be at most 255 characters"))]
    pub name: Option<String>,
    #[validate(length(max = 255, message = "must be at most 255 characters"))]
    pub company: Option<String>,
    pub source_updated_at: Option<DateTime<Utc>>,
    pub payload: serde_json::Value,
}

impl LeadRecord {
    pub fn normalise(self) -> Result<NewLead, Error> {
        let source_ref = clean(self.source_ref);
        let Some(source_ref) = source_ref else {
            let mut errors = vec![FieldError::new("source_ref", "is required")];
            if !is_valid_source_name(self.source.trim()) {
                errors.insert(0, FieldError::new("source", SOURCE_RULE));
            }
            return Err(Error::Invalid(errors));
        };
        let mut payload = match self.payload {
            None | Some(serde_json::Value::Null) => serde_json::Value::Object(Default::default()),
            Some(v @ serde_json::Value::Object(_)) => v,
            Some(_) => return Err(Error::invalid("payload", "must be a JSON object")),
        };
        let long_number = json_number::write_out(&mut payload).err();
        let lead = NewLead {
            source: self.source.trim().to_owned(),
            source_ref,
            email: clean(self.email).map(|e| e.to_lowercase()),
            phone: clean(self.phone).map(|p| normalise_phone(&p)),
            name: clean(self.name),
            company: clean(self.company),
            // Stored precision is microseconds on both backends; comparing a
            // nanosecond value with its stored copy must not look "newer".
            source_updated_at: self.source_updated_at.map(|t| t.trunc_subsecs(6)),
            payload,
        };
        let mut errors = nul_errors(&lead);
        if let Some(pointer) = long_number {
            errors.push(FieldError::new(
                "payload",
                format!("{}; found at {pointer}", json_number::NUMBER_RULE),
            ));
        }
        if let Err(invalid) = lead.validate() {
            // A field holding a NUL is reported for that alone.
            let more: Vec<FieldError> = field_errors(&invalid)
                .into_iter()
                .filter(|e| !errors.iter().any(|nul| nul.field == e.field))
                .collect();
            errors.extend(more);
        }
        if !errors.is_empty() {
            errors.sort_by(|a, b| a.field.cmp(&b.field));
            return Err(Error::Invalid(errors));
        }
        if lead
            .source_updated_at
            .is_some_and(|t| t > Utc::now() + MAX_FUTURE_SKEW)
        {
            return Err(Error::invalid(
                "source_updated_at",
                "is more than 5 minutes in the future: check the sender's clock, and that unix timestamps are in seconds or milliseconds",
            ));
        }
        // Year 0 and before are a sender's bug, and PostgreSQL (no year 0)
        // cannot read them back from the batch upsert's JSON.
        if lead.source_updated_at.is_some_and(|t| t.year() < 1) {
            return Err(Error::invalid(
                "source_updated_at",
                "is before year 1: check the sender's clock and date format",
            ));
        }
        if lead.source_ref.chars().any(char::is_control) {
            return Err(Error::invalid(
                "source_ref",
                "must not contain control characters",
            ));
        }
        Ok(lead)
    }
}

impl NewLead {
    /// Fingerprint of everything the sender owns: equal hashes mean an ingest
    /// has nothing to change. The timestamp is part of it, so a newer copy of
    /// the same content still advances the staleness bar.
    pub fn content_hash(&self) -> String {
        // The bytes of `json!([email, phone, name, company, micros,
        // payload]).to_string()`, serialised from borrows: building that
        // array cloned the payload for every ingest.
        let canonical = (
            &self.email,
            &self.phone,
            &self.name,
            &self.company,
            self.source_updated_at.map(|t| t.timestamp_micros()),
            &self.payload,
        );
        // Strings, an integer and a `Value` (string keys only): cannot fail.
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        hex::encode(Sha256::digest(&bytes))
    }
}

/// A unix timestamp in seconds, milliseconds or microseconds, told apart by
/// size (seconds up to the year 5138): senders differ, and milliseconds read
/// as seconds would land in the year ~55,000.
pub fn from_unix(value: i64) -> Option<DateTime<Utc>> {
    const SECONDS_BELOW: u64 = 100_000_000_000;
    let magnitude = value.unsigned_abs();
    if magnitude < SECONDS_BELOW {
        Utc.timestamp_opt(value, 0).single()
    } else if magnitude < SECONDS_BELOW * 1_000 {
        Utc.timestamp_millis_opt(value).single()
    } else if magnitude < SECONDS_BELOW * 1_000_000 {
        Some(Utc.timestamp_micros(value).single()?)
    } else {
        None
    }
}

/// An RFC 3339 timestamp, or a unix timestamp as digits (see [`from_unix`]).
pub fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok().and_then(from_unix);
    }
    None
}

/// PostgreSQL's `text` and `jsonb` cannot hold U+0000 (SQLite can): a record
/// carrying one is invalid on every backend and at every door, refused here
/// before it joins a batch. `source` and `source_ref` have stricter rules,
/// and the phone keeps digits only.
pub const NUL_RULE: &str = "must not contain NUL characters (\\u0000)";

fn nul_errors(lead: &NewLead) -> Vec<FieldError> {
    let mut errors: Vec<FieldError> = [
        ("company", &lead.company),
        ("email", &lead.email),
        ("name", &lead.name),
    ]
    .into_iter()
    .filter(|(_, value)| value.as_deref().is_some_and(|v| v.contains('\0')))
    .map(|(field, _)| FieldError::new(field, NUL_RULE))
    .collect();
    if let Some(pointer) = nul_pointer(&lead.payload) {
        errors.push(FieldError::new(
            "payload",
            format!("{NUL_RULE} in keys or strings; found at {pointer}"),
        ));
    }
    errors
}

/// The JSON pointer of the first key or string in `value` holding a NUL, with
/// the NUL itself written `\u0000` (the pointer ends up in stored errors).
pub fn nul_pointer(value: &serde_json::Value) -> Option<String> {
    let step = |key: &str| format!("/{}", json_number::pointer_step(key));
    match value {
        serde_json::Value::String(s) if s.contains('\0') => Some(String::new()),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_pointer(item).map(|rest| format!("/{i}{rest}"))),
        serde_json::Value::Object(map) => map.iter().find_map(|(key, item)| {
            if key.contains('\0') {
                Some(step(key))
            } else {
                nul_pointer(item).map(|rest| format!("{}{rest}", step(key)))
            }
        }),
        _ => None,
    }
}

fn clean(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// Keeps a leading `+` and the digits: "+49 (30) 123-45" becomes "+493012345".
pub fn normalise_phone(raw: &str) -> String {
    let trimmed = raw.trim();
    let digits: String = trimmed.chars().filter(char::is_ascii_digit).collect();
    if trimmed.starts_with('+') {
        format!("+{digits}")
    } else {
        digits
    }
}

const SOURCE_RULE: &str = "must be 1 to 64 characters: lower-case letters, digits, '.', '_' or '-', starting with a letter or digit";

fn validate_source_name(source: &str) -> Result<(), validator::ValidationError> {
    if is_valid_source_name(source) {
        Ok(())
    } else {
        Err(validator::ValidationError::new("source").with_message(SOURCE_RULE.into()))
    }
}

fn validate_phone(phone: &str) -> Result<(), validator::ValidationError> {
    let digits = phone.trim_start_matches('+').len();
    if (5..=20).contains(&digits) {
        Ok(())
    } else {
        Err(validator::ValidationError::new("phone")
            .with_message("must contain 5 to 20 digits".into()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn record() -> LeadRecord {
        LeadRecord {
            source: "webform".into(),
            source_ref: Some(" abc-1 ".into()),
            email: Some("  Ada@Example.COM ".into()),
            phone: Some("+49 (30) 123-4567".into()),
            name: Some(" Ada Lovelace ".into()),
            company: Some("".into()),
            ..Default::default()
        }
    }

    #[test]
    fn normalises_strings_email_and_phone() {
        let lead = record().normalise().unwrap();
        assert_eq!(lead.source_ref, "abc-1");
        assert_eq!(lead.email.as_deref(), Some("ada@example.com"));
        assert_eq!(lead.phone.as_deref(), Some("+49301234567"));
        assert_eq!(lead.name.as_deref(), Some("Ada Lovelace"));
        assert_eq!(lead.company, None);
        assert_eq!(lead.payload, serde_json::json!({}));
    }

    #[test]
    fn rejects_missing_source_ref_and_bad_source() {
        let err = LeadRecord {
            source: "Bad Source".into(),
            ..Default::default()
        }
        .normalise()
        .unwrap_err();
        let Error::Invalid(fields) = err else {
            panic!("expected invalid")
        };
        let names: Vec<_> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(names, ["source", "source_ref"]);
    }

    #[test]
    fn rejects_bad_email_phone_and_payload() {
        let mut r = record();
        r.email = Some("not-an-email".into());
        r.phone = Some("12".into());
        let Error::Invalid(fields) = r.normalise().unwrap_err() else {
            panic!()
        };
        let names: Vec<_> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(names, ["email", "phone"]);

        let mut r = record();
        r.payload = Some(serde_json::json!([1, 2]));
        assert!(matches!(r.normalise(), Err(Error::Invalid(f)) if f[0].field == "payload"));
    }

    #[test]
    fn rejects_a_nul_in_any_stored_string_naming_the_field() {
        let mut r = record();
        r.name = Some("a\0b".into());
        r.email = Some("a\0@example.com".into());
        r.phone = Some("12".into());
        r.payload = Some(serde_json::json!({"ok": ["x", {"a/b~\0": 1}]}));
        let Error::Invalid(fields) = r.normalise().unwrap_err() else {
            panic!("expected invalid")
        };
        let named: Vec<_> = fields
            .iter()
            .map(|f| (f.field.as_str(), f.message.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("email", NUL_RULE),
                ("name", NUL_RULE),
                (
                    "payload",
                    "must not contain NUL characters (\\u0000) in keys or strings; found at /ok/1/a~1b~0\\u0000"
                ),
                ("phone", "must contain 5 to 20 digits"),
            ]
        );

        let mut r = record();
        r.company = Some("Acme\0".into());
        r.payload = Some(serde_json::json!({"note": "x\0y"}));
        let Error::Invalid(fields) = r.normalise().unwrap_err() else {
            panic!("expected invalid")
        };
        assert_eq!(fields[0].field, "company");
        assert!(fields[1].message.ends_with("found at /note"), "{fields:?}");
        // A NUL in the phone is dropped with the other non-digits.
        let mut r = record();
        r.phone = Some("+49\u{0}30 1234567".into());
        assert_eq!(
            r.normalise().unwrap().phone.as_deref(),
            Some("+49301234567")
        );
    }

    #[test]
    fn rejects_overlong_source_ref() {
        let mut r = record();
        r.source_ref = Some("x".repeat(MAX_SOURCE_REF_LEN + 1));
        assert!(matches!(r.normalise(), Err(Error::Invalid(f)) if f[0].field == "source_ref"));
    }

    #[test]
    fn refuses_a_timestamp_more_than_five_minutes_ahead() {
        let mut r = record();
        r.source_updated_at = Some(Utc::now() + TimeDelta::minutes(4));
        assert!(r.normalise().is_ok());
        for ahead in [TimeDelta::minutes(6), TimeDelta::days(365 * 8000)] {
            let mut r = record();
            r.source_updated_at = Some(Utc::now() + ahead);
            let Error::Invalid(fields) = r.normalise().unwrap_err() else {
                panic!("expected invalid")
            };
            assert_eq!(fields[0].field, "source_updated_at");
            assert!(
                fields[0].message.contains("in the future"),
                "{}",
                fields[0].message
            );
        }
    }

    #[test]
    fn unix_timestamps_in_seconds_milliseconds_and_microseconds() {
        let t = |s: &str| parse_timestamp(s).map(|t| t.timestamp_micros());
        assert_eq!(t("1700000000"), Some(1_700_000_000_000_000));
        assert_eq!(t("1700000000123"), Some(1_700_000_000_123_000));
        assert_eq!(t("1700000000123456"), Some(1_700_000_000_123_456));
        assert_eq!(t(" 2026-11-30T10:00:00Z "), Some(1_796_032_800_000_000));
        assert_eq!(t("0"), Some(0));
        assert_eq!(t("99999999999999999999"), None);
        assert_eq!(t("yesterday"), None);
        assert_eq!(t(""), None);
        assert_eq!(from_unix(i64::MAX), None);
    }

    #[test]
    fn content_hash_is_the_stored_one() {
        // Stored hashes decide `unchanged`: the bytes hashed must stay those
        // of the JSON array this hash was first defined by.
        let mut r = record();
        r.source_updated_at = Some(Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap());
        r.payload = Some(serde_json::json!({"b": [1, 2.5, null], "a": "x\"y", "ü": {"n": -3}}));
        let new = r.normalise().unwrap();
        let defined = serde_json::json!([
            new.email,
            new.phone,
            new.name,
            new.company,
            new.source_updated_at.map(|t| t.timestamp_micros()),
            new.payload,
        ]);
        assert_eq!(
            new.content_hash(),
            hex::encode(Sha256::digest(defined.to_string().as_bytes()))
        );
    }

    #[test]
    fn content_hash_ignores_whitespace_but_not_content() {
        let a = record().normalise().unwrap();
        let mut r = record();
        r.name = Some("Ada Lovelace".into());
        assert_eq!(a.content_hash(), r.normalise().unwrap().content_hash());
        let mut r = record();
        r.name = Some("Ada King".into());
        assert_ne!(a.content_hash(), r.normalise().unwrap().content_hash());
    }
}
