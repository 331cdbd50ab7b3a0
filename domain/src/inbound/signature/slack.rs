//! Slack v0: `X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}">`,
//! keyed with the app's signing secret
//! (<https://api.slack.com/authentication/verifying-requests-from-slack>). An Events API
//! subscription starts with a signed `url_verification` request whose `challenge` must be
//! answered ([`url_verification_challenge`]).

use super::{
    MAC_LEN, SchemeConfig, SignatureError, Verified, VerifyRequest, check_tolerance,
    first_matching_secret, parse_unix_timestamp, required_header, utf8_keys,
};

pub const SIGNATURE_HEADER: &str = "x-slack-signature";
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let keys = utf8_keys(&cfg.secrets)?;
    let timestamp_raw = required_header(req.headers, TIMESTAMP_HEADER)?;
    let signature = required_header(req.headers, SIGNATURE_HEADER)?;
    let timestamp = parse_unix_timestamp(TIMESTAMP_HEADER, &timestamp_raw)?;
    let tag = signature
        .strip_prefix("v0=")
        .and_then(|hex_tag| hex::decode(hex_tag).ok())
        .filter(|tag| tag.len() == MAC_LEN)
        .ok_or_else(|| SignatureError::malformed(SIGNATURE_HEADER, "expected v0=<hex>"))?;
    check_tolerance(timestamp, req.now_unix, cfg.tolerance_secs)?;
    let timestamp_str = timestamp.to_string();
    let secret_index = first_matching_secret(
        &keys,
        &[b"v0:", timestamp_str.as_bytes(), b":", req.body],
        &[tag],
    )?;
    Ok(Verified {
        scheme: cfg.scheme,
        event_id: None,
        timestamp: Some(timestamp),
        secret_index,
    })
}

/// The `challenge` of a (verified) Events API `url_verification` request,
/// which Slack expects back; `None` for any other body.
pub fn url_verification_challenge(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Handshake {
        #[serde(rename = "type")]
        kind: String,
        challenge: String,
    }
    let handshake: Handshake = serde_json::from_slice(body).ok()?;
    (handshake.kind == "url_verification").then_some(handshake.challenge)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{Scheme, verify as verify_any};
    use super::*;

    // Slack's own example ("Verifying requests from Slack"), reproduced with
    // printf '%s' 'v0:1531420618:token=…' | openssl dgst -sha256 -hmac '8f742231b10e8888abcd99yyyzzz85a5'
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TS: &str = "1531420618";
    const BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn run(ts: &str, sig: &str, body: &[u8], now: i64) -> Result<Verified, SignatureError> {
        let cfg = SchemeConfig::new(Scheme::Slack, vec![SECRET.into()]);
        let headers = [
            ("X-Slack-Request-Timestamp", ts),
            ("X-Slack-Signature", sig),
        ];
        verify_any(
            &cfg,
            &VerifyRequest {
                headers: &headers,
                body,
                now_unix: now,
                target: None,
            },
        )
    }

    #[test]
    fn slacks_own_example_verifies() {
        let v = run(TS, SIG, BODY, 1_531_420_618).unwrap();
        assert_eq!(v.timestamp, Some(1_531_420_618));
    }

    #[test]
    fn tampered_stale_or_malformed_is_refused() {
        let mut tampered = BODY.to_vec();
        tampered[7] ^= 1;
        assert_eq!(
            run(TS, SIG, &tampered, 1_531_420_618),
            Err(SignatureError::NoMatchingSignature)
        );
        assert_eq!(
            run("1531420619", SIG, BODY, 1_531_420_618),
            Err(SignatureError::NoMatchingSignature)
        );
        assert!(matches!(
            run(TS, SIG, BODY, 1_531_420_618 + 301),
            Err(SignatureError::TimestampOutsideTolerance { .. })
        ));
        for sig in [&SIG[3..], "v1=00", "v0=zz"] {
            assert!(
                matches!(
                    run(TS, sig, BODY, 1_531_420_618),
                    Err(SignatureError::MalformedHeader { .. })
                ),
                "{sig}"
            );
        }
    }

    #[test]
    fn only_a_url_verification_has_a_challenge() {
        assert_eq!(
            url_verification_challenge(
                br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#
            )
            .as_deref(),
            Some("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
        );
        assert_eq!(
            url_verification_challenge(br#"{"type":"event_callback","challenge":"x"}"#),
            None
        );
        assert_eq!(url_verification_challenge(b"not json"), None);
    }
}
