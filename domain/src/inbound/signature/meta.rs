//! Meta (Facebook) Lead Ads webhooks: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the
//! body>`, keyed with the app secret (<https://developers.facebook.com/docs/graph-api/webhooks/getting-started>):
//! GitHub's format. No timestamp is signed, so only each lead's identity (its `leadgen_id`,
//! in the signed body) stops a replay. Subscribing starts with an unsigned `GET` handshake
//! that must name the source's `verify_token` ([`handshake_challenge`]).

use super::{SchemeConfig, SignatureError, Verified, VerifyRequest, github};

pub const SIGNATURE_HEADER: &str = github::SIGNATURE_HEADER;

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let verified = github::verify(cfg, req)?;
    // GitHub's delivery header means nothing from Meta.
    Ok(Verified {
        event_id: None,
        ..verified
    })
}

/// A subscription handshake's query: `hub.mode`, `hub.challenge`, `hub.verify_token`.
#[derive(Default, Clone, serde::Deserialize)]
pub struct Handshake {
    #[serde(rename = "hub.mode")]
    pub mode: Option<String>,
    #[serde(rename = "hub.challenge")]
    pub challenge: Option<String>,
    #[serde(rename = "hub.verify_token")]
    pub verify_token: Option<String>,
}

// Hand-written so the token given never reaches a log through `{:?}`.
impl std::fmt::Debug for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshake")
            .field("mode", &self.mode)
            .field("verify_token", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// The challenge to answer, when `handshake` subscribes with the token the
/// source keeps (`expected`); `None` otherwise. The tokens are compared in
/// constant time (as MACs under a fixed key, so their lengths leak nothing
/// either).
pub fn handshake_challenge(handshake: &Handshake, expected: Option<&str>) -> Option<String> {
    let given = handshake.verify_token.as_deref().unwrap_or("");
    // Computed even without a stored token, so that the answer's timing
    // does not tell a source without one (or no source) apart.
    let expected_mac = crate::crypto::hmac_sha256_bytes(
        b"leadpipe verify token",
        &[expected.unwrap_or("").as_bytes()],
    );
    let given_mac = super::mac_sha256(b"leadpipe verify token", &[given.as_bytes()]).ok()?;
    let same = hmac::Mac::verify_slice(given_mac, &expected_mac).is_ok();
    let subscribe = handshake.mode.as_deref() == Some("subscribe");
    let challenge = handshake.challenge.as_deref().filter(|c| !c.is_empty());
    match (same, subscribe, expected, challenge) {
        (true, true, Some(token), Some(challenge)) if !token.is_empty() => {
            Some(challenge.to_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{Scheme, verify as verify_any};
    use super::*;

    const SECRET: &str = "meta-app-secret-0123456789";
    const BODY: &[u8] = br#"{"object":"page","entry":[]}"#;

    fn run(header: &str, body: &[u8]) -> Result<Verified, SignatureError> {
        let cfg = SchemeConfig::new(Scheme::MetaLeadAds, vec![SECRET.into()]);
        let headers = [("X-Hub-Signature-256", header), ("X-GitHub-Delivery", "g")];
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
    fn the_body_signed_with_the_app_secret_verifies_and_nothing_else() {
        // printf '%s' '{"object":"page","entry":[]}' | openssl dgst -sha256 -hmac 'meta-app-secret-0123456789'
        let sig = "sha256=7b70cf26b464e7659ddc3b73cf5756f05469641100dca9f27c518581e81a4940";
        let v = run(sig, BODY).unwrap();
        assert_eq!((v.event_id, v.timestamp), (None, None));
        let mut tampered = BODY.to_vec();
        tampered[3] ^= 1;
        assert_eq!(
            run(sig, &tampered),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    fn handshake(mode: &str, challenge: &str, token: &str) -> Handshake {
        Handshake {
            mode: Some(mode.into()),
            challenge: Some(challenge.into()),
            verify_token: Some(token.into()),
        }
    }

    #[test]
    fn only_the_stored_token_subscribing_gets_the_challenge() {
        let ok = handshake("subscribe", "1158201444", "my-verify-token");
        assert_eq!(
            handshake_challenge(&ok, Some("my-verify-token")).as_deref(),
            Some("1158201444")
        );
        assert_eq!(handshake_challenge(&ok, Some("my-verify-tokeN")), None);
        assert_eq!(handshake_challenge(&ok, None), None);
        let unsubscribe = handshake("unsubscribe", "1", "my-verify-token");
        assert_eq!(
            handshake_challenge(&unsubscribe, Some("my-verify-token")),
            None
        );
        let empty = handshake("subscribe", "1", "");
        assert_eq!(handshake_challenge(&empty, Some("")), None);
        assert_eq!(handshake_challenge(&Handshake::default(), None), None);
    }
}
