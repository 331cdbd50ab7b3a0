//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]` over `{t}.{body}`, keyed with the
//! endpoint secret's UTF-8 bytes (the `whsec_…` string as-is, not base64-decoded). Calendly
//! signs the same way under another header ([`verify_t_v1`]).

use super::{
    MAC_LEN, MAX_SIGNATURES, SchemeConfig, SignatureError, Verified, VerifyRequest,
    check_tolerance, first_matching_secret, hmac_sha256_hex, parse_unix_timestamp, required_header,
    utf8_keys,
};

pub const SIGNATURE_HEADER: &str = "stripe-signature";

struct ParsedHeader {
    timestamp: i64,
    signatures: Vec<Vec<u8>>,
}

fn parse_header(name: &str, value: &str) -> Result<ParsedHeader, SignatureError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    // Other schemes (v0, future ones) are ignored, as Stripe's libraries do.
    for item in value.split(',') {
        let Some((key, val)) = item.split_once('=') else {
            continue;
        };
        match key.trim() {
            "t" if timestamp.is_none() => {
                timestamp = Some(parse_unix_timestamp(name, val.trim())?);
            }
            "v1" if signatures.len() < MAX_SIGNATURES => {
                if let Ok(sig) = hex::decode(val.trim())
                    && sig.len() == MAC_LEN
                {
                    signatures.push(sig);
                }
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or_else(|| SignatureError::malformed(name, "missing t="))?;
    if signatures.is_empty() {
        return Err(SignatureError::malformed(name, "no valid v1 signature"));
    }
    Ok(ParsedHeader {
        timestamp,
        signatures,
    })
}

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    verify_t_v1(SIGNATURE_HEADER, cfg, req)
}

/// Verifies `t=<unix>,v1=<hex>[,v1=…]` in header `name` over `{t}.{body}`.
pub(super) fn verify_t_v1(
    name: &str,
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let keys = utf8_keys(&cfg.secrets)?;
    let header = required_header(req.headers, name)?;
    let parsed = parse_header(name, &header)?;
    check_tolerance(parsed.timestamp, req.now_unix, cfg.tolerance_secs)?;

    let t = parsed.timestamp.to_string();
    let secret_index =
        first_matching_secret(&keys, &[t.as_bytes(), b".", req.body], &parsed.signatures)?;
    Ok(Verified {
        scheme: cfg.scheme,
        event_id: None,
        timestamp: Some(parsed.timestamp),
        secret_index,
    })
}

/// Full `Stripe-Signature` header value, `t=<t>,v1=<hex>`.
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    let t = t.to_string();
    let tag = hmac_sha256_hex(secret.as_bytes(), &[t.as_bytes(), b".", body]);
    format!("t={t},v1={tag}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{HeaderLookup, Scheme, verify as verify_any};
    use super::*;

    const SECRET: &str = "whsec_test_abc123";
    const ROTATED: &str = "whsec_rotated_xyz789";
    const T: i64 = 1_700_000_000;
    const BODY: &[u8] = br#"{"id":"evt_1NlY3q","object":"event"}"#;
    // printf '%s' '1700000000.{"id":"evt_1NlY3q","object":"event"}' | openssl dgst -sha256 -hmac 'whsec_test_abc123'
    const SIG: &str = "1c2817ecef1b5288c0f960c28802e41e0c7412f8c7358e47a38526587b697930";
    // printf '%s' '1700000000.{"id":"evt_1NlY3q","object":"event"}' | openssl dgst -sha256 -hmac 'whsec_rotated_xyz789'
    const ROTATED_SIG: &str = "9be3c3ba3e9b67dcdd9d87fa792d99a0bea6a185ae9565b73ac61aaf46d8736f";

    fn cfg(secrets: &[&str]) -> SchemeConfig {
        SchemeConfig::new(
            Scheme::Stripe,
            secrets.iter().map(|s| (*s).to_owned()).collect(),
        )
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

    fn header(value: &str) -> [(&'static str, String); 1] {
        [("Stripe-Signature", value.to_owned())]
    }

    #[test]
    fn openssl_vector_verifies() {
        let h = header(&format!("t={T},v1={SIG}"));
        let v = run(&cfg(&[SECRET]), &h, BODY, T).unwrap();
        assert_eq!(
            v,
            Verified {
                scheme: Scheme::Stripe,
                event_id: None,
                timestamp: Some(T),
                secret_index: 0,
            }
        );
    }

    #[test]
    fn sign_matches_openssl() {
        assert_eq!(sign(SECRET, T, BODY), format!("t={T},v1={SIG}"));
    }

    #[test]
    fn extra_entries_and_v0_are_ignored() {
        let h = header(&format!(
            "t={T}, v1={}, v0={SIG}, v1={SIG}",
            "00".repeat(32)
        ));
        assert!(run(&cfg(&[SECRET]), &h, BODY, T).is_ok());
        let v0_only = header(&format!("t={T},v0={SIG}"));
        assert!(matches!(
            run(&cfg(&[SECRET]), &v0_only, BODY, T),
            Err(SignatureError::MalformedHeader { .. })
        ));
    }

    #[test]
    fn rotation_second_secret_matches() {
        let h = header(&format!("t={T},v1={ROTATED_SIG}"));
        let v = run(&cfg(&[SECRET, ROTATED]), &h, BODY, T).unwrap();
        assert_eq!(v.secret_index, 1);
    }

    #[test]
    fn wrong_secret_and_tampered_body_rejected() {
        let h = header(&format!("t={T},v1={SIG}"));
        assert_eq!(
            run(&cfg(&[ROTATED]), &h, BODY, T),
            Err(SignatureError::NoMatchingSignature)
        );
        let mut body = BODY.to_vec();
        body[8] ^= 1;
        assert_eq!(
            run(&cfg(&[SECRET]), &h, &body, T),
            Err(SignatureError::NoMatchingSignature)
        );
        // Signature is bound to t.
        let h = header(&format!("t={},v1={SIG}", T + 1));
        assert_eq!(
            run(&cfg(&[SECRET]), &h, BODY, T),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn secret_is_not_base64_decoded() {
        // Decoding the part after whsec_ would give a different key and must not match.
        let h = header(&format!("t={T},v1={SIG}"));
        assert_eq!(
            run(&cfg(&["test_abc123"]), &h, BODY, T),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn missing_and_malformed_headers() {
        let none: [(&str, &str); 0] = [];
        assert_eq!(
            run(&cfg(&[SECRET]), &none, BODY, T),
            Err(SignatureError::MissingHeader("stripe-signature".into()))
        );
        for bad in [
            format!("v1={SIG}"),
            format!("t=abc,v1={SIG}"),
            format!("t={T}"),
            format!("t={T},v1=zz{}", &SIG[2..]),
            format!("t={T},v1={}", &SIG[..62]),
            "garbage".to_owned(),
        ] {
            assert!(
                matches!(
                    run(&cfg(&[SECRET]), &header(&bad), BODY, T),
                    Err(SignatureError::MalformedHeader { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn timestamp_outside_tolerance_both_directions() {
        let h = header(&format!("t={T},v1={SIG}"));
        for now in [T + 600, T - 600] {
            assert!(matches!(
                run(&cfg(&[SECRET]), &h, BODY, now),
                Err(SignatureError::TimestampOutsideTolerance { .. })
            ));
        }
    }

    #[test]
    fn empty_secret_is_unusable() {
        let h = header(&format!("t={T},v1={SIG}"));
        assert_eq!(
            run(&cfg(&[""]), &h, BODY, T),
            Err(SignatureError::NoUsableSecret)
        );
    }

    #[test]
    fn errors_do_not_leak_secret_or_signature() {
        for (value, body, now) in [
            (format!("t={T},v1={SIG}"), b"x".as_slice(), T),
            (format!("t={T},v1={SIG}"), BODY, T + 999),
            (format!("v1={SIG}"), BODY, T),
        ] {
            let err = run(&cfg(&[SECRET]), &header(&value), body, now).unwrap_err();
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(!text.contains(SECRET), "{text}");
                assert!(!text.contains(SIG), "{text}");
            }
        }
    }
}
