//! Senders that batch: Meta Lead Ads (several leads per delivery, and its
//! subscription handshake) and HubSpot v3 (an array of events, signed over
//! the URL it called). Each delivery is signed here as the sender documents
//! it, written out in the test; each event it carries is stored once.

#![allow(clippy::unwrap_used)]

use api::config::HttpSettings;
use domain::entities::{inbox_event, lead};
use leadpipe_tests::cli::output_text;
use leadpipe_tests::webhooks::{Headers, now};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

on_both_backends!(
    meta_lead_ads_delivery_of_several_leads_stores_each_once,
    meta_handshake_answers_only_the_stored_verify_token,
    hubspot_v3_events_signed_over_the_public_url_become_leads_once,
);

const META_SECRET: &str = "meta-app-secret-0123456789";
const VERIFY_TOKEN: &str = "meta-verify-token-42";

/// HMAC-SHA256 of the parts, keyed with the secret's text.
fn hmac_of(secret: &str, parts: &[&[u8]]) -> Vec<u8> {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// As Meta signs ("Getting started" with Graph API webhooks):
/// `X-Hub-Signature-256: sha256=` and the hex HMAC-SHA256 of the raw
/// payload, keyed with the app secret.
fn meta_headers(app_secret: &str, body: &[u8]) -> Headers {
    let signature = hex::encode(hmac_of(app_secret, &[body]));
    vec![
        ("X-Hub-Signature-256".into(), format!("sha256={signature}")),
        ("content-type".into(), "application/json".into()),
    ]
}

/// A `leadgen` change, as Meta's Page webhook carries one.
fn leadgen(leadgen_id: &str, form_id: &str) -> Value {
    json!({"field": "leadgen", "value": {
        "leadgen_id": leadgen_id, "page_id": "1122", "form_id": form_id,
        "ad_id": "9900", "adgroup_id": "9901", "created_time": 1_700_000_000}})
}

fn meta_body(entries: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({"object": "page", "entry": entries})).unwrap()
}

fn entry(changes: Vec<Value>) -> Value {
    json!({"id": "1122", "time": 1_700_000_000, "changes": changes})
}

async fn body_of(response: reqwest::Response) -> Value {
    response.json().await.unwrap()
}

async fn events_of(app: &TestApp, source: &str) -> Vec<inbox_event::Model> {
    inbox_event::Entity::find()
        .filter(inbox_event::Column::Source.eq(source))
        .order_by_asc(inbox_event::Column::Id)
        .all(&app.db)
        .await
        .unwrap()
}

async fn meta_source(app: &TestApp) {
    let admin = app.admin_token().await;
    // Only the scheme, the app secret and the handshake token: the rest
    // are the scheme's defaults.
    let created = app
        .api(&admin)
        .create_source(&json!({"name": "meta-ads", "scheme": "meta-lead-ads",
            "secrets": [META_SECRET], "verify_token": VERIFY_TOKEN}))
        .await;
    assert_eq!(created.status(), 201);
    let shown = body_of(created).await;
    assert_eq!(shown["events_pointer"], "/entry/*/changes/*");
    assert_eq!(shown["event_id_pointer"], "/value/leadgen_id");
    assert_eq!(shown["event_type_pointer"], "/field");
    assert_eq!(shown["record_pointer"], "/value");
    assert_eq!(shown["source_ref_pointer"], "/leadgen_id");
    assert_eq!(shown["allowed_event_types"], json!(["leadgen"]));
    assert_eq!(shown["verify_token_set"], true);
    assert!(!shown.to_string().contains(VERIFY_TOKEN), "{shown}");
}

async fn meta_lead_ads_delivery_of_several_leads_stores_each_once(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    meta_source(&app).await;

    // Two pages' entries, three leads and a change that is not a lead.
    let first = meta_body(vec![
        entry(vec![leadgen("444", "f1"), leadgen("445", "f1")]),
        entry(vec![
            json!({"field": "feed", "value": {"item": "status"}}),
            leadgen("446", "f2"),
        ]),
    ]);
    let response = app
        .post_webhook("meta-ads", &meta_headers(META_SECRET, &first), &first)
        .await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    let events = ack["events"].as_array().unwrap();
    assert_eq!(events.len(), 4, "{ack}");
    let ids: Vec<_> = events.iter().map(|e| e["event_id"].clone()).collect();
    assert_eq!(ids[0], "444");
    assert_eq!(ids[1], "445");
    assert_eq!(ids[3], "446");
    assert_eq!(events[2]["state"], "skipped", "{ack}");
    assert!(events.iter().all(|e| e["duplicate"] == false), "{ack}");

    // Meta sends the same batch again: nothing new.
    let response = app
        .post_webhook("meta-ads", &meta_headers(META_SECRET, &first), &first)
        .await;
    assert_eq!(response.status(), 200);
    let again = body_of(response).await;
    assert_eq!(again["events"].as_array().unwrap().len(), 4, "{again}");
    assert!(
        again["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["duplicate"] == true),
        "{again}"
    );
    // A later batch that overlaps: only its new lead is stored.
    let overlap = meta_body(vec![entry(vec![
        leadgen("446", "f2"),
        leadgen("447", "f2"),
    ])]);
    let response = app
        .post_webhook("meta-ads", &meta_headers(META_SECRET, &overlap), &overlap)
        .await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    assert_eq!(ack["events"][0]["duplicate"], true);
    assert_eq!(ack["events"][1]["duplicate"], false);
    assert_eq!(events_of(&app, "meta-ads").await.len(), 5);

    // Tampered, or signed with another secret: nothing stored.
    let mut tampered = overlap.clone();
    tampered[20] ^= 1;
    for (headers, body) in [
        (meta_headers(META_SECRET, &overlap), tampered),
        (
            meta_headers("not-the-app-secret-000", &overlap),
            overlap.clone(),
        ),
    ] {
        let response = app.post_webhook("meta-ads", &headers, &body).await;
        assert_problem(response, 401, "/problems/invalid-signature").await;
    }
    // A hostile batch over the cap is refused whole.
    let many = meta_body(vec![entry(
        (0..1001).map(|n| leadgen(&format!("9{n}"), "f3")).collect(),
    )]);
    let response = app
        .post_webhook("meta-ads", &meta_headers(META_SECRET, &many), &many)
        .await;
    assert_problem(response, 422, "/problems/validation").await;
    assert_eq!(events_of(&app, "meta-ads").await.len(), 5);

    // Each lead keyed by its leadgen_id; its fields come from the Graph API,
    // not from the webhook.
    for stored in events_of(&app, "meta-ads").await {
        let expected = if stored.event_type.as_deref() == Some("feed") {
            "skipped"
        } else {
            "processed"
        };
        let done = app.wait_for_state(stored.id, expected).await;
        assert_eq!(done.state, expected);
    }
    for leadgen_id in ["444", "445", "446", "447"] {
        let lead = app.lead_by_ref(leadgen_id).await;
        assert_eq!(lead.source, "meta-ads");
        assert_eq!(lead.email, None);
    }
    let lead = app.lead_by_ref("446").await;
    assert_eq!(lead.payload["form_id"], "f2");
    assert_eq!(app.count(lead::Entity).await, 4);
}

async fn handshake(app: &TestApp, source: &str, query: &str) -> reqwest::Response {
    app.client
        .get(app.url(&format!("/webhooks/{source}?{query}")))
        .send()
        .await
        .unwrap()
}

async fn meta_handshake_answers_only_the_stored_verify_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    meta_source(&app).await;
    let admin = app.admin_token().await;

    // As Meta verifies a callback URL.
    let ok = format!("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token={VERIFY_TOKEN}");
    let response = handshake(&app, "meta-ads", &ok).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert_eq!(response.text().await.unwrap(), "1158201444");

    // A wrong token, another mode, no token, a name nobody configured, or a
    // source of another scheme: one answer for all.
    let hmac = app
        .api(&admin)
        .create_source(&json!({"name": "other", "scheme": "hmac-sha256",
            "secrets": ["sixteen-byte-key"]}))
        .await;
    assert_eq!(hmac.status(), 201);
    for (source, query) in [
        (
            "meta-ads",
            "hub.mode=subscribe&hub.challenge=1&hub.verify_token=meta-verify-token-43".to_owned(),
        ),
        (
            "meta-ads",
            format!("hub.mode=unsubscribe&hub.challenge=1&hub.verify_token={VERIFY_TOKEN}"),
        ),
        ("meta-ads", "hub.mode=subscribe&hub.challenge=1".to_owned()),
        ("nobody", ok.clone()),
        ("other", ok.clone()),
    ] {
        let response = handshake(&app, source, &query).await;
        let problem = assert_problem(response, 403, "/problems/forbidden").await;
        assert!(!problem.to_string().contains(VERIFY_TOKEN), "{problem}");
    }

    // The token is write-only, and a change that leaves it out keeps it.
    let shown = body_of(app.api(&admin).source("meta-ads").await).await;
    assert_eq!(shown["verify_token_set"], true);
    assert!(!shown.to_string().contains(VERIFY_TOKEN), "{shown}");
    let changed = app
        .api(&admin)
        .patch_source("meta-ads", &json!({"tolerance_secs": 600}))
        .await;
    assert_eq!(changed.status(), 200);
    assert_eq!(handshake(&app, "meta-ads", &ok).await.status(), 200);
    let replaced = app
        .api(&admin)
        .patch_source("meta-ads", &json!({"verify_token": "a-new-verify-token"}))
        .await;
    assert_eq!(replaced.status(), 200);
    assert_eq!(handshake(&app, "meta-ads", &ok).await.status(), 403);
    let new = "hub.mode=subscribe&hub.challenge=77&hub.verify_token=a-new-verify-token";
    let response = handshake(&app, "meta-ads", new).await;
    assert_eq!(response.text().await.unwrap(), "77");
    // A token only means something to Meta's scheme.
    let refused = app
        .api(&admin)
        .patch_source("other", &json!({"verify_token": "x-verify-token"}))
        .await;
    assert_problem(refused, 422, "/problems/validation").await;
    // The token is stored sealed, as the secrets are.
    let row = domain::entities::source::Entity::find_by_id("meta-ads".to_owned())
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    let stored = row.verify_token.unwrap();
    assert!(!stored.contains("a-new-verify-token"), "{stored}");

    // From the command line, the token from the environment (not argv).
    let added = app
        .cli_with_server_key()
        .args([
            "source",
            "add",
            "--name",
            "meta-cli",
            "--scheme",
            "meta-lead-ads",
        ])
        .args(["--secret-env", "META_APP_SECRET"])
        .env("META_APP_SECRET", META_SECRET)
        .env("LEADPIPE_VERIFY_TOKEN", "cli-verify-token")
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", output_text(&added));
    assert!(!output_text(&added).contains("cli-verify-token"));
    let by_cli = "hub.mode=subscribe&hub.challenge=5&hub.verify_token=cli-verify-token";
    let response = handshake(&app, "meta-cli", by_cli).await;
    assert_eq!(response.text().await.unwrap(), "5");
    // Another scheme has no handshake: the token goes with the old scheme.
    let moved = app
        .api(&admin)
        .patch_source(
            "meta-cli",
            &json!({"scheme": "github", "secrets": ["sixteen-byte-key"]}),
        )
        .await;
    assert_eq!(moved.status(), 200);
    let moved = body_of(moved).await;
    assert_eq!(moved["verify_token_set"], false, "{moved}");
    assert_eq!(moved["events_pointer"], Value::Null, "{moved}");
    assert_eq!(handshake(&app, "meta-cli", by_cli).await.status(), 403);
    assert_eq!(app.count(inbox_event::Entity).await, 0);
}

const HUBSPOT_SECRET: &str = "hubspot-client-secret-0123";
const PUBLIC_URL: &str = "https://hooks.example.com/crm";

/// As HubSpot signs (v3, "Validating requests"): base64 of the HMAC-SHA256,
/// keyed with the app's client secret, of method + URI + body + timestamp,
/// the URI the full URL it called and the timestamp (ms) in
/// `X-HubSpot-Request-Timestamp`.
fn hubspot_headers(secret: &str, uri: &str, body: &[u8], millis: i64) -> Headers {
    use base64::Engine;
    let timestamp = millis.to_string();
    let mac = hmac_of(
        secret,
        &[b"POST", uri.as_bytes(), body, timestamp.as_bytes()],
    );
    let signature = base64::engine::general_purpose::STANDARD.encode(mac);
    vec![
        ("X-HubSpot-Signature-v3".into(), signature),
        ("X-HubSpot-Request-Timestamp".into(), timestamp),
        ("content-type".into(), "application/json".into()),
    ]
}

fn hubspot_event(event_id: i64, object_id: i64, kind: &str) -> Value {
    json!({"eventId": event_id, "subscriptionId": 1, "portalId": 62515,
           "occurredAt": 1_700_000_000_000i64, "subscriptionType": kind,
           "attemptNumber": 0, "objectId": object_id, "changeSource": "CRM"})
}

async fn hubspot_v3_events_signed_over_the_public_url_become_leads_once(backend: Backend) {
    // Without the public URL a hubspot-v3 source could verify nothing.
    let bare = TestApp::spawn(backend).await;
    let admin = bare.admin_token().await;
    let refused = bare
        .api(&admin)
        .create_source(&json!({"name": "hubspot", "scheme": "hubspot-v3",
            "secrets": [HUBSPOT_SECRET]}))
        .await;
    let problem = assert_problem(refused, 422, "/problems/validation").await;
    assert!(
        problem.to_string().contains("LEADPIPE_PUBLIC_URL"),
        "{problem}"
    );
    let hmac = bare
        .api(&admin)
        .create_source(&json!({"name": "crm", "scheme": "hmac-sha256",
            "secrets": [HUBSPOT_SECRET]}))
        .await;
    assert_eq!(hmac.status(), 201);
    let refused = bare
        .api(&admin)
        .patch_source(
            "crm",
            &json!({"scheme": "hubspot-v3", "secrets": [HUBSPOT_SECRET]}),
        )
        .await;
    assert_problem(refused, 422, "/problems/validation").await;
    drop(bare);

    let mut http = HttpSettings::for_tests();
    http.public_url = Some(PUBLIC_URL.into());
    let mut app = TestApp::spawn_with(backend, http).await;
    app.start_workers(workers::WorkerSettings::for_tests());
    let admin = app.admin_token().await;
    let created = app
        .api(&admin)
        .create_source(&json!({"name": "hubspot", "scheme": "hubspot-v3",
            "secrets": [HUBSPOT_SECRET]}))
        .await;
    assert_eq!(created.status(), 201);
    let shown = body_of(created).await;
    assert_eq!(shown["events_pointer"], "/*");
    assert_eq!(shown["event_id_pointer"], "/eventId");
    assert_eq!(shown["source_ref_pointer"], "/objectId");

    let body = serde_json::to_vec(&json!([
        hubspot_event(100, 123, "contact.creation"),
        hubspot_event(101, 124, "contact.creation"),
    ]))
    .unwrap();
    // HubSpot called the public URL, with the query it was given; the
    // signature covers both.
    let called = format!("{PUBLIC_URL}/webhooks/hubspot?portal=62515");
    let millis = now() * 1000;
    let headers = hubspot_headers(HUBSPOT_SECRET, &called, &body, millis);
    let post = |headers: Headers, body: Vec<u8>| {
        let request = app
            .client
            .post(app.url("/webhooks/hubspot?portal=62515"))
            .body(body);
        let request = headers
            .into_iter()
            .fold(request, |r, (name, value)| r.header(name, value));
        async move { request.send().await.unwrap() }
    };
    let response = post(headers.clone(), body.clone()).await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    assert_eq!(ack["events"][0]["event_id"], "100");
    assert_eq!(ack["events"][1]["event_id"], "101");
    assert_eq!(ack["events"][0]["state"], "received");

    // HubSpot's retry of the same events, signed again: nothing new.
    let retried = hubspot_headers(HUBSPOT_SECRET, &called, &body, millis + 1000);
    let response = post(retried, body.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(body_of(response).await["events"][1]["duplicate"], true);

    // Older than five minutes, signed over the server's own address, or
    // over another query: refused, nothing stored.
    let stale = hubspot_headers(HUBSPOT_SECRET, &called, &body, millis - 301_000);
    let inner = hubspot_headers(
        HUBSPOT_SECRET,
        &app.url("/webhooks/hubspot?portal=62515"),
        &body,
        millis,
    );
    let other_query = hubspot_headers(
        HUBSPOT_SECRET,
        &format!("{PUBLIC_URL}/webhooks/hubspot?portal=1"),
        &body,
        millis,
    );
    for headers in [stale, inner, other_query] {
        let response = post(headers, body.clone()).await;
        assert_problem(response, 401, "/problems/invalid-signature").await;
    }
    assert_eq!(events_of(&app, "hubspot").await.len(), 2);

    for stored in events_of(&app, "hubspot").await {
        let done = app.wait_for_state(stored.id, "processed").await;
        assert_eq!(done.event_type.as_deref(), Some("contact.creation"));
    }
    let lead = app.lead_by_ref("124").await;
    assert_eq!(lead.source, "hubspot");
    assert_eq!(lead.payload["eventId"], 101);
    assert_eq!(app.count(lead::Entity).await, 2);
}
