//! Generic `hmac-sha256`: HMAC-SHA256 of the body, keyed with the secret's UTF-8 bytes, in a
//! configurable header as hex or base64, optionally prefixed `sha256=`. No timestamp.

use base64::Engine as _;

use super::{
    BASE64_STANDARD_ANY_PAD, BASE64_URL_SAFE_ANY_PAD, MAC_LEN, SchemeConfig, SignatureError,
    Verified, VerifyRequest, first_matching_secret, hmac_sha256_hex, optional_header,
    required_header, utf8_keys,
};

pub const DEFAULT_SIGNATURE_HEADER: &str = "x-signature";

const PREFIX: &str = "sha256=";

/// 64 hex digits and 43–44 base64 chars cannot collide, so the encoding is unambiguous.
fn decode_tag(value: &str) -> Option<Vec<u8>> {
    let value = match value.get(..PREFIX.len()) {
        Some(p) if p.eq_ignore_ascii_case(PREFIX) => &value[PREFIX.len()..],
        _ => value,
    };
    let tag = if value.len() == 2 * MAC_LEN {
        hex::decode(value).ok()?
    } else {
        BASE64_STANDARD_ANY_PAD
            .decode(value)
            .or_else(|_| BASE64_URL_SAFE_ANY_PAD.decode(value))
            .ok()?
    };
    (tag.len() == MAC_LEN).then_some(tag)
}

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let keys = utf8_keys(&cfg.secrets)?;
    let header_name = cfg.signature_header();
    let value = required_header(req.headers, header_name)?;
    let tag = decode_tag(&value).ok_or_else(|| {
        SignatureError::malformed(header_name, "expected hex or base64 HMAC-SHA256")
    })?;

    let secret_index = first_matching_secret(&keys, &[req.body], &[tag])?;
    Ok(Verified {
        scheme: cfg.scheme,
        event_id: cfg
            .event_id_header()
            .and_then(|name| optional_header(req.headers, name))
            .map(|v| v.into_owned()),
        timestamp: None,
        secret_index,
    })
}

/// Lowercase hex HMAC-SHA256 of `body`, for outgoing webhooks using this scheme.
pub fn sign(secret: &str, body: &[u8]) -> String {
    hmac_sha256_hex(secret.as_bytes(), &[body])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{HeaderLookup, Scheme, verify as verify_any};
    use super::*;

    const SECRET: &str = "leadpipe-shared-secret";
    const BODY: &[u8] = br#"{"lead_id":42,"stage":"won"}"#;
    // printf '%s' '{"lead_id":42,"stage":"won"}' | openssl dgst -sha256 -hmac 'leadpipe-shared-secret'
    const SIG_HEX: &str = "0b1580a2d6da8a40ec156826f6769a2227d1297fd7035dabc884c6d4378fe96a";
    // printf '%s' '{"lead_id":42,"stage":"won"}' | openssl dgst -sha256 -hmac 'leadpipe-shared-secret' -binary | base64
    const SIG_B64: &str = "CxWAotbaikDsFWgm9naaIifRKX/XA12ryITG1DeP6Wo=";
    // printf '%s' '{"lead_id":42,"stage":"won"}' | openssl dgst -sha256 -hmac 'rotated-shared-secret'
    const ROTATED: &str = "rotated-shared-secret";
    const ROTATED_HEX: &str = "1a99943b999f8486f3879b7d322ae34b40f26098dd5688757bf3cb10953d6097";

    fn cfg(secrets: &[&str]) -> SchemeConfig {
        SchemeConfig::new(
            Scheme::HmacSha256,
            secrets.iter().map(|s| (*s).to_owned()).collect(),
        )
    }

    fn run(
        cfg: &SchemeConfig,
        headers: &dyn HeaderLookup,
        body: &[u8],
    ) -> Result<Verified, SignatureError> {
        verify_any(
            cfg,
            &VerifyRequest {
                headers,
                body,
                now_unix: 0,
                target: None,
            },
        )
    }

    #[test]
    fn hex_base64_and_prefixed_forms_verify() {
        let url_safe = SIG_B64.replace('/', "_").replace('+', "-");
        let forms = [
            SIG_HEX.to_owned(),
            SIG_HEX.to_ascii_uppercase(),
            format!("sha256={SIG_HEX}"),
            format!("SHA256={SIG_HEX}"),
            SIG_B64.to_owned(),
            SIG_B64.trim_end_matches('=').to_owned(),
            format!("sha256={SIG_B64}"),
            url_safe,
        ];
        for form in forms {
            let h = [("X-Signature", form.as_str())];
            let v = run(&cfg(&[SECRET]), &h, BODY).unwrap();
            assert_eq!(
                v,
                Verified {
                    scheme: Scheme::HmacSha256,
                    event_id: None,
                    timestamp: None,
                    secret_index: 0,
                },
                "{form}"
            );
        }
    }

    #[test]
    fn sign_matches_openssl() {
        assert_eq!(sign(SECRET, BODY), SIG_HEX);
    }

    #[test]
    fn custom_signature_and_event_id_headers() {
        let mut c = cfg(&[SECRET]);
        c.signature_header = Some("X-Leadpipe-Signature".into());
        c.event_id_header = Some("X-Event-Id".into());
        let h = [("x-leadpipe-signature", SIG_HEX), ("x-event-id", "evt_123")];
        let v = run(&c, &h, BODY).unwrap();
        assert_eq!(v.event_id.as_deref(), Some("evt_123"));

        // The default header is no longer consulted.
        let h = [("x-signature", SIG_HEX)];
        assert_eq!(
            run(&c, &h, BODY),
            Err(SignatureError::MissingHeader("X-Leadpipe-Signature".into()))
        );
    }

    #[test]
    fn rotation_second_secret_matches() {
        let h = [("x-signature", ROTATED_HEX)];
        assert_eq!(
            run(&cfg(&[SECRET, ROTATED]), &h, BODY)
                .unwrap()
                .secret_index,
            1
        );
    }

    #[test]
    fn wrong_secret_and_tampered_body_rejected() {
        let h = [("x-signature", SIG_HEX)];
        assert_eq!(
            run(&cfg(&[ROTATED]), &h, BODY),
            Err(SignatureError::NoMatchingSignature)
        );
        let mut body = BODY.to_vec();
        body[0] ^= 1;
        assert_eq!(
            run(&cfg(&[SECRET]), &h, &body),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn missing_and_malformed_headers() {
        let none: [(&str, &str); 0] = [];
        assert_eq!(
            run(&cfg(&[SECRET]), &none, BODY),
            Err(SignatureError::MissingHeader("x-signature".into()))
        );
        let blank = [("x-signature", "   ")];
        assert_eq!(
            run(&cfg(&[SECRET]), &blank, BODY),
            Err(SignatureError::MissingHeader("x-signature".into()))
        );
        for bad in [
            "sha256=",
            "nothex-not-base64!",
            &SIG_HEX[..62],
            &SIG_B64[..20],
            "sha1=CxWAotbaikDsFWgm9naaIifRKX/XA12ryITG1DeP6Wo=",
        ] {
            let h = [("x-signature", bad)];
            assert!(
                matches!(
                    run(&cfg(&[SECRET]), &h, BODY),
                    Err(SignatureError::MalformedHeader { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn no_usable_secret() {
        let h = [("x-signature", SIG_HEX)];
        assert_eq!(
            run(&cfg(&[""]), &h, BODY),
            Err(SignatureError::NoUsableSecret)
        );
    }

    #[test]
    fn errors_do_not_leak_secret_or_signature() {
        for (sig, body) in [(SIG_HEX, b"x".as_slice()), (SIG_B64, b"y".as_slice())] {
            let h = [("x-signature", sig)];
            let err = run(&cfg(&[SECRET]), &h, body).unwrap_err();
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(!text.contains(SECRET), "{text}");
                assert!(!text.contains(sig), "{text}");
            }
        }
    }
}
