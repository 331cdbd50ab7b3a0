//! Calendly: `Calendly-Webhook-Signature: t=<unix>,v1=<hex>` over `{t}.{body}`, HMAC-SHA256
//! keyed with the webhook signing key's UTF-8 bytes: Stripe's format under Calendly's header
//! (<https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures>). Its events
//! carry no id of their own, so the signed body's hash is the event's identity.

use super::{SchemeConfig, SignatureError, Verified, VerifyRequest};

pub const SIGNATURE_HEADER: &str = "calendly-webhook-signature";

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    super::stripe::verify_t_v1(SIGNATURE_HEADER, cfg, req)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{Scheme, verify as verify_any};
    use super::*;

    const KEY: &str = "calendly-signing-key-0123456789";
    const BODY: &[u8] = br#"{"event":"invitee.created","payload":{"email":"ada@example.com"}}"#;
    // printf '%s' '1700000000.{"event":"invitee.created","payload":{"email":"ada@example.com"}}' \
    //   | openssl dgst -sha256 -hmac 'calendly-signing-key-0123456789'
    const SIG: &str = "2e87e58959d148764c5780e786f91e10930d8d6cf9641d88e4c62fed11894be9";

    fn run(header: &str, body: &[u8], now: i64) -> Result<Verified, SignatureError> {
        let cfg = SchemeConfig::new(Scheme::Calendly, vec![KEY.into()]);
        let headers = [("Calendly-Webhook-Signature", header)];
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
    fn openssl_vector_verifies_within_the_tolerance_only() {
        let header = format!("t=1700000000,v1={SIG}");
        let v = run(&header, BODY, 1_700_000_100).unwrap();
        assert_eq!((v.timestamp, v.event_id), (Some(1_700_000_000), None));
        assert_eq!(
            run(&header, BODY, 1_700_000_301),
            Err(SignatureError::TimestampOutsideTolerance {
                timestamp: 1_700_000_000,
                now: 1_700_000_301,
                tolerance_secs: 300
            })
        );
        let mut tampered = BODY.to_vec();
        tampered[3] ^= 1;
        assert_eq!(
            run(&header, &tampered, 1_700_000_000),
            Err(SignatureError::NoMatchingSignature)
        );
        // The timestamp is signed too.
        let moved = format!("t=1700000001,v1={SIG}");
        assert_eq!(
            run(&moved, BODY, 1_700_000_000),
            Err(SignatureError::NoMatchingSignature)
        );
    }

    #[test]
    fn stripe_header_is_not_read() {
        let cfg = SchemeConfig::new(Scheme::Calendly, vec![KEY.into()]);
        let headers = [("Stripe-Signature", format!("t=1700000000,v1={SIG}"))];
        let refused = verify_any(
            &cfg,
            &VerifyRequest {
                headers: &headers,
                body: BODY,
                now_unix: 1_700_000_000,
                target: None,
            },
        );
        assert_eq!(
            refused,
            Err(SignatureError::MissingHeader(SIGNATURE_HEADER.into()))
        );
    }
}
