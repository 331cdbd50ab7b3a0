//! GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body keyed with the
//! secret's UTF-8 bytes. No timestamp, so replay protection must come from delivery dedupe.

use super::{
    MAC_LEN, SchemeConfig, SignatureError, Verified, VerifyRequest, first_matching_secret,
    hmac_sha256_hex, optional_header, required_header, utf8_keys,
};

pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// Delivery GUID; not covered by the signature.
pub const DELIVERY_HEADER: &str = "x-github-delivery";

const PREFIX: &str = "sha256=";

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let keys = utf8_keys(&cfg.secrets)?;
    let header = required_header(req.headers, SIGNATURE_HEADER)?;
    let hex_sig = header
        .strip_prefix(PREFIX)
        .ok_or_else(|| SignatureError::malformed(SIGNATURE_HEADER, "expected sha256= prefix"))?;
    let sig = hex::decode(hex_sig)
        .ok()
        .filter(|s| s.len() == MAC_LEN)
        .ok_or_else(|| SignatureError::malformed(SIGNATURE_HEADER, "expected 64 hex digits"))?;

    let secret_index = first_matching_secret(&keys, &[req.body], &[sig])?;
    Ok(Verified {
        scheme: cfg.scheme,
        event_id: optional_header(req.headers, DELIVERY_HEADER).map(|v| v.into_owned()),
        timestamp: None,
        secret_index,
    })
}

/// `X-Hub-Signature-256` value, `sha256=<hex>`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    format!("{PREFIX}{}", hmac_sha256_hex(secret.as_bytes(), &[body]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{HeaderLookup, Scheme, verify as verify_any};
    use super::*;

    // GitHub docs example ("Validating webhook deliveries"); reproduced with
    // printf '%s' 'Hello, World!' | openssl dgst -sha256 -hmac "It's a Secret to Everybody"
    const SECRET: &str = "It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    const SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    // printf '%s' 'Hello, World!' | openssl dgst -sha256 -hmac 'rotated-github-secret'
    const ROTATED: &str = "rotated-github-secret";
    const ROTATED_SIG: &str =
        "sha256=2376b98b1e3deb43c46cfd6a02113185c60b6dc55add2d5ae76b7cd6f84dc477";
    const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

    #[test]
    fn a_public_key_is_never_an_hmac_key() {
        // Even stored before saving refused it: signing with it proves nothing.
        let public = "whpk_6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw=";
        let headers = [(SIGNATURE_HEADER, sign(public, BODY))];
        let req = VerifyRequest {
            headers: &headers,
            body: BODY,
            now_unix: 0,
            target: None,
        };
        assert_eq!(
            verify_any(&cfg(&[public]), &req),
            Err(SignatureError::NoUsableSecret)
        );
    }

    fn cfg(secrets: &[&str]) -> SchemeConfig {
        SchemeConfig::new(
            Scheme::Github,
            secrets.iter().map(|s| (*s).to_owned()).collect(),
        )
    }

    fn run(
        cfg: &SchemeConfig,
        headers: &dyn HeaderLookup,
        body: &[u8],
    ) -> Result<Verified, SignatureError> {
        // GitHub signs no timestamp, so `now` must not matter.
        verify_any(
            cfg,
            &VerifyRequest {
                headers,
                body,
                now_unix: i64::MAX,
                target: None,
            },
        )
    }

    fn headers(sig: &str) -> Vec<(&'static str, String)> {
        vec![
            ("X-Hub-Signature-256", sig.to_owned()),
            ("X-GitHub-Delivery", DELIVERY.to_owned()),
        ]
    }

    #[test]
    fn docs_vector_verifies() {
        let v = run(&cfg(&[SECRET]), &headers(SIG), BODY).unwrap();
        assert_eq!(
            v,
            Verified {
                scheme: Scheme::Github,
                event_id: Some(DELIVERY.into()),
                timestamp: None,
                secret_index: 0,
            }
        );
    }

    #[test]
    fn sign_matches_docs() {
        assert_eq!(sign(SECRET, BODY), SIG);
    }

    #[test]
    fn delivery_header_is_optional() {
        let h = [("x-hub-signature-256", SIG)];
        assert_eq!(run(&cfg(&[SECRET]), &h, BODY).unwrap().event_id, None);
    }

    #[test]
    fn uppercase_hex_accepted() {
        let upper = format!("sha256={}", SIG[7..].to_ascii_uppercase());
        assert!(run(&cfg(&[SECRET]), &headers(&upper), BODY).is_ok());
    }

    #[test]
    fn rotation_second_secret_matches() {
        let v = run(&cfg(&[SECRET, ROTATED]), &headers(ROTATED_SIG), BODY).unwrap();
        assert_eq!(v.secret_index, 1);
    }

    #[test]
    fn wrong_secret_and_tampered_body_rejected() {
        assert_eq!(
            run(&cfg(&[ROTATED]), &headers(SIG), BODY),
            Err(SignatureError::NoMatchingSignature)
        );
        assert_eq!(
            run(&cfg(&[SECRET]), &headers(SIG), b"Hello, World?"),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn missing_and_malformed_headers() {
        let only_delivery = [("X-GitHub-Delivery", DELIVERY)];
        assert_eq!(
            run(&cfg(&[SECRET]), &only_delivery, BODY),
            Err(SignatureError::MissingHeader("x-hub-signature-256".into()))
        );
        for bad in [
            &SIG[7..],
            "sha1=0123456789abcdef0123456789abcdef01234567",
            "sha256=xyz",
            "sha256=757107ea",
            "sha256=",
        ] {
            assert!(
                matches!(
                    run(&cfg(&[SECRET]), &headers(bad), BODY),
                    Err(SignatureError::MalformedHeader { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn no_usable_secret() {
        assert_eq!(
            run(&cfg(&[]), &headers(SIG), BODY),
            Err(SignatureError::NoUsableSecret)
        );
    }

    #[test]
    fn errors_do_not_leak_secret_or_signature() {
        for (sig, body) in [(SIG, b"tampered".as_slice()), (&SIG[7..], BODY)] {
            let err = run(&cfg(&[SECRET]), &headers(sig), body).unwrap_err();
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(!text.contains(SECRET), "{text}");
                assert!(!text.contains(&SIG[7..]), "{text}");
            }
        }
    }
}
