//! Reading a JSON body with our own limits and errors, after authentication,
//! so an unauthenticated caller learns nothing about what it sent.

use std::time::{Duration, Instant};

use actix_web::http::header;
use actix_web::{HttpRequest, web};
use futures::StreamExt;
use serde::de::DeserializeOwned;

use domain::lead::record::{NUL_RULE, nul_pointer};

use crate::http::error::ApiError;

/// The request's media type without parameters, lower-cased (`""` when
/// absent): `Application/JSON; charset=utf-8` is `application/json`.
pub fn media_type(req: &HttpRequest) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// `application/json` or a `+json` type.
pub fn is_json(media_type: &str) -> bool {
    media_type == "application/json" || media_type.ends_with("+json")
}

/// What a body may be: at most `max_bytes` (`LEADPIPE_MAX_BODY_BYTES`),
/// arriving at `pace`. The server's come from `HttpSettings::body_limits`.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    pub max_bytes: usize,
    pub pace: BodyPace,
}

/// The raw bytes of a JSON body (checked content type, bounded size), for
/// callers that also hash them (Idempotency-Key fingerprints).
pub async fn read_json_bytes(
    req: &HttpRequest,
    payload: web::Payload,
    limits: BodyLimits,
) -> Result<web::Bytes, ApiError> {
    if !is_json(&media_type(req)) {
        return Err(ApiError::UnsupportedMediaType);
    }
    read_bytes(req, payload, limits.max_bytes, limits.pace).await
}

/// The body's length as the client declares it (`Content-Length`), if it
/// does and the value is a length.
pub fn declared_length(req: &HttpRequest) -> Option<usize> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
}

/// How fast a request body must arrive: within `grace`, plus one second
/// for every `min_bytes_per_sec` bytes received so far (Apache's
/// `mod_reqtimeout` rule). Without it a sender trickling a byte now and
/// then holds its connection, and whatever the handler holds, for ever; a
/// slow but steady upload still gets through.
#[derive(Debug, Clone, Copy)]
pub struct BodyPace {
    /// `LEADPIPE_BODY_TIMEOUT_SECS`: the time any body has, before what its
    /// bytes earn.
    pub grace: Duration,
    pub min_bytes_per_sec: u64,
}

impl BodyPace {
    /// A body that must arrive whole within `wait`, whatever its size.
    pub const fn fixed(wait: Duration) -> Self {
        Self {
            grace: wait,
            min_bytes_per_sec: u64::MAX,
        }
    }

    /// When the rest of the body is due, `received` bytes in; `None` when
    /// that is past what an `Instant` holds (as good as never). Integer
    /// arithmetic: nothing here can panic, whatever the settings.
    fn deadline(&self, started: Instant, received: usize) -> Option<Instant> {
        let rate = u128::from(self.min_bytes_per_sec.max(1));
        let received = received as u128;
        let secs = u64::try_from(received / rate).unwrap_or(u64::MAX);
        // Below a second: the remainder is less than `rate`.
        let nanos = u32::try_from(received % rate * 1_000_000_000 / rate).unwrap_or(0);
        let earned =
            Duration::from_secs(secs).saturating_add(Duration::from_nanos(u64::from(nanos)));
        started.checked_add(self.grace.saturating_add(earned))
    }
}

/// A request body read chunk by chunk under a [`BodyPace`]: `408` once it
/// falls behind.
pub struct PacedBody {
    payload: web::Payload,
    pace: BodyPace,
    started: Instant,
    received: usize,
}

impl PacedBody {
    /// Starts the clock.
    pub fn new(payload: web::Payload, pace: BodyPace) -> Self {
        Self {
            payload,
            pace,
            started: Instant::now(),
            received: 0,
        }
    }

    /// The next chunk, `None` at the end of the body.
    pub async fn next_chunk(&mut self) -> Result<Option<web::Bytes>, ApiError> {
        let next = match self.pace.deadline(self.started, self.received) {
            Some(deadline) => tokio::time::timeout_at(deadline.into(), self.payload.next()).await,
            None => Ok(self.payload.next().await),
        };
        match next {
            Err(_) => Err(ApiError::BodyTimeout {
                received: self.received,
                elapsed_secs: self.started.elapsed().as_secs_f64(),
                grace_secs: self.pace.grace.as_secs_f64(),
                min_rate: self.pace.min_bytes_per_sec,
            }),
            Ok(None) => Ok(None),
            Ok(Some(Err(e))) => Err(ApiError::MalformedBody(format!("could not read body: {e}"))),
            Ok(Some(Ok(chunk))) => {
                self.received += chunk.len();
                Ok(Some(chunk))
            }
        }
    }
}

/// The body exactly as sent, at most `limit` bytes (else 413, decided from
/// `Content-Length` before reading when the client declares it), arriving
/// at `pace` (else 408, [`BodyPace`]).
pub async fn read_bytes(
    req: &HttpRequest,
    payload: web::Payload,
    limit: usize,
    pace: BodyPace,
) -> Result<web::Bytes, ApiError> {
    let declared = declared_length(req);
    if declared.is_some_and(|len| len > limit) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let mut body = web::BytesMut::with_capacity(declared.unwrap_or(1024).min(limit));
    let mut paced = PacedBody::new(payload, pace);
    while let Some(chunk) = paced.next_chunk().await? {
        if body.len() + chunk.len() > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Reads and drops the body of a request refused before its body was
/// needed, when it is at most `limit` bytes: actix closes a connection whose
/// request body was left unread, and a refused sender's retry would then
/// pay a new connection (and, behind a proxy, a TLS handshake), which costs
/// the server more than reading a small body does. A larger body is left
/// unread: closing costs less. So is one that has not arrived within
/// [`DISCARD_WAIT`]: a refusal does not wait on a slow sender. (A chunked
/// body left unread ends its connection too: [`super::body_limit`].)
pub async fn discard_small_body(req: &HttpRequest, payload: web::Payload, limit: usize) {
    // Read as any body is (refusing a declared or actual excess at once),
    // and dropped.
    let _ = read_bytes(req, payload, limit, BodyPace::fixed(DISCARD_WAIT)).await;
}

/// How long a refused request's body may take to arrive.
const DISCARD_WAIT: Duration = Duration::from_secs(1);

/// Syntax errors are 400; well-formed JSON of the wrong shape, or holding a
/// NUL anywhere, is 422 naming the field.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if let Some(error) = nul_error(body) {
        return Err(error);
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_data() {
            let field = if path == "." { "body".to_owned() } else { path };
            ApiError::invalid(&field, strip_position(&inner.to_string()))
        } else {
            ApiError::MalformedBody(format!("malformed JSON: {inner}"))
        }
    })
}

/// PostgreSQL's `text` and `jsonb` refuse U+0000 and SQLite keeps it, so a
/// body with a NUL in any key or string is refused at the door on both
/// backends, before a handler could store part of it: 422 naming the
/// top-level field. Malformed JSON is left to the parser's 400.
fn nul_error(body: &[u8]) -> Option<ApiError> {
    if !has_nul_escape(body) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let pointer = nul_pointer(&value)?;
    let Some(map) = value.as_object() else {
        return Some(ApiError::invalid("body", nul_message(&pointer)));
    };
    let (key, item) = map
        .iter()
        .find(|(key, item)| key.contains('\0') || nul_pointer(item).is_some())?;
    let field = key.replace('\0', "\\u0000");
    Some(if key.contains('\0') || item.is_string() {
        ApiError::invalid(&field, NUL_RULE)
    } else {
        ApiError::invalid(&field, nul_message(&pointer))
    })
}

fn nul_message(pointer: &str) -> String {
    format!("{NUL_RULE} in keys or strings; found at {pointer}")
}

/// JSON can carry a NUL only as the escape `\u0000` (a raw control byte is
/// malformed); it is one when an odd run of backslashes ends in its `\`,
/// else the backslash itself was escaped (`\\u0000` is text).
fn has_nul_escape(body: &[u8]) -> bool {
    const ESCAPE: &[u8] = b"\\u0000";
    body.iter()
        .enumerate()
        .filter(|&(at, &byte)| byte == b'\\' && body[at..].starts_with(ESCAPE))
        .any(|(at, _)| {
            let run = body[..=at]
                .iter()
                .rev()
                .take_while(|&&b| b == b'\\')
                .count();
            run % 2 == 1
        })
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The server's body limits, from its settings.
impl crate::config::HttpSettings {
    /// How fast a request body must arrive (a timeout of at least 100 ms).
    pub fn body_pace(&self) -> BodyPace {
        BodyPace {
            grace: std::time::Duration::try_from_secs_f64(
                self.body_timeout_secs.clamp(0.1, 86_400.0),
            )
            .unwrap_or(std::time::Duration::from_secs(20)),
            min_bytes_per_sec: self.body_min_rate.max(1),
        }
    }

    /// The limits on a request body: `max_body_bytes` at `body_pace`.
    pub fn body_limits(&self) -> BodyLimits {
        BodyLimits {
            max_bytes: self.max_body_bytes,
            pace: self.body_pace(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_escape_is_told_from_an_escaped_backslash() {
        assert!(has_nul_escape(br#"{"a": "x\u0000"}"#));
        assert!(has_nul_escape(br#"{"a": "\\\u0000"}"#));
        assert!(!has_nul_escape(br#"{"a": "C:\\u0000"}"#));
        assert!(!has_nul_escape(b""));
        assert!(!has_nul_escape(br#"{"a": "\u0001"}"#));
    }

    #[test]
    fn a_body_earns_a_second_for_every_min_rate_bytes() {
        let pace = BodyPace {
            grace: Duration::from_secs(20),
            min_bytes_per_sec: 500,
        };
        let start = Instant::now();
        let due = |received| pace.deadline(start, received).map(|d| d - start);
        assert_eq!(due(0), Some(Duration::from_secs(20)));
        assert_eq!(due(250), Some(Duration::from_millis(20_500)));
        assert_eq!(due(1_000), Some(Duration::from_secs(22)));
    }

    #[test]
    fn extreme_settings_never_panic() {
        let start = Instant::now();
        let slowest = BodyPace {
            grace: Duration::MAX,
            min_bytes_per_sec: 0,
        };
        assert_eq!(slowest.deadline(start, usize::MAX), None);
        let fixed = BodyPace::fixed(Duration::from_secs(1));
        // A gigabyte earns it nothing to speak of.
        let due = fixed.deadline(start, 1 << 30).map(|d| d - start);
        assert!(
            due.is_some_and(|d| d < Duration::from_millis(1_001)),
            "{due:?}"
        );
        assert!(fixed.deadline(start, usize::MAX).is_some());
    }
}
