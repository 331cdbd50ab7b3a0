//! HubSpot v3: `X-HubSpot-Signature-v3: <base64 HMAC-SHA256 of method + uri + body + timestamp>`,
//! keyed with the app's client secret, the timestamp (milliseconds) in
//! `X-HubSpot-Request-Timestamp`
//! (<https://developers.hubspot.com/docs/api/webhooks/validating-requests>). The `uri` is the
//! full URL HubSpot called, which a server behind a proxy cannot see: the caller builds it
//! from the service's public URL ([`VerifyRequest::target`]); without one nothing verifies.

use std::borrow::Cow;

use base64::Engine as _;

use super::{
    BASE64_STANDARD_ANY_PAD, MAC_LEN, SchemeConfig, SignatureError, Verified, VerifyRequest,
    check_tolerance, first_matching_secret, parse_unix_timestamp, required_header, utf8_keys,
};

pub const SIGNATURE_HEADER: &str = "x-hubspot-signature-v3";
pub const TIMESTAMP_HEADER: &str = "x-hubspot-request-timestamp";

pub(super) fn verify(
    cfg: &SchemeConfig,
    req: &VerifyRequest<'_>,
) -> Result<Verified, SignatureError> {
    let keys = utf8_keys(&cfg.secrets)?;
    let timestamp_raw = required_header(req.headers, TIMESTAMP_HEADER)?;
    let signature = required_header(req.headers, SIGNATURE_HEADER)?;
    let millis = parse_unix_timestamp(TIMESTAMP_HEADER, &timestamp_raw)?;
    let tag = BASE64_STANDARD_ANY_PAD
        .decode(signature.as_bytes())
        .ok()
        .filter(|tag| tag.len() == MAC_LEN)
        .ok_or_else(|| SignatureError::malformed(SIGNATURE_HEADER, "expected base64"))?;
    check_tolerance(millis / 1000, req.now_unix, cfg.tolerance_secs)?;
    let target = req.target.ok_or(SignatureError::NoRequestTarget)?;
    let uri = decode_uri(target.uri);
    // The timestamp as sent: HubSpot signs its text.
    let secret_index = first_matching_secret(
        &keys,
        &[
            target.method.as_bytes(),
            uri.as_bytes(),
            req.body,
            timestamp_raw.as_bytes(),
        ],
        &[tag],
    )?;
    Ok(Verified {
        scheme: cfg.scheme,
        event_id: None,
        timestamp: Some(millis / 1000),
        secret_index,
    })
}

/// The escapes HubSpot decodes in the URI before signing (and only those:
/// it leaves others, such as `%20`, as they are).
const DECODED: [(&str, char); 12] = [
    ("%3A", ':'),
    ("%2F", '/'),
    ("%3F", '?'),
    ("%40", '@'),
    ("%21", '!'),
    ("%24", '$'),
    ("%27", '\''),
    ("%28", '('),
    ("%29", ')'),
    ("%2A", '*'),
    ("%2C", ','),
    ("%3B", ';'),
];

/// The URI as HubSpot signs it: [`DECODED`]'s escapes decoded, in either case.
pub fn decode_uri(uri: &str) -> Cow<'_, str> {
    if !uri.contains('%') {
        return Cow::Borrowed(uri);
    }
    let mut out = String::with_capacity(uri.len());
    let mut rest = uri;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape.and_then(|e| {
            DECODED
                .iter()
                .find(|(code, _)| code.eq_ignore_ascii_case(e))
        }) {
            Some((_, decoded)) => {
                out.push(*decoded);
                rest = &rest[at + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{RequestTarget, Scheme, verify as verify_any};
    use super::*;

    const SECRET: &str = "hubspot-client-secret-0123";
    const BODY: &[u8] =
        br#"[{"eventId":100,"subscriptionType":"contact.creation","objectId":123}]"#;
    const URI: &str = "https://hooks.example.com/webhooks/hubspot?a=b";
    const TS: &str = "1700000000000";
    // python3: base64(hmac.new(SECRET, b"POST" + URI + BODY + TS, sha256).digest())
    const SIG: &str = "wMevAN+Tyssfggjewd8moGsFi5rVgJk3eeQmqpbuE4A=";

    fn run(uri: Option<&str>, ts: &str, sig: &str, now: i64) -> Result<Verified, SignatureError> {
        let cfg = SchemeConfig::new(Scheme::HubspotV3, vec![SECRET.into()]);
        let headers = [
            ("X-HubSpot-Request-Timestamp", ts),
            ("X-HubSpot-Signature-v3", sig),
        ];
        verify_any(
            &cfg,
            &VerifyRequest {
                headers: &headers,
                body: BODY,
                now_unix: now,
                target: uri.map(|uri| RequestTarget {
                    method: "POST",
                    uri,
                }),
            },
        )
    }

    #[test]
    fn the_vector_verifies_within_five_minutes_only() {
        let v = run(Some(URI), TS, SIG, 1_700_000_100).unwrap();
        assert_eq!(v.timestamp, Some(1_700_000_000));
        assert!(matches!(
            run(Some(URI), TS, SIG, 1_700_000_301),
            Err(SignatureError::TimestampOutsideTolerance { .. })
        ));
        assert_eq!(
            run(Some(URI), "1700000000001", SIG, 1_700_000_000),
            Err(SignatureError::NoMatchingSignature)
        );
        assert_eq!(
            run(
                Some("https://other.example.com/webhooks/hubspot?a=b"),
                TS,
                SIG,
                1_700_000_000
            ),
            Err(SignatureError::NoMatchingSignature)
        );
        // An escaped ':' is the same URI to HubSpot.
        assert!(
            run(
                Some("https%3A//hooks.example.com/webhooks/hubspot?a=b"),
                TS,
                SIG,
                1_700_000_000
            )
            .is_ok()
        );
        assert_eq!(
            run(None, TS, SIG, 1_700_000_000),
            Err(SignatureError::NoRequestTarget)
        );
        assert!(matches!(
            run(Some(URI), TS, "not base64!", 1_700_000_000),
            Err(SignatureError::MalformedHeader { .. })
        ));
    }

    #[test]
    fn only_hubspots_escapes_are_decoded() {
        assert_eq!(
            decode_uri("https://h/p?x=%3a%2F%3F%40%21%24%27%28%29%2A%2C%3B&y=%20%2"),
            "https://h/p?x=:/?@!$'()*,;&y=%20%2"
        );
        assert!(matches!(decode_uri("https://h/p"), Cow::Borrowed(_)));
    }
}
