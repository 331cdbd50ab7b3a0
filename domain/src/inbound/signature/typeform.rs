//! Typeform: `Typeform-Signature: sha256=<base64 HMAC-SHA256 of the body>`, keyed with the
//! secret's UTF-8 bytes (<https://www.typeform.com/developers/webhooks/secure-your-webhooks/>).
//! No timestamp is signed, so only the event's identity stops a replay: by default the body's
//! `event_id`, which the signature covers.

use base64::Engine as _;

use super::{
    BASE64_STANDARD_ANY_PAD, MAC_LEN, SchemeConfig, SignatureError, Verified, VerifyRequest,
    first_matching_secret, required_header, utf8_keys,
};

pub const SIGNATURE_HEADER: &str = "typeform-signature";

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let keys = utf8_keys(&cfg.secrets)?;
    let header = required_header(req.headers, SIGNATURE_HEADER)?;
    let malformed = || SignatureError::malformed(SIGNATURE_HEADER, "expected sha256=<base64>");
    let encoded = header.strip_prefix("sha256=").ok_or_else(malformed)?;
    let tag = BASE64_STANDARD_ANY_PAD
        .decode(encoded)
        .ok()
        .filter(|tag| tag.len() == MAC_LEN)
        .ok_or_else(malformed)?;
    let secret_index = first_matching_secret(&keys, &[req.body], &[tag])?;
    Ok(Verified {
        scheme: cfg.scheme,
        event_id: None,
        timestamp: None,
        secret_index,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{Scheme, verify as verify_any};
    use super::*;

    const SECRET: &str = "typeform-secret-0123456789";
    const BODY: &[u8] = br#"{"event_id":"01HQ","event_type":"form_response"}"#;
    // printf '%s' '{"event_id":"01HQ","event_type":"form_response"}' \
    //   | openssl dgst -sha256 -hmac 'typeform-secret-0123456789' -binary | base64
    const SIG: &str = "sha256=tGHgvLaV8m42ZQhafCZ4RacHSYloHPdOGwTqNGTdi3U=";

    fn run(secrets: &[&str], header: &str, body: &[u8]) -> Result<Verified, SignatureError> {
        let cfg = SchemeConfig::new(
            Scheme::Typeform,
            secrets.iter().map(|s| (*s).to_owned()).collect(),
        );
        let headers = [("Typeform-Signature", header)];
        verify_any(
            &cfg,
            &VerifyRequest {
                headers: &headers,
                body,
                now_unix: 0,
                target: None,
            },
        )
    }

    #[test]
    fn openssl_vector_verifies_and_a_rotated_secret_too() {
        assert_eq!(run(&[SECRET], SIG, BODY).unwrap().secret_index, 0);
        assert_eq!(
            run(&["another-secret-0123456789", SECRET], SIG, BODY)
                .unwrap()
                .secret_index,
            1
        );
        let mut tampered = BODY.to_vec();
        tampered[2] ^= 1;
        assert_eq!(
            run(&[SECRET], SIG, &tampered),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn only_sha256_base64_is_read() {
        let bare = SIG.strip_prefix("sha256=").unwrap();
        let hex = "b461e0bcb695f26e3665085a7c267845a707498968 1cf74e1b04ea3464dd8b75";
        for header in [bare, hex, "sha256=", "sha256=not base64!", "sha256=AAAA"] {
            assert!(
                matches!(
                    run(&[SECRET], header, BODY),
                    Err(SignatureError::MalformedHeader { .. })
                ),
                "{header}"
            );
        }
    }
}
