//! Standard Webhooks (<https://www.standardwebhooks.com>): `v1` HMAC-SHA256 and `v1a` ed25519
//! over `{webhook-id}.{webhook-timestamp}.{body}`. Svix sends the same three
//! headers as `svix-id`, `svix-timestamp` and `svix-signature`; both names
//! are read ([`SvixNames`]).

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, VerifyingKey};
use hmac::Mac;

use super::{
    BASE64_STANDARD_ANY_PAD, HeaderLookup, MAC_LEN, MAX_SIGNATURES, SchemeConfig, SignatureError,
    Verified, VerifyRequest, check_tolerance, mac_matches_any, mac_sha256, parse_unix_timestamp,
    required_header,
};

pub const ID_HEADER: &str = "webhook-id";
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
pub const SIGNATURE_HEADER: &str = "webhook-signature";

/// Svix's names for the same headers, with the same meaning.
pub const SVIX_ID_HEADER: &str = "svix-id";
pub const SVIX_TIMESTAMP_HEADER: &str = "svix-timestamp";
pub const SVIX_SIGNATURE_HEADER: &str = "svix-signature";

/// Each Standard Webhooks header with its Svix name.
const SVIX_NAMES: [(&str, &str); 3] = [
    (ID_HEADER, SVIX_ID_HEADER),
    (TIMESTAMP_HEADER, SVIX_TIMESTAMP_HEADER),
    (SIGNATURE_HEADER, SVIX_SIGNATURE_HEADER),
];

/// A request's headers, where `webhook-*` names read Svix's `svix-*` ones
/// when the request uses Svix's names. A request uses one set whole, never
/// a mix: `webhook-*` if it carries any of the three, else `svix-*`. So a
/// request carrying both sets is verified, identified and deduplicated by
/// its `webhook-*` headers alone, as a Standard Webhooks receiver would.
pub struct SvixNames<'a> {
    headers: &'a dyn HeaderLookup,
    svix: bool,
}

impl<'a> SvixNames<'a> {
    pub fn new(headers: &'a dyn HeaderLookup) -> Self {
        let svix = SVIX_NAMES
            .iter()
            .all(|(standard, _)| headers.header(standard).is_none());
        Self { headers, svix }
    }

    /// Whether the request uses Svix's names.
    pub fn uses_svix_names(&self) -> bool {
        self.svix
    }
}

impl HeaderLookup for SvixNames<'_> {
    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        let name = match SVIX_NAMES
            .iter()
            .find(|(standard, _)| self.svix && standard.eq_ignore_ascii_case(name))
        {
            Some((_, svix)) => svix,
            None => name,
        };
        self.headers.header(name)
    }
}

const SECRET_PREFIX: &str = crate::crypto::STANDARD_SECRET_PREFIX;
pub(super) const PUBLIC_KEY_PREFIX: &str = "whpk_";
pub(super) const SIGNING_KEY_PREFIX: &str = "whsk_";

/// Shortest decoded `whsec_` key accepted when saving a source.
const MIN_SECRET_BYTES: usize = super::MIN_HMAC_SECRET_BYTES;

// Kept separate so a public key can never be used as an HMAC key: it is not secret, and
// accepting it for `v1` would let anyone forge signatures.
enum Key {
    Hmac(Vec<u8>),
    Ed25519(VerifyingKey),
}

#[derive(Default)]
struct Candidates {
    v1: Vec<Vec<u8>>,
    v1a: Vec<Signature>,
}

fn decode_key(secret: &str) -> Option<Key> {
    if let Some(b64) = secret.strip_prefix(PUBLIC_KEY_PREFIX) {
        let bytes: [u8; 32] = BASE64_STANDARD_ANY_PAD.decode(b64).ok()?.try_into().ok()?;
        return VerifyingKey::from_bytes(&bytes).ok().map(Key::Ed25519);
    }
    if secret.starts_with(SIGNING_KEY_PREFIX) {
        // A private signing key must not be configured for verification.
        return None;
    }
    let b64 = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    let bytes = BASE64_STANDARD_ANY_PAD.decode(b64).ok()?;
    (!bytes.is_empty()).then_some(Key::Hmac(bytes))
}

/// The rule `secret` breaks for this scheme, if any (see [`super::secret_problem`]).
pub(super) fn secret_problem(secret: &str) -> Option<&'static str> {
    if secret.starts_with(SIGNING_KEY_PREFIX) {
        return Some("whsk_ is a private signing key: configure its whpk_ public key instead");
    }
    if secret.starts_with(PUBLIC_KEY_PREFIX) {
        return decode_key(secret)
            .is_none()
            .then_some("whpk_ must be followed by the base64 of a 32-byte ed25519 public key");
    }
    match decode_key(secret) {
        Some(Key::Hmac(bytes)) if bytes.len() < MIN_SECRET_BYTES => {
            Some("whsec_ keys must decode to at least 16 bytes (the spec asks for 24 to 64)")
        }
        Some(_) => None,
        None => Some("whsec_ must be followed by non-empty base64"),
    }
}

fn parse_signatures(value: &str) -> Result<Candidates, SignatureError> {
    let mut found = Candidates::default();
    // Unknown versions and undecodable entries are skipped, as the reference libraries do.
    for entry in value.split_ascii_whitespace().take(MAX_SIGNATURES) {
        let Some((version, sig)) = entry.split_once(',') else {
            continue;
        };
        let Ok(bytes) = BASE64_STANDARD_ANY_PAD.decode(sig) else {
            continue;
        };
        match version {
            "v1" if bytes.len() == MAC_LEN => found.v1.push(bytes),
            "v1a" => {
                if let Ok(sig) = Signature::from_slice(&bytes) {
                    found.v1a.push(sig);
                }
            }
            _ => {}
        }
    }
    if found.v1.is_empty() && found.v1a.is_empty() {
        return Err(SignatureError::malformed(
            SIGNATURE_HEADER,
            "no valid v1 or v1a entry",
        ));
    }
    Ok(found)
}

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let keys: Vec<(usize, Key)> = cfg
        .secrets
        .iter()
        .enumerate()
        .filter_map(|(i, s)| decode_key(s).map(|k| (i, k)))
        .collect();
    if keys.is_empty() {
        return Err(SignatureError::NoUsableSecret);
    }

    let headers = SvixNames::new(req.headers);
    let msg_id = required_header(&headers, ID_HEADER)?;
    let timestamp_raw = required_header(&headers, TIMESTAMP_HEADER)?;
    let signature_raw = required_header(&headers, SIGNATURE_HEADER)?;

    let timestamp = parse_unix_timestamp(TIMESTAMP_HEADER, &timestamp_raw)?;
    let candidates = parse_signatures(&signature_raw)?;
    check_tolerance(timestamp, req.now_unix, cfg.tolerance_secs)?;

    let timestamp_str = timestamp.to_string();
    let parts = [
        msg_id.as_bytes(),
        b".",
        timestamp_str.as_bytes(),
        b".",
        req.body,
    ];
    // ed25519 needs the message contiguous; only build it if it could be used.
    let mut contiguous: Option<Vec<u8>> = None;

    for (index, key) in &keys {
        let matched = match key {
            Key::Hmac(key) => {
                !candidates.v1.is_empty()
                    && mac_matches_any(&mac_sha256(key, &parts)?, &candidates.v1)
            }
            Key::Ed25519(public) => {
                !candidates.v1a.is_empty() && {
                    let content = contiguous.get_or_insert_with(|| parts.concat());
                    candidates
                        .v1a
                        .iter()
                        .any(|sig| public.verify_strict(content, sig).is_ok())
                }
            }
        };
        if matched {
            return Ok(Verified {
                scheme: cfg.scheme,
                event_id: Some(msg_id.into_owned()),
                timestamp: Some(timestamp),
                secret_index: *index,
            });
        }
    }
    Err(SignatureError::NoMatchingSignature)
}

/// `webhook-signature` value (`v1,<base64>`) for an outgoing webhook. `secret` is `whsec_…`
/// or bare base64; a `whpk_`/`whsk_` key or undecodable secret gives `NoUsableSecret`.
pub fn sign(
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SignatureError> {
    let Some(Key::Hmac(key)) = decode_key(secret) else {
        return Err(SignatureError::NoUsableSecret);
    };
    let timestamp = timestamp.to_string();
    let mac = mac_sha256(
        &key,
        &[msg_id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
    )?;
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// `webhook-signature` value with one `v1,<base64>` entry per secret,
/// space-separated as the spec allows: during a secret rotation a receiver
/// holding either secret verifies the delivery.
pub fn sign_all<S: AsRef<str>>(
    secrets: &[S],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SignatureError> {
    let signatures = secrets
        .iter()
        .map(|secret| sign(secret.as_ref(), msg_id, timestamp, body))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(signatures.join(" "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{HeaderLookup, Scheme, verify as verify_any};
    use super::*;
    use crate::crypto::{GENERATED_SECRET_BYTES, generate_standard_secret};
    use ed25519_dalek::{Signer, SigningKey};
    use hmac::{Hmac, KeyInit};
    use sha2::Sha256;

    // Published Standard Webhooks test vector (spec / reference libraries); also reproduced with
    // printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' \
    //   | openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf '%s' 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' | base64 -d | xxd -p -c 256) -binary | base64
    const SPEC_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SPEC_MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SPEC_TS: i64 = 1614265330;
    const SPEC_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SPEC_SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    // Rotation vector: key = the ASCII bytes 'leadpipe-rotated-key-0001'.
    // printf '%s' 'leadpipe-rotated-key-0001' | base64
    const ROTATED_SECRET: &str = "whsec_bGVhZHBpcGUtcm90YXRlZC1rZXktMDAwMQ==";
    // printf '%s' 'msg_rot_1.1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'leadpipe-rotated-key-0001' -binary | base64
    const ROTATED_SIG: &str = "v1,4tDGklVjaudSqFy4Qc4YMw1aYf1qGxStkyMtgl3fyUg=";

    // ed25519 with seed [7; 32]: openssl pkey over DER 302e020100300506032b657004220420||07*32,
    // `openssl pkey -pubout -outform DER | tail -c 32 | base64` and
    // `openssl pkeyutl -sign -rawin -in <(printf '%s' 'msg_ed_1.1700000000.{"lead_id":7}') | base64`.
    const ED_PUBLIC: &str = "whpk_6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw=";
    const ED_OPENSSL_SIG: &str = "v1a,4QW1ZrlOs/gNikr9vOXLSpuXeMFTaHZXdoeq1IuVL8J4CIhs/uSp0CgQvuijTrDvZa789BT+lJHBkjLOS7G9Cg==";

    fn cfg(secrets: &[&str]) -> SchemeConfig {
        SchemeConfig::new(
            Scheme::StandardWebhooks,
            secrets.iter().map(|s| (*s).to_owned()).collect(),
        )
    }

    fn headers(id: &str, ts: &str, sig: &str) -> Vec<(String, String)> {
        vec![
            ("Webhook-Id".into(), id.into()),
            ("Webhook-Timestamp".into(), ts.into()),
            ("Webhook-Signature".into(), sig.into()),
        ]
    }

    fn run(
        cfg: &SchemeConfig,
        headers: &dyn HeaderLookup,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, SignatureError> {
        verify_any(
            cfg,
            &VerifyRequest {
                headers,
                body,
                now_unix: now,
                target: None,
            },
        )
    }

    #[test]
    fn spec_vector_verifies() {
        let h = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), SPEC_SIG);
        let v = run(&cfg(&[SPEC_SECRET]), &h, SPEC_BODY, SPEC_TS).unwrap();
        assert_eq!(
            v,
            Verified {
                scheme: Scheme::StandardWebhooks,
                event_id: Some(SPEC_MSG_ID.into()),
                timestamp: Some(SPEC_TS),
                secret_index: 0,
            }
        );
    }

    /// Svix's own names for the three headers, signed as Svix signs: the
    /// same spec vector.
    #[test]
    fn svix_header_names_verify_the_same() {
        let h = [
            ("svix-id", SPEC_MSG_ID.to_owned()),
            ("svix-timestamp", SPEC_TS.to_string()),
            ("svix-signature", SPEC_SIG.to_owned()),
        ];
        let v = run(&cfg(&[SPEC_SECRET]), &h, SPEC_BODY, SPEC_TS).unwrap();
        assert_eq!(v.event_id.as_deref(), Some(SPEC_MSG_ID));
        let mut tampered = h.clone();
        tampered[0].1 = "msg_other".into();
        assert_eq!(
            run(&cfg(&[SPEC_SECRET]), &tampered, SPEC_BODY, SPEC_TS),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    /// With both sets, the `webhook-*` set alone counts: a wrong
    /// `webhook-signature` is not rescued by a right `svix-signature`, and
    /// the sets never mix.
    #[test]
    fn with_both_sets_the_webhook_set_counts() {
        let ts = SPEC_TS.to_string();
        let both = |webhook_sig: &str| {
            vec![
                ("webhook-id", SPEC_MSG_ID.to_owned()),
                ("webhook-timestamp", ts.clone()),
                ("webhook-signature", webhook_sig.to_owned()),
                ("svix-id", "msg_svix".to_owned()),
                ("svix-timestamp", ts.clone()),
                ("svix-signature", SPEC_SIG.to_owned()),
            ]
        };
        let v = run(&cfg(&[SPEC_SECRET]), &both(SPEC_SIG), SPEC_BODY, SPEC_TS).unwrap();
        assert_eq!(v.event_id.as_deref(), Some(SPEC_MSG_ID));
        let wrong = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        assert_eq!(
            run(&cfg(&[SPEC_SECRET]), &both(wrong), SPEC_BODY, SPEC_TS),
            Err(SignatureError::NoMatchingSignature)
        );
        // One webhook-* header is enough to choose its set: the others are
        // then missing, not read from svix-*.
        let mixed = [
            ("webhook-id", SPEC_MSG_ID.to_owned()),
            ("svix-timestamp", ts.clone()),
            ("svix-signature", SPEC_SIG.to_owned()),
        ];
        assert_eq!(
            run(&cfg(&[SPEC_SECRET]), &mixed, SPEC_BODY, SPEC_TS),
            Err(SignatureError::MissingHeader(TIMESTAMP_HEADER.into()))
        );
    }

    #[test]
    fn spec_vector_verifies_with_unprefixed_secret() {
        let h = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), SPEC_SIG);
        let bare = SPEC_SECRET.strip_prefix("whsec_").unwrap();
        assert!(run(&cfg(&[bare]), &h, SPEC_BODY, SPEC_TS).is_ok());
    }

    #[test]
    fn sign_reproduces_spec_vector() {
        assert_eq!(
            sign(SPEC_SECRET, SPEC_MSG_ID, SPEC_TS, SPEC_BODY).unwrap(),
            SPEC_SIG
        );
    }

    #[test]
    fn any_entry_may_match() {
        let header =
            format!("v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= v2,xyz junk {SPEC_SIG}");
        let h = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), &header);
        assert!(run(&cfg(&[SPEC_SECRET]), &h, SPEC_BODY, SPEC_TS).is_ok());
    }

    #[test]
    fn entries_beyond_the_bound_are_ignored() {
        let filler = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= ".repeat(MAX_SIGNATURES);
        let h = headers(
            SPEC_MSG_ID,
            &SPEC_TS.to_string(),
            &format!("{filler}{SPEC_SIG}"),
        );
        assert_eq!(
            run(&cfg(&[SPEC_SECRET]), &h, SPEC_BODY, SPEC_TS),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn rotation_second_secret_matches() {
        let h = headers("msg_rot_1", "1700000000", ROTATED_SIG);
        let v = run(
            &cfg(&[SPEC_SECRET, ROTATED_SECRET]),
            &h,
            br#"{"a":1}"#,
            1_700_000_000,
        )
        .unwrap();
        assert_eq!(v.secret_index, 1);
    }

    #[test]
    fn unusable_secret_is_skipped_when_another_works() {
        let h = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), SPEC_SIG);
        let v = run(
            &cfg(&["whsec_not*base64", SPEC_SECRET]),
            &h,
            SPEC_BODY,
            SPEC_TS,
        )
        .unwrap();
        assert_eq!(v.secret_index, 1);
    }

    #[test]
    fn wrong_secret_rejected() {
        let h = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), SPEC_SIG);
        assert_eq!(
            run(&cfg(&[ROTATED_SECRET]), &h, SPEC_BODY, SPEC_TS),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn tampered_body_rejected() {
        let mut body = SPEC_BODY.to_vec();
        body[10] ^= 1;
        let h = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), SPEC_SIG);
        assert_eq!(
            run(&cfg(&[SPEC_SECRET]), &h, &body, SPEC_TS),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn tampered_id_or_timestamp_rejected() {
        let h = headers("msg_other", &SPEC_TS.to_string(), SPEC_SIG);
        assert_eq!(
            run(&cfg(&[SPEC_SECRET]), &h, SPEC_BODY, SPEC_TS),
            Err(SignatureError::NoMatchingSignature)
        );
        let h = headers(SPEC_MSG_ID, &(SPEC_TS + 1).to_string(), SPEC_SIG);
        assert_eq!(
            run(&cfg(&[SPEC_SECRET]), &h, SPEC_BODY, SPEC_TS),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn missing_headers_rejected() {
        let full = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), SPEC_SIG);
        for name in [ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER] {
            let partial: Vec<_> = full
                .iter()
                .filter(|(k, _)| !k.eq_ignore_ascii_case(name))
                .cloned()
                .collect();
            assert_eq!(
                run(&cfg(&[SPEC_SECRET]), &partial, SPEC_BODY, SPEC_TS),
                Err(SignatureError::MissingHeader(name.into()))
            );
        }
    }

    #[test]
    fn malformed_headers_rejected() {
        let ts = SPEC_TS.to_string();
        for (t, sig) in [
            ("yesterday", SPEC_SIG),
            ("-1614265330", SPEC_SIG),
            (ts.as_str(), "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
            (ts.as_str(), "v1,not-base64!"),
            (ts.as_str(), "v1,AAAA"),
            (
                ts.as_str(),
                "v9,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
        ] {
            let h = headers(SPEC_MSG_ID, t, sig);
            assert!(
                matches!(
                    run(&cfg(&[SPEC_SECRET]), &h, SPEC_BODY, SPEC_TS),
                    Err(SignatureError::MalformedHeader { .. })
                ),
                "{t} {sig}"
            );
        }
    }

    #[test]
    fn timestamp_outside_tolerance_both_directions() {
        let h = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), SPEC_SIG);
        let c = cfg(&[SPEC_SECRET]);
        assert_eq!(c.tolerance_secs, 300);
        // Signed 10 minutes ago, and 10 minutes in the future.
        for now in [SPEC_TS + 600, SPEC_TS - 600] {
            assert_eq!(
                run(&c, &h, SPEC_BODY, now),
                Err(SignatureError::TimestampOutsideTolerance {
                    timestamp: SPEC_TS,
                    now,
                    tolerance_secs: 300
                })
            );
        }
        assert!(run(&c, &h, SPEC_BODY, SPEC_TS + 300).is_ok());
        assert!(run(&c, &h, SPEC_BODY, SPEC_TS - 300).is_ok());
    }

    #[test]
    fn no_usable_secret() {
        let h = headers(SPEC_MSG_ID, &SPEC_TS.to_string(), SPEC_SIG);
        for secrets in [
            &[][..],
            &["whsec_%%%"][..],
            &["whsec_"][..],
            &["whpk_AAAA"][..],
            &["whsk_c2VjcmV0"][..],
        ] {
            assert_eq!(
                run(&cfg(secrets), &h, SPEC_BODY, SPEC_TS),
                Err(SignatureError::NoUsableSecret)
            );
        }
        assert_eq!(
            sign("whpk_AAAA", "m", 1, b""),
            Err(SignatureError::NoUsableSecret)
        );
    }

    #[test]
    fn v1a_ed25519_signed_with_dalek_verifies() {
        let signing = SigningKey::from_bytes(&[42u8; 32]);
        let public = format!(
            "whpk_{}",
            STANDARD.encode(signing.verifying_key().to_bytes())
        );
        let body = br#"{"lead_id":9001}"#;
        let msg = [b"msg_ed_2.1700000000.".as_slice(), body].concat();
        let sig = format!("v1a,{}", STANDARD.encode(signing.sign(&msg).to_bytes()));

        let h = headers("msg_ed_2", "1700000000", &sig);
        let v = run(&cfg(&[SPEC_SECRET, &public]), &h, body, 1_700_000_000).unwrap();
        assert_eq!(v.secret_index, 1);
        assert_eq!(v.event_id.as_deref(), Some("msg_ed_2"));

        let mut tampered = body.to_vec();
        tampered[3] ^= 1;
        assert_eq!(
            run(&cfg(&[&public]), &h, &tampered, 1_700_000_000),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn v1a_openssl_vector_verifies() {
        let h = headers("msg_ed_1", "1700000000", ED_OPENSSL_SIG);
        let body = br#"{"lead_id":7}"#;
        assert!(run(&cfg(&[ED_PUBLIC]), &h, body, 1_700_000_000).is_ok());
        // A whsec secret never verifies v1a entries.
        assert_eq!(
            run(&cfg(&[SPEC_SECRET]), &h, body, 1_700_000_000),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn whpk_never_verifies_v1_even_keyed_with_public_bytes() {
        // An attacker knows the public key; an HMAC keyed with it must not be accepted.
        let pk = BASE64_STANDARD_ANY_PAD
            .decode(ED_PUBLIC.strip_prefix("whpk_").unwrap())
            .unwrap();
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&pk).unwrap();
        mac.update(br#"msg_x.1700000000.{}"#);
        let forged = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
        let h = headers("msg_x", "1700000000", &forged);
        assert_eq!(
            run(&cfg(&[ED_PUBLIC]), &h, b"{}", 1_700_000_000),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn generated_secret_round_trips() {
        let secret = generate_standard_secret();
        assert!(secret.starts_with("whsec_"));
        let key = STANDARD
            .decode(secret.strip_prefix("whsec_").unwrap())
            .unwrap();
        assert_eq!(key.len(), GENERATED_SECRET_BYTES);
        assert_ne!(secret, generate_standard_secret());

        let sig = sign(&secret, "msg_gen", 1_700_000_000, b"hi").unwrap();
        let h = headers("msg_gen", "1700000000", &sig);
        assert!(run(&cfg(&[&secret]), &h, b"hi", 1_700_000_000).is_ok());
    }

    #[test]
    fn errors_do_not_leak_secret_or_signature() {
        let sig_b64 = SPEC_SIG.strip_prefix("v1,").unwrap();
        let secret_b64 = SPEC_SECRET.strip_prefix("whsec_").unwrap();
        let ts = SPEC_TS.to_string();
        let cases = [
            (
                headers(SPEC_MSG_ID, &ts, SPEC_SIG),
                b"tampered".as_slice(),
                SPEC_TS,
            ),
            (headers(SPEC_MSG_ID, &ts, sig_b64), SPEC_BODY, SPEC_TS),
            (
                headers(SPEC_MSG_ID, &ts, SPEC_SIG),
                SPEC_BODY,
                SPEC_TS + 3600,
            ),
            (headers(SPEC_MSG_ID, "bad", SPEC_SIG), SPEC_BODY, SPEC_TS),
        ];
        for (h, body, now) in cases {
            let err = run(&cfg(&[SPEC_SECRET]), &h, body, now).unwrap_err();
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(!text.contains(secret_b64), "{text}");
                assert!(!text.contains(sig_b64), "{text}");
            }
        }
    }
}
