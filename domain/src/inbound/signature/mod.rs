//! Inbound webhook signature verification (and signing for outbound webhooks).
//!
//! Framework-free: callers adapt their headers through [`HeaderLookup`] and must pass the
//! body bytes exactly as received — re-serialised JSON will not verify.
//!
//! Errors never carry secrets or signature values, so they are safe to log and to use as
//! metric labels via [`SignatureError::reason`].

pub mod calendly;
pub mod github;
pub mod hmac_header;
pub mod hubspot;
pub mod meta;
pub mod slack;
pub mod standard_webhooks;
pub mod stripe;
pub mod typeform;

pub use crate::crypto::generate_standard_secret;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Replay window used by [`SchemeConfig::new`]; Standard Webhooks and Stripe both default to 5 min.
pub const DEFAULT_TOLERANCE_SECS: i64 = 300;

/// At most this many signature entries are examined per header, so a hostile header cannot
/// multiply the MAC work (entries × secrets).
pub const MAX_SIGNATURES: usize = 16;

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256 output length; any decoded tag of another length can never match.
const MAC_LEN: usize = 32;

/// Webhook signature schemes we can verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// <https://www.standardwebhooks.com> (also Svix): `v1` HMAC and `v1a` ed25519.
    StandardWebhooks,
    /// GitHub `X-Hub-Signature-256`.
    Github,
    /// Stripe `Stripe-Signature`.
    Stripe,
    /// Plain HMAC-SHA256 of the body in a configurable header.
    HmacSha256,
    /// Typeform `Typeform-Signature: sha256=<base64>`.
    Typeform,
    /// Calendly `Calendly-Webhook-Signature: t=..,v1=..`.
    Calendly,
    /// Slack v0: `X-Slack-Signature`, `X-Slack-Request-Timestamp`.
    Slack,
    /// Meta Lead Ads: `X-Hub-Signature-256` (GitHub's format), keyed with the app secret.
    MetaLeadAds,
    /// HubSpot v3: `X-HubSpot-Signature-v3` over method, URI, body and timestamp.
    HubspotV3,
}

impl Scheme {
    pub const ALL: [Scheme; 9] = [
        Scheme::StandardWebhooks,
        Scheme::Github,
        Scheme::Stripe,
        Scheme::HmacSha256,
        Scheme::Typeform,
        Scheme::Calendly,
        Scheme::Slack,
        Scheme::MetaLeadAds,
        Scheme::HubspotV3,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::StandardWebhooks => "standard-webhooks",
            Scheme::Github => "github",
            Scheme::Stripe => "stripe",
            Scheme::HmacSha256 => "hmac-sha256",
            Scheme::Typeform => "typeform",
            Scheme::Calendly => "calendly",
            Scheme::Slack => "slack",
            Scheme::MetaLeadAds => "meta-lead-ads",
            Scheme::HubspotV3 => "hubspot-v3",
        }
    }

    /// Header that carries the sender's event id, when the scheme defines one.
    /// Stripe puts the id in the JSON body; hmac-sha256 has none unless configured
    /// (see [`SchemeConfig::event_id_header`]).
    pub const fn event_id_header(self) -> Option<&'static str> {
        match self {
            Scheme::StandardWebhooks => Some(standard_webhooks::ID_HEADER),
            Scheme::Github => Some(github::DELIVERY_HEADER),
            Scheme::Stripe
            | Scheme::HmacSha256
            | Scheme::Typeform
            | Scheme::Calendly
            | Scheme::Slack
            | Scheme::MetaLeadAds
            | Scheme::HubspotV3 => None,
        }
    }

    /// The event-id header the signature covers, if the scheme signs one:
    /// only standard-webhooks signs `{id}.{timestamp}.{body}`. Every scheme
    /// signs the body, so an id found in the body is covered too.
    pub const fn signed_id_header(self) -> Option<&'static str> {
        match self {
            Scheme::StandardWebhooks => Some(standard_webhooks::ID_HEADER),
            Scheme::Github
            | Scheme::Stripe
            | Scheme::HmacSha256
            | Scheme::Typeform
            | Scheme::Calendly
            | Scheme::Slack
            | Scheme::MetaLeadAds
            | Scheme::HubspotV3 => None,
        }
    }

    /// Whether the signature covers a timestamp (and so the tolerance applies).
    pub const fn is_timestamped(self) -> bool {
        matches!(
            self,
            Scheme::StandardWebhooks
                | Scheme::Stripe
                | Scheme::Calendly
                | Scheme::Slack
                | Scheme::HubspotV3
        )
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown webhook signature scheme {0:?} (expected standard-webhooks, github, stripe, hmac-sha256, typeform, calendly, slack, meta-lead-ads or hubspot-v3)"
)]
pub struct ParseSchemeError(pub String);

impl FromStr for Scheme {
    type Err = ParseSchemeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseSchemeError(s.to_owned()))
    }
}

/// Read access to request headers. Names are matched ASCII case-insensitively; if a header
/// is repeated, implementations return the first occurrence.
pub trait HeaderLookup {
    fn header(&self, name: &str) -> Option<Cow<'_, str>>;
}

fn find_in_pairs<'a, K: AsRef<str> + 'a, V: AsRef<str> + 'a>(
    pairs: impl IntoIterator<Item = &'a (K, V)>,
    name: &str,
) -> Option<Cow<'a, str>> {
    pairs
        .into_iter()
        .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
        .map(|(_, v)| Cow::Borrowed(v.as_ref()))
}

impl<K: AsRef<str>, V: AsRef<str>> HeaderLookup for [(K, V)] {
    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        find_in_pairs(self, name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> HeaderLookup for [(K, V); N] {
    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        find_in_pairs(self, name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> HeaderLookup for Vec<(K, V)> {
    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        find_in_pairs(self, name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> HeaderLookup for &[(K, V)] {
    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        find_in_pairs(*self, name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>, S> HeaderLookup for HashMap<K, V, S> {
    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        self.iter()
            .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
            .map(|(_, v)| Cow::Borrowed(v.as_ref()))
    }
}

/// Adapts a closure (e.g. over a framework's header map) to [`HeaderLookup`]. The closure
/// is responsible for case-insensitive matching.
pub struct HeaderFn<F>(pub F);

impl<F: Fn(&str) -> Option<String>> HeaderLookup for HeaderFn<F> {
    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        (self.0)(name).map(Cow::Owned)
    }
}

/// One inbound request to verify.
#[derive(Clone, Copy)]
pub struct VerifyRequest<'a> {
    pub headers: &'a dyn HeaderLookup,
    /// Raw body bytes exactly as received.
    pub body: &'a [u8],
    /// Current time; injected so verification stays pure and testable.
    pub now_unix: i64,
    /// The method and full URL the sender called, for schemes that sign
    /// them (hubspot-v3); `None` when the service's public URL is unknown.
    pub target: Option<RequestTarget<'a>>,
}

/// A request's method and the full URL (`https://host/path?query`) the
/// sender called, as it called it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTarget<'a> {
    pub method: &'a str,
    pub uri: &'a str,
}

/// How one webhook source signs its requests.
#[derive(Clone, PartialEq, Eq)]
pub struct SchemeConfig {
    pub scheme: Scheme,
    /// Any of these may match, to allow rotation. standard-webhooks: `whsec_<base64>` (or bare
    /// base64) HMAC keys and/or `whpk_<base64>` ed25519 public keys. Other schemes: the
    /// secret's UTF-8 bytes are the HMAC key, used as-is.
    pub secrets: Vec<String>,
    /// Max |now − signed timestamp|, both directions; only for timestamped schemes.
    pub tolerance_secs: i64,
    /// hmac-sha256 only: header carrying the signature (default `x-signature`).
    pub signature_header: Option<String>,
    /// hmac-sha256 only: header carrying the sender's event id, if it has one. Ignored for
    /// other schemes, whose id header is fixed.
    pub event_id_header: Option<String>,
}

impl SchemeConfig {
    pub fn new(scheme: Scheme, secrets: Vec<String>) -> Self {
        Self {
            scheme,
            secrets,
            tolerance_secs: DEFAULT_TOLERANCE_SECS,
            signature_header: None,
            event_id_header: None,
        }
    }

    /// Name of the header that carries the signature for this config.
    pub fn signature_header(&self) -> &str {
        match self.scheme {
            Scheme::StandardWebhooks => standard_webhooks::SIGNATURE_HEADER,
            Scheme::Github => github::SIGNATURE_HEADER,
            Scheme::Stripe => stripe::SIGNATURE_HEADER,
            Scheme::Typeform => typeform::SIGNATURE_HEADER,
            Scheme::Calendly => calendly::SIGNATURE_HEADER,
            Scheme::Slack => slack::SIGNATURE_HEADER,
            Scheme::MetaLeadAds => meta::SIGNATURE_HEADER,
            Scheme::HubspotV3 => hubspot::SIGNATURE_HEADER,
            Scheme::HmacSha256 => non_blank(self.signature_header.as_deref())
                .unwrap_or(hmac_header::DEFAULT_SIGNATURE_HEADER),
        }
    }

    /// Name of the header that carries the event id for this config, if any.
    pub fn event_id_header(&self) -> Option<&str> {
        match self.scheme {
            Scheme::HmacSha256 => non_blank(self.event_id_header.as_deref()),
            other => other.event_id_header(),
        }
    }

    /// Checks every configured secret is usable for the scheme. [`verify`] silently skips
    /// unusable secrets as long as one works, so call this when saving/loading config.
    pub fn validate(&self) -> Result<(), SignatureError> {
        if !self.secrets.is_empty()
            && self
                .secrets
                .iter()
                .all(|s| secret_problem(self.scheme, s).is_none())
        {
            Ok(())
        } else {
            Err(SignatureError::NoUsableSecret)
        }
    }
}

/// Shortest HMAC key accepted when saving a source: 128 bits.
pub const MIN_HMAC_SECRET_BYTES: usize = 16;

/// Why `secret` does not fit `scheme` (the rule it breaks), or `None` when it
/// fits. Never quotes the secret.
pub fn secret_problem(scheme: Scheme, secret: &str) -> Option<&'static str> {
    match scheme {
        Scheme::StandardWebhooks => standard_webhooks::secret_problem(secret),
        Scheme::Github
        | Scheme::Stripe
        | Scheme::HmacSha256
        | Scheme::Typeform
        | Scheme::Calendly
        | Scheme::Slack
        | Scheme::MetaLeadAds
        | Scheme::HubspotV3 => {
            if is_ed25519_key(secret) {
                Some(
                    "whpk_/whsk_ values are ed25519 keys, not HMAC secrets; a public key \
                     is no secret, so anyone could sign with it",
                )
            } else if secret.len() < MIN_HMAC_SECRET_BYTES {
                Some("HMAC secrets must be at least 16 bytes")
            } else {
                None
            }
        }
    }
}

fn is_ed25519_key(secret: &str) -> bool {
    secret.starts_with(standard_webhooks::PUBLIC_KEY_PREFIX)
        || secret.starts_with(standard_webhooks::SIGNING_KEY_PREFIX)
}

// Hand-written so secrets never reach logs through `{:?}`.
impl fmt::Debug for SchemeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemeConfig")
            .field("scheme", &self.scheme)
            .field(
                "secrets",
                &format_args!("[{} redacted]", self.secrets.len()),
            )
            .field("tolerance_secs", &self.tolerance_secs)
            .field("signature_header", &self.signature_header)
            .field("event_id_header", &self.event_id_header)
            .finish()
    }
}

/// A request whose signature checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub scheme: Scheme,
    /// From the scheme's event-id header when present. Only standard-webhooks signs it;
    /// for github/hmac-sha256 it is NOT covered by the signature.
    pub event_id: Option<String>,
    /// The signed timestamp, for timestamped schemes.
    pub timestamp: Option<i64>,
    /// Index into [`SchemeConfig::secrets`] of the secret that matched (rotation tracking).
    pub secret_index: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("missing {0} header")]
    MissingHeader(String),
    #[error("malformed {header} header: {reason}")]
    MalformedHeader {
        header: String,
        reason: &'static str,
    },
    #[error("timestamp {timestamp} is outside the {tolerance_secs}s tolerance (now {now})")]
    TimestampOutsideTolerance {
        timestamp: i64,
        now: i64,
        tolerance_secs: i64,
    },
    #[error("no signature matched any configured secret")]
    NoMatchingSignature,
    #[error("no usable secret configured for this scheme")]
    NoUsableSecret,
    /// The scheme signs the URL the sender called, and the service's public
    /// URL is not configured.
    #[error("the scheme signs the URL called, and the service's public URL is not configured")]
    NoRequestTarget,
}

impl SignatureError {
    /// Stable, low-cardinality label for metrics.
    pub const fn reason(&self) -> &'static str {
        match self {
            SignatureError::MissingHeader(_) => "missing_header",
            SignatureError::MalformedHeader { .. } => "malformed_header",
            SignatureError::TimestampOutsideTolerance { .. } => "timestamp_outside_tolerance",
            SignatureError::NoMatchingSignature => "no_matching_signature",
            SignatureError::NoUsableSecret => "no_usable_secret",
            SignatureError::NoRequestTarget => "no_public_url",
        }
    }

    fn malformed(header: &str, reason: &'static str) -> Self {
        SignatureError::MalformedHeader {
            header: header.to_owned(),
            reason,
        }
    }
}

/// Verifies `req` against `cfg`. Checks run in this order: usable secret, required headers,
/// header syntax, timestamp tolerance, signature.
pub fn verify(cfg: &SchemeConfig, req: &VerifyRequest<'_>) -> Result<Verified, SignatureError> {
    match cfg.scheme {
        Scheme::StandardWebhooks => standard_webhooks::verify(cfg, req),
        Scheme::Github => github::verify(cfg, req),
        Scheme::Stripe => stripe::verify(cfg, req),
        Scheme::HmacSha256 => hmac_header::verify(cfg, req),
        Scheme::Typeform => typeform::verify(cfg, req),
        Scheme::Calendly => calendly::verify(cfg, req),
        Scheme::Slack => slack::verify(cfg, req),
        Scheme::MetaLeadAds => meta::verify(cfg, req),
        Scheme::HubspotV3 => hubspot::verify(cfg, req),
    }
}

/// [`verify`], with the same work on every refusal: one that ended before
/// any MAC over the body (a missing or malformed header, a stale timestamp)
/// computes one it throws away, so a refusal's timing says little about
/// which check refused it, or whether the source exists at all.
pub fn verify_evenly(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let verified = verify(cfg, req);
    if matches!(&verified, Err(err) if !matches!(err, SignatureError::NoMatchingSignature)) {
        std::hint::black_box(crate::crypto::hmac_sha256_bytes(
            b"leadpipe even work",
            &[req.body],
        ));
    }
    verified
}

fn non_blank(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

/// Trimmed header value; a blank value counts as missing.
fn required_header<'h>(
    headers: &'h dyn HeaderLookup,
    name: &str,
) -> Result<Cow<'h, str>, SignatureError> {
    optional_header(headers, name).ok_or_else(|| SignatureError::MissingHeader(name.to_owned()))
}

fn optional_header<'h>(headers: &'h dyn HeaderLookup, name: &str) -> Option<Cow<'h, str>> {
    match headers.header(name)? {
        Cow::Borrowed(v) => Some(Cow::Borrowed(v.trim())),
        Cow::Owned(v) => Some(Cow::Owned(v.trim().to_owned())),
    }
    .filter(|v| !v.is_empty())
}

/// Unix seconds as plain ASCII digits (no sign, no whitespace).
fn parse_unix_timestamp(header: &str, value: &str) -> Result<i64, SignatureError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SignatureError::malformed(
            header,
            "timestamp is not unix seconds",
        ));
    }
    value
        .parse()
        .map_err(|_| SignatureError::malformed(header, "timestamp out of range"))
}

fn check_tolerance(timestamp: i64, now: i64, tolerance_secs: i64) -> Result<(), SignatureError> {
    let tolerance = u64::try_from(tolerance_secs).unwrap_or(0);
    if timestamp.abs_diff(now) > tolerance {
        return Err(SignatureError::TimestampOutsideTolerance {
            timestamp,
            now,
            tolerance_secs,
        });
    }
    Ok(())
}

/// Lenient about padding because senders differ; the alphabet is still strict.
const BASE64_STANDARD_ANY_PAD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
const BASE64_URL_SAFE_ANY_PAD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn mac_sha256(key: &[u8], parts: &[&[u8]]) -> Result<HmacSha256, SignatureError> {
    // HMAC accepts keys of any length, so this cannot fail in practice.
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(key).map_err(|_| SignatureError::NoUsableSecret)?;
    for part in parts {
        mac.update(part);
    }
    Ok(mac)
}

/// Constant-time comparison of the MAC against each candidate tag.
fn mac_matches_any(mac: &HmacSha256, candidates: &[Vec<u8>]) -> bool {
    candidates
        .iter()
        .any(|tag| mac.clone().verify_slice(tag).is_ok())
}

/// Secrets used as raw UTF-8 HMAC keys (github, stripe, hmac-sha256), with their config index.
fn utf8_keys(secrets: &[String]) -> Result<Vec<(usize, &[u8])>, SignatureError> {
    let keys: Vec<_> = secrets
        .iter()
        .enumerate()
        // A public key as HMAC key would let anyone sign: never use one, even
        // if it was stored before saving checked for it.
        .filter(|(_, s)| !s.is_empty() && !is_ed25519_key(s))
        .map(|(i, s)| (i, s.as_bytes()))
        .collect();
    if keys.is_empty() {
        return Err(SignatureError::NoUsableSecret);
    }
    Ok(keys)
}

/// Index of the first secret whose HMAC over `parts` matches any candidate.
fn first_matching_secret(
    keys: &[(usize, &[u8])],
    parts: &[&[u8]],
    candidates: &[Vec<u8>],
) -> Result<usize, SignatureError> {
    for (index, key) in keys {
        if mac_matches_any(&mac_sha256(key, parts)?, candidates) {
            return Ok(*index);
        }
    }
    Err(SignatureError::NoMatchingSignature)
}

fn hmac_sha256_hex(key: &[u8], parts: &[&[u8]]) -> String {
    hex::encode(crate::crypto::hmac_sha256_bytes(key, parts))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scheme_names_round_trip() {
        for scheme in Scheme::ALL {
            assert_eq!(scheme.to_string().parse::<Scheme>().unwrap(), scheme);
        }
        assert_eq!(
            "standard-webhooks".parse::<Scheme>().unwrap(),
            Scheme::StandardWebhooks
        );
        assert_eq!("github".parse::<Scheme>().unwrap(), Scheme::Github);
        assert_eq!("stripe".parse::<Scheme>().unwrap(), Scheme::Stripe);
        assert_eq!("hmac-sha256".parse::<Scheme>().unwrap(), Scheme::HmacSha256);
        assert_eq!(" GitHub ".parse::<Scheme>().unwrap(), Scheme::Github);
        assert!("svix".parse::<Scheme>().is_err());
        assert!("".parse::<Scheme>().is_err());
    }

    #[test]
    fn event_id_headers_per_scheme() {
        assert_eq!(
            Scheme::StandardWebhooks.event_id_header(),
            Some("webhook-id")
        );
        assert_eq!(Scheme::Github.event_id_header(), Some("x-github-delivery"));
        assert_eq!(Scheme::Stripe.event_id_header(), None);
        assert_eq!(Scheme::HmacSha256.event_id_header(), None);

        let mut cfg = SchemeConfig::new(Scheme::HmacSha256, vec!["k".into()]);
        assert_eq!(cfg.event_id_header(), None);
        cfg.event_id_header = Some("X-Event-Id".into());
        assert_eq!(cfg.event_id_header(), Some("X-Event-Id"));
        // The override is only meaningful for hmac-sha256.
        cfg.scheme = Scheme::Stripe;
        assert_eq!(cfg.event_id_header(), None);
    }

    #[test]
    fn signature_header_defaults() {
        let mut cfg = SchemeConfig::new(Scheme::HmacSha256, vec!["k".into()]);
        assert_eq!(cfg.signature_header(), "x-signature");
        cfg.signature_header = Some("X-Leadpipe-Signature".into());
        assert_eq!(cfg.signature_header(), "X-Leadpipe-Signature");
        cfg.signature_header = Some("  ".into());
        assert_eq!(cfg.signature_header(), "x-signature");
    }

    #[test]
    fn header_lookup_is_case_insensitive_for_all_impls() {
        let owned: Vec<(String, String)> = vec![("Webhook-Id".into(), "a".into())];
        let borrowed = [("WEBHOOK-ID", "b")];
        let slice: &[(String, String)] = &owned;
        let map: HashMap<String, String> = [("webhook-ID".to_owned(), "c".to_owned())].into();
        let func = HeaderFn(|n: &str| (n == "webhook-id").then(|| "d".to_owned()));

        assert_eq!(owned.header("webhook-id").as_deref(), Some("a"));
        assert_eq!(borrowed.header("webhook-id").as_deref(), Some("b"));
        assert_eq!(slice.header("webhook-id").as_deref(), Some("a"));
        assert_eq!(map.header("webhook-id").as_deref(), Some("c"));
        assert_eq!(func.header("webhook-id").as_deref(), Some("d"));
        assert_eq!(owned.header("other"), None);
    }

    #[test]
    fn tolerance_is_symmetric_and_inclusive() {
        assert!(check_tolerance(1000, 1300, 300).is_ok());
        assert!(check_tolerance(1600, 1300, 300).is_ok());
        assert!(check_tolerance(999, 1300, 300).is_err());
        assert!(check_tolerance(1601, 1300, 300).is_err());
        // Extreme values must not overflow.
        assert!(check_tolerance(i64::MIN, i64::MAX, 300).is_err());
        // A negative tolerance behaves as zero rather than disabling the check.
        assert!(check_tolerance(1300, 1300, -5).is_ok());
        assert!(check_tolerance(1301, 1300, -5).is_err());
    }

    #[test]
    fn timestamp_parsing_is_strict() {
        assert_eq!(parse_unix_timestamp("h", "1614265330").unwrap(), 1614265330);
        for bad in ["", "-1", "+1", "1.5", "12a", "99999999999999999999"] {
            assert!(matches!(
                parse_unix_timestamp("h", bad),
                Err(SignatureError::MalformedHeader { .. })
            ));
        }
    }

    #[test]
    fn config_debug_redacts_secrets() {
        let cfg = SchemeConfig::new(
            Scheme::Stripe,
            vec!["whsec_super_secret_value".into(), "another-secret".into()],
        );
        let dbg = format!("{cfg:?}");
        assert!(!dbg.contains("super_secret"), "{dbg}");
        assert!(!dbg.contains("another-secret"), "{dbg}");
        assert!(dbg.contains("2 redacted"), "{dbg}");
    }

    #[test]
    fn validate_flags_any_unusable_secret() {
        let ok = SchemeConfig::new(Scheme::Github, vec!["sixteen-byte-key".into()]);
        assert!(ok.validate().is_ok());
        let empty = SchemeConfig::new(Scheme::Github, vec![]);
        assert_eq!(empty.validate(), Err(SignatureError::NoUsableSecret));
        let short = SchemeConfig::new(Scheme::Github, vec!["a".into()]);
        assert_eq!(short.validate(), Err(SignatureError::NoUsableSecret));
        let public =
            SchemeConfig::new(Scheme::Stripe, vec!["whpk_AAAAAAAAAAAAAAAAAAAAAAAA".into()]);
        assert_eq!(public.validate(), Err(SignatureError::NoUsableSecret));
        let blank = SchemeConfig::new(
            Scheme::Github,
            vec!["sixteen-byte-key".into(), String::new()],
        );
        assert_eq!(blank.validate(), Err(SignatureError::NoUsableSecret));
        let bad_b64 = SchemeConfig::new(Scheme::StandardWebhooks, vec!["whsec_!!notbase64".into()]);
        assert_eq!(bad_b64.validate(), Err(SignatureError::NoUsableSecret));
    }

    #[test]
    fn reasons_are_distinct() {
        let errors = [
            SignatureError::MissingHeader("h".into()),
            SignatureError::malformed("h", "r"),
            SignatureError::TimestampOutsideTolerance {
                timestamp: 0,
                now: 0,
                tolerance_secs: 0,
            },
            SignatureError::NoMatchingSignature,
            SignatureError::NoUsableSecret,
            SignatureError::NoRequestTarget,
        ];
        let mut reasons: Vec<_> = errors.iter().map(SignatureError::reason).collect();
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(reasons.len(), errors.len());
    }
}
