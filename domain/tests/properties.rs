//! Property tests for what parses untrusted input: signature headers, payload
//! mapping, Idempotency-Keys, lead records. Nothing may panic, and what is
//! accepted obeys its rules. `PROPTEST_CASES=100000 cargo test -p
//! leadpipe-domain --test properties` runs them longer.

#![allow(clippy::unwrap_used)]

use leadpipe_domain::idempotency::IdempotencyKey;
use leadpipe_domain::inbound::mapping::{RecordMapping, map_record};
use leadpipe_domain::inbound::signature::{
    RequestTarget, Scheme, SchemeConfig, VerifyRequest, github, hmac_header, standard_webhooks,
    stripe, verify,
};
use leadpipe_domain::lead::record::LeadRecord;
use proptest::prelude::*;

const NOW: i64 = 1_764_500_000;
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const URI: &str = "https://hooks.example.com/webhooks/crm";
/// Ignored by every scheme but hubspot-v3, which signs it.
const TARGET: Option<RequestTarget<'static>> = Some(RequestTarget {
    method: "POST",
    uri: URI,
});

fn schemes() -> impl Strategy<Value = Scheme> {
    prop_oneof![
        Just(Scheme::StandardWebhooks),
        Just(Scheme::Github),
        Just(Scheme::Stripe),
        Just(Scheme::HmacSha256),
        Just(Scheme::Typeform),
        Just(Scheme::Calendly),
        Just(Scheme::Slack),
        Just(Scheme::MetaLeadAds),
        Just(Scheme::HubspotV3)
    ]
}

fn header_names() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("webhook-id".to_owned()),
        Just("webhook-timestamp".to_owned()),
        Just("webhook-signature".to_owned()),
        Just("stripe-signature".to_owned()),
        Just("x-hub-signature-256".to_owned()),
        Just("x-github-delivery".to_owned()),
        Just("x-signature".to_owned()),
        Just("typeform-signature".to_owned()),
        Just("calendly-webhook-signature".to_owned()),
        Just("x-slack-signature".to_owned()),
        Just("x-slack-request-timestamp".to_owned()),
        Just("x-hubspot-signature-v3".to_owned()),
        Just("x-hubspot-request-timestamp".to_owned()),
        "[a-z-]{1,20}",
    ]
}

/// Header values that look like signatures often enough to reach the parsers' depths.
fn header_values() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,80}",
        "(v1a?,[A-Za-z0-9+/=]{0,60} ?){0,20}",
        "t=[0-9]{0,12}(,v[01]=[0-9a-f]{0,64}){0,20}",
        "sha256=[0-9a-fA-F]{0,70}",
        "sha256=[A-Za-z0-9+/=]{0,48}",
        "v0=[0-9a-f]{0,64}",
        "[0-9]{0,14}",
    ]
}

/// `sha256=` + base64 of the HMAC-SHA256 of the body, as Typeform signs.
fn typeform_signature(body: &[u8]) -> String {
    use base64::Engine as _;
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    format!(
        "sha256={}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

/// `v0=` + hex of the HMAC-SHA256 of `v0:{ts}:{body}`, as Slack signs.
fn slack_signature(ts: i64, body: &[u8]) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("v0:{ts}:").as_bytes());
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// base64 of the HMAC-SHA256 of method + URI + body + timestamp, as HubSpot (v3) signs.
fn hubspot_signature(uri: &str, body: &[u8], millis: i64) -> String {
    use base64::Engine as _;
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(b"POST");
    mac.update(uri.as_bytes());
    mac.update(body);
    mac.update(millis.to_string().as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

fn config(scheme: Scheme) -> SchemeConfig {
    SchemeConfig::new(scheme, vec![SECRET.to_owned(), "rotated-secret".to_owned()])
}

proptest! {
    #[test]
    fn verify_never_panics_and_rejects_what_it_cannot_check(
        scheme in schemes(),
        headers in proptest::collection::vec((header_names(), header_values()), 0..8),
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let request = VerifyRequest { headers: &headers, body: &body, now_unix: NOW, target: None };
        // Random headers carry no valid MAC of this body under these secrets.
        prop_assert!(verify(&config(scheme), &request).is_err());
    }

    #[test]
    fn every_scheme_accepts_its_own_signature_and_no_tampered_body(
        body in proptest::collection::vec(any::<u8>(), 1..512),
        flip in any::<prop::sample::Index>(),
        msg_id in "[A-Za-z0-9_-]{1,40}",
    ) {
        let ts = NOW - 10;
        let cases: Vec<(Scheme, Vec<(String, String)>)> = vec![
            (Scheme::StandardWebhooks, vec![
                ("webhook-id".into(), msg_id.clone()),
                ("webhook-timestamp".into(), ts.to_string()),
                ("webhook-signature".into(), standard_webhooks::sign(SECRET, &msg_id, ts, &body).unwrap()),
            ]),
            (Scheme::Stripe, vec![("stripe-signature".into(), stripe::sign(SECRET, ts, &body))]),
            (Scheme::Github, vec![
                ("x-hub-signature-256".into(), github::sign(SECRET, &body)),
                ("x-github-delivery".into(), msg_id.clone()),
            ]),
            (Scheme::HmacSha256, vec![("x-signature".into(), hmac_header::sign(SECRET, &body))]),
            // Calendly signs as Stripe does, under its own header.
            (Scheme::Calendly, vec![("calendly-webhook-signature".into(), stripe::sign(SECRET, ts, &body))]),
            (Scheme::Typeform, vec![("typeform-signature".into(), typeform_signature(&body))]),
            (Scheme::Slack, vec![
                ("x-slack-request-timestamp".into(), ts.to_string()),
                ("x-slack-signature".into(), slack_signature(ts, &body)),
            ]),
            // Meta signs as GitHub does.
            (Scheme::MetaLeadAds, vec![("x-hub-signature-256".into(), github::sign(SECRET, &body))]),
            (Scheme::HubspotV3, vec![
                ("x-hubspot-request-timestamp".into(), (ts * 1000).to_string()),
                ("x-hubspot-signature-v3".into(), hubspot_signature(URI, &body, ts * 1000)),
            ]),
        ];
        let mut tampered = body.clone();
        let at = flip.index(tampered.len());
        tampered[at] ^= 0x01;
        for (scheme, headers) in cases {
            let ok = VerifyRequest { headers: &headers, body: &body, now_unix: NOW, target: TARGET };
            prop_assert!(verify(&config(scheme), &ok).is_ok(), "{scheme:?} rejected its own signature");
            let bad = VerifyRequest { headers: &headers, body: &tampered, now_unix: NOW, target: TARGET };
            prop_assert!(verify(&config(scheme), &bad).is_err(), "{scheme:?} accepted a tampered body");
        }
    }

    #[test]
    fn mapping_never_panics_on_any_body(
        body in proptest::collection::vec(any::<u8>(), 0..256),
        json in arbitrary_json(),
    ) {
        let mapping = RecordMapping {
            record: "/data".into(),
            source_ref: "/id".into(),
            email: Some("/email".into()),
            name: Some("/name".into()),
            phone: Some("/phone".into()),
            company: Some("/company".into()),
            updated_at: Some("/updated_at".into()),
        };
        let _ = map_record("webform", &mapping, &body);
        let wrapped = serde_json::to_vec(&serde_json::json!({"data": json})).unwrap();
        if let Ok(record) = map_record("webform", &mapping, &wrapped) {
            // Whatever maps, normalises without panicking; what passes is clean.
            if let Ok(lead) = record.normalise() {
                prop_assert!(!lead.source_ref.is_empty() && lead.source_ref.len() <= 255);
                prop_assert!(lead.email.as_ref().is_none_or(|e| e == &e.to_lowercase()));
            }
        }
    }

    #[test]
    fn idempotency_keys_parse_or_refuse(raw in ".{0,300}") {
        if let Ok(key) = IdempotencyKey::parse(&raw) {
            prop_assert!(!key.as_str().is_empty() && key.as_str().len() <= 255);
            prop_assert!(key.as_str().bytes().all(|b| (0x20..0x7f).contains(&b)));
        }
    }

    #[test]
    fn records_normalise_or_refuse(
        source in ".{0,70}",
        source_ref in proptest::option::of(".{0,300}"),
        email in proptest::option::of(".{0,40}"),
        phone in proptest::option::of("[+0-9 ()-]{0,30}"),
    ) {
        let record = LeadRecord { source, source_ref, email, phone, ..Default::default() };
        if let Ok(lead) = record.normalise() {
            prop_assert!(leadpipe_domain::source_name::is_valid_source_name(&lead.source));
            prop_assert!(lead.phone.as_ref().is_none_or(|p| p.trim_start_matches('+').bytes().all(|b| b.is_ascii_digit())));
        }
    }
}

fn arbitrary_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map_or(serde_json::Value::Null, serde_json::Value::Number)),
        ".{0,30}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("id".to_owned()),
                    Just("email".to_owned()),
                    Just("updated_at".to_owned()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
