//! From a delivery's body to a `LeadRecord`, by the source's JSON pointers.
//! Every error here is permanent: the same body maps the same way next time,
//! so only a fixed mapping (and an ops retry) can help.

use crate::natural_key::KeyHasher;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::lead::record::{LeadRecord, from_unix, parse_timestamp};

/// JSON pointers (RFC 6901): `record` into the body, the others into the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMapping {
    pub record: String,
    pub source_ref: String,
    pub email: Option<String>,
    pub name: Option<String>,
    pub phone: Option<String>,
    pub company: Option<String>,
    pub updated_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("body is not JSON")]
    NotJson,
    #[error("no record at {0:?}")]
    NoRecord(String),
    #[error("the record at {0:?} is not a JSON object")]
    RecordNotObject(String),
    #[error("{field} at {pointer:?} must be a string or a number")]
    NotText {
        field: &'static str,
        pointer: String,
    },
    #[error(
        "updated_at at {0:?} must be an RFC 3339 timestamp or a unix timestamp (seconds or milliseconds)"
    )]
    BadTimestamp(String),
}

/// The lead record in `body`. The record object itself becomes the lead's
/// `payload`, so nothing the sender said is lost.
pub fn map_record(
    source: &str,
    mapping: &RecordMapping,
    body: &[u8],
) -> Result<LeadRecord, MappingError> {
    let document: Value = serde_json::from_slice(body).map_err(|_| MappingError::NotJson)?;
    let record = document
        .pointer(&mapping.record)
        .filter(|v| !v.is_null())
        .ok_or_else(|| MappingError::NoRecord(mapping.record.clone()))?;
    if !record.is_object() {
        return Err(MappingError::RecordNotObject(mapping.record.clone()));
    }
    map_object(source, mapping, record)
}

/// A record object itself (as a pull API returns it, without the webhook's
/// envelope) mapped by the source's pointers; `mapping.record` is not used.
pub fn map_object(
    source: &str,
    mapping: &RecordMapping,
    record: &Value,
) -> Result<LeadRecord, MappingError> {
    if !record.is_object() {
        return Err(MappingError::RecordNotObject(String::new()));
    }
    let text =
        |field: &'static str, pointer: Option<&String>| -> Result<Option<String>, MappingError> {
            let Some(pointer) = pointer else {
                return Ok(None);
            };
            match record.pointer(pointer) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(Value::Number(n)) => Ok(Some(crate::json_number::as_text(n))),
                Some(_) => Err(MappingError::NotText {
                    field,
                    pointer: pointer.clone(),
                }),
            }
        };
    Ok(LeadRecord {
        source: source.to_owned(),
        // A missing source_ref is left to `normalise`, which names the field.
        source_ref: text("source_ref", Some(&mapping.source_ref))?,
        email: text("email", mapping.email.as_ref())?,
        phone: text("phone", mapping.phone.as_ref())?,
        name: text("name", mapping.name.as_ref())?,
        company: text("company", mapping.company.as_ref())?,
        source_updated_at: timestamp(record, mapping.updated_at.as_ref())?,
        payload: Some(record.clone()),
    })
}

/// The record object in a delivery's parsed body, by the mapping's pointer.
pub fn record_in<'a>(mapping: &RecordMapping, document: &'a Value) -> Option<&'a Value> {
    document
        .pointer(&mapping.record)
        .filter(|record| record.is_object())
}

/// The tombstone key hash ([`KeyHasher::key_hash`]) of a record
/// object's natural key, read by the `source_ref` pointer alone and trimmed
/// as `normalise` does: known even when another field of the record fails
/// to map or validate, so the rows that keep such a record stay findable by
/// an erasure without anyone reading their bodies.
pub fn key_hash_of(
    hasher: &KeyHasher,
    source: &str,
    mapping: &RecordMapping,
    record: &Value,
) -> Option<String> {
    source_ref_of(mapping, record).map(|source_ref| hasher.key_hash(source, &source_ref))
}

/// A record object's `source_ref` by its pointer alone, trimmed; `None`
/// when it is missing, blank or not text.
pub fn source_ref_of(mapping: &RecordMapping, record: &Value) -> Option<String> {
    let source_ref = match record.pointer(&mapping.source_ref)? {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => crate::json_number::as_text(n),
        _ => return None,
    };
    (!source_ref.is_empty()).then_some(source_ref)
}

fn timestamp(
    record: &Value,
    pointer: Option<&String>,
) -> Result<Option<DateTime<Utc>>, MappingError> {
    let Some(pointer) = pointer else {
        return Ok(None);
    };
    let bad = || MappingError::BadTimestamp(pointer.clone());
    match record.pointer(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => parse_timestamp(s).map(Some).ok_or_else(bad),
        Some(Value::Number(n)) => n.as_i64().and_then(from_unix).map(Some).ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn mapping() -> RecordMapping {
        RecordMapping {
            record: "/data".into(),
            source_ref: "/id".into(),
            email: Some("/email".into()),
            name: Some("/name".into()),
            phone: Some("/phone".into()),
            company: Some("/company".into()),
            updated_at: Some("/updated_at".into()),
        }
    }

    #[test]
    fn maps_by_pointers_and_keeps_the_record_as_payload() {
        let body = br#"{"type":"lead.created","data":{"id":42,"email":"A@B.io",
            "name":"Ada","updated_at":"2026-11-30T10:00:00Z","extra":{"x":1}}}"#;
        let r = map_record("ads", &mapping(), body).unwrap();
        assert_eq!(r.source, "ads");
        assert_eq!(r.source_ref.as_deref(), Some("42"));
        assert_eq!(r.email.as_deref(), Some("A@B.io"));
        assert_eq!(r.phone, None);
        assert_eq!(
            r.source_updated_at,
            Some(Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap())
        );
        assert_eq!(r.payload.unwrap()["extra"]["x"], 1);
    }

    #[test]
    fn nested_pointers_and_unix_timestamps() {
        let mut m = mapping();
        m.record = "/data/object".into();
        m.email = Some("/contact/email".into());
        m.updated_at = Some("/changed".into());
        let body = br#"{"data":{"object":{"id":"c_1","contact":{"email":"x@y.io"},"changed":1700000000}}}"#;
        let r = map_record("s", &m, body).unwrap();
        assert_eq!(r.email.as_deref(), Some("x@y.io"));
        assert_eq!(r.source_updated_at.unwrap().timestamp(), 1_700_000_000);
        // Milliseconds are recognised, not read as seconds in the year 55,000.
        let body = br#"{"data":{"object":{"id":"c_1","changed":1700000000123}}}"#;
        let r = map_record("s", &m, body).unwrap();
        assert_eq!(
            r.source_updated_at.unwrap().timestamp_millis(),
            1_700_000_000_123
        );
    }

    #[test]
    fn permanent_errors_name_the_problem() {
        let m = mapping();
        assert_eq!(
            map_record("s", &m, b"not json").unwrap_err(),
            MappingError::NotJson
        );
        assert_eq!(
            map_record("s", &m, br#"{"lead":{}}"#).unwrap_err(),
            MappingError::NoRecord("/data".into())
        );
        assert_eq!(
            map_record("s", &m, br#"{"data":[1]}"#).unwrap_err(),
            MappingError::RecordNotObject("/data".into())
        );
        assert!(matches!(
            map_record("s", &m, br#"{"data":{"id":1,"email":{"a":1}}}"#),
            Err(MappingError::NotText { field: "email", .. })
        ));
        assert!(matches!(
            map_record("s", &m, br#"{"data":{"id":1,"updated_at":"yesterday"}}"#),
            Err(MappingError::BadTimestamp(_))
        ));
    }

    #[test]
    fn the_key_hash_is_read_even_when_another_field_does_not_map() {
        let body: Value =
            serde_json::from_str(r#"{"data":{"id":" 42 ","email":{"a":1}}}"#).unwrap();
        let hasher = KeyHasher::new(&crate::sealed::Keyring::for_tests());
        let record = record_in(&mapping(), &body).unwrap();
        assert!(map_object("s", &mapping(), record).is_err());
        assert_eq!(
            key_hash_of(&hasher, "s", &mapping(), record),
            Some(hasher.key_hash("s", "42"))
        );
        let numeric: Value = serde_json::from_str(r#"{"id":42}"#).unwrap();
        assert_eq!(
            key_hash_of(&hasher, "s", &mapping(), &numeric),
            key_hash_of(&hasher, "s", &mapping(), record)
        );
        for none in [r#"{"email":"a@b.io"}"#, r#"{"id":"  "}"#, r#"{"id":[1]}"#] {
            let record: Value = serde_json::from_str(none).unwrap();
            assert_eq!(
                key_hash_of(&hasher, "s", &mapping(), &record),
                None,
                "{none}"
            );
        }
    }

    #[test]
    fn missing_source_ref_is_left_to_validation() {
        let r = map_record("s", &mapping(), br#"{"data":{"email":"a@b.io"}}"#).unwrap();
        assert_eq!(r.source_ref, None);
        assert!(r.normalise().is_err());
    }
}
