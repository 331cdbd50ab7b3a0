//! `POST /webhooks/{source}`: signatures, dedupe by event id, and processing
//! into leads by the real worker runtime, on SQLite and PostgreSQL.

#![allow(clippy::unwrap_used)]

use domain::entities::{activity, inbox_event, lead, outbox_event};
use leadpipe_tests::webhooks::{
    Headers, github_headers, hmac_base64_headers, lead_event, now, standard_headers,
    standard_secret, stripe_headers,
};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};

on_both_backends!(
    repeated_delivery_is_one_inbox_row_and_one_lead,
    concurrent_deliveries_of_one_event_store_one_row_and_answer_one_202,
    bad_or_stale_signatures_get_401_and_store_nothing,
    rotated_secret_is_accepted_and_a_retired_one_is_not,
    github_delivery_becomes_a_lead,
    stripe_delivery_becomes_a_lead,
    hmac_delivery_without_an_event_id_is_deduplicated_by_body_hash,
    webhook_update_leaves_the_human_owned_status_alone,
    event_type_outside_the_allow_list_is_skipped_with_200,
    unknown_source_answers_like_a_forged_signature_and_oversized_body_is_413,
    svix_header_names_are_one_event_with_the_webhook_names,
    typeform_response_signed_as_typeform_signs_becomes_a_lead_once,
    calendly_invitee_signed_as_calendly_signs_becomes_a_lead_once,
    slack_event_signed_as_slack_signs_becomes_a_lead_once_and_the_handshake_is_answered,
);

/// As Slack signs ("Verifying requests from Slack"): `v0=` and the hex
/// HMAC-SHA256 of `v0:{timestamp}:{body}` keyed with the signing secret,
/// the timestamp in `X-Slack-Request-Timestamp`.
fn slack_headers(secret: &str, timestamp: i64, body: &[u8]) -> Headers {
    let basestring = format!("v0:{timestamp}:");
    let signature = hex::encode(hmac_of(secret, &[basestring.as_bytes(), body]));
    vec![
        ("X-Slack-Request-Timestamp".into(), timestamp.to_string()),
        ("X-Slack-Signature".into(), format!("v0={signature}")),
        ("content-type".into(), "application/json".into()),
    ]
}

/// HMAC-SHA256 of the parts, keyed with the secret's text.
fn hmac_of(secret: &str, parts: &[&[u8]]) -> Vec<u8> {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// As Typeform signs (its "secure your webhooks" guide): `sha256=` and the
/// base64 of the HMAC-SHA256 of the body, keyed with the webhook's secret.
fn typeform_headers(secret: &str, body: &[u8]) -> Headers {
    use base64::Engine;
    let signature = base64::engine::general_purpose::STANDARD.encode(hmac_of(secret, &[body]));
    vec![
        ("Typeform-Signature".into(), format!("sha256={signature}")),
        ("content-type".into(), "application/json".into()),
    ]
}

/// As Calendly signs (its webhook signatures guide): `t=<unix>,v1=<hex>`,
/// the hex HMAC-SHA256 of `{t}.{body}` keyed with the signing key.
fn calendly_headers(key: &str, t: i64, body: &[u8]) -> Headers {
    let signature = hex::encode(hmac_of(key, &[t.to_string().as_bytes(), b".", body]));
    vec![
        (
            "Calendly-Webhook-Signature".into(),
            format!("t={t},v1={signature}"),
        ),
        ("content-type".into(), "application/json".into()),
    ]
}

async fn typeform_response_signed_as_typeform_signs_becomes_a_lead_once(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let admin = app.admin_token().await;
    let secret = "typeform-webhook-secret-0123";
    let created = app
        .api(&admin)
        .create_source(
            &json!({"name": "contact-form", "scheme": "typeform", "secrets": [secret],
            "record_pointer": "/form_response", "source_ref_pointer": "/token",
            "email_pointer": "/answers/0/email", "name_pointer": "/answers/1/text",
            "updated_at_pointer": "/submitted_at"}),
        )
        .await;
    assert_eq!(created.status(), 201);
    let created = body_of(created).await;
    assert_eq!(
        (&created["event_id_pointer"], &created["event_type_pointer"]),
        (&json!("/event_id"), &json!("/event_type"))
    );
    // A form response as Typeform sends it.
    let body = serde_json::to_vec(&json!({
        "event_id": "01HQZ8K9X4R2B7T3M5N6P8Q9R0",
        "event_type": "form_response",
        "form_response": {
            "form_id": "lT4Z3j",
            "token": "a3a12ec67a1365927098a606107fac15",
            "submitted_at": "2026-11-30T10:00:00Z",
            "answers": [
                {"type": "email", "email": "Ada@Example.com", "field": {"id": "f1", "type": "email"}},
                {"type": "text", "text": "Ada Lovelace", "field": {"id": "f2", "type": "short_text"}}
            ]
        }
    }))
    .unwrap();
    let headers = typeform_headers(secret, &body);
    let response = app.post_webhook("contact-form", &headers, &body).await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    assert_eq!(ack["event_id"], "01HQZ8K9X4R2B7T3M5N6P8Q9R0");
    let id = ack["id"].as_i64().unwrap();

    // Typeform retries the same body: one event.
    let again = app.post_webhook("contact-form", &headers, &body).await;
    assert_eq!(again.status(), 200);
    assert_eq!(body_of(again).await["duplicate"], true);
    // Tampered, unsigned or signed with another secret: 401.
    let mut tampered = body.clone();
    tampered[30] ^= 1;
    let cases = [
        (headers.clone(), tampered),
        (
            typeform_headers("another-secret-entirely-0", &body),
            body.clone(),
        ),
        (vec![], body.clone()),
    ];
    for (headers, body) in cases {
        let response = app.post_webhook("contact-form", &headers, &body).await;
        assert_eq!(response.status(), 401);
    }

    let event = app.wait_for_state(id, "processed").await;
    assert_eq!(event.outcome.as_deref(), Some("created"));
    assert_eq!(event.event_type.as_deref(), Some("form_response"));
    let lead = app.lead_by_ref("a3a12ec67a1365927098a606107fac15").await;
    assert_eq!(lead.source, "contact-form");
    assert_eq!(lead.email.as_deref(), Some("ada@example.com"));
    assert_eq!(lead.name.as_deref(), Some("Ada Lovelace"));
    assert_eq!(app.count(inbox_event::Entity).await, 1);
}

async fn calendly_invitee_signed_as_calendly_signs_becomes_a_lead_once(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let admin = app.admin_token().await;
    let key = "calendly-signing-key-0123456";
    let created = app
        .api(&admin)
        .create_source(
            &json!({"name": "meetings", "scheme": "calendly", "secrets": [key],
            "record_pointer": "/payload", "source_ref_pointer": "/uri",
            "allowed_event_types": ["invitee.created"]}),
        )
        .await;
    assert_eq!(created.status(), 201);
    // An invitee.created event as Calendly sends it.
    let invitee = |event: &str| {
        serde_json::to_vec(&json!({
            "created_at": "2026-11-30T10:00:00.000000Z",
            "created_by": "https://api.calendly.com/users/AAAAAAAAAAAAAAAA",
            "event": event,
            "payload": {
                "uri": "https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAAAAAAAAAAAAAA",
                "email": "grace@example.com",
                "name": "Grace Hopper",
                "updated_at": "2026-11-30T10:00:00.000000Z",
                "status": "active"
            }
        }))
        .unwrap()
    };
    let body = invitee("invitee.created");
    let response = app
        .post_webhook("meetings", &calendly_headers(key, now(), &body), &body)
        .await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    assert!(
        ack["event_id"].as_str().unwrap().starts_with("sha256:"),
        "{ack}"
    );
    let id = ack["id"].as_i64().unwrap();

    // A retry, signed again later, is the same event: the signed body is its identity.
    let again = app
        .post_webhook("meetings", &calendly_headers(key, now() + 1, &body), &body)
        .await;
    assert_eq!(again.status(), 200);
    assert_eq!(body_of(again).await["id"], id);
    // Stale, from the future, or under another key: 401.
    for headers in [
        calendly_headers(key, now() - 600, &body),
        calendly_headers(key, now() + 600, &body),
        calendly_headers("another-signing-key-000000", now(), &body),
    ] {
        let response = app.post_webhook("meetings", &headers, &body).await;
        assert_eq!(response.status(), 401);
    }
    // Another event type is stored and skipped.
    let canceled = invitee("invitee.canceled");
    let response = app
        .post_webhook(
            "meetings",
            &calendly_headers(key, now(), &canceled),
            &canceled,
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(body_of(response).await["state"], "skipped");

    let event = app.wait_for_state(id, "processed").await;
    assert_eq!(event.outcome.as_deref(), Some("created"));
    let lead = app
        .lead_by_ref(
            "https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAAAAAAAAAAAAAA",
        )
        .await;
    assert_eq!(lead.email.as_deref(), Some("grace@example.com"));
    assert_eq!(lead.name.as_deref(), Some("Grace Hopper"));
}

/// Signs as Svix's libraries do (`svix` `Webhook.sign`): the secret after
/// `whsec_` is base64 of the key; `v1,` + base64 HMAC-SHA256 of
/// `{svix-id}.{svix-timestamp}.{body}`, sent as `svix-id`,
/// `svix-timestamp` and `svix-signature`.
fn svix_headers(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> Headers {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use hmac::{Hmac, KeyInit, Mac};
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).unwrap();
    mac.update(format!("{msg_id}.{timestamp}.").as_bytes());
    mac.update(body);
    let signature = STANDARD.encode(mac.finalize().into_bytes());
    vec![
        ("svix-id".into(), msg_id.into()),
        ("svix-timestamp".into(), timestamp.to_string()),
        ("svix-signature".into(), format!("v1,{signature}")),
        ("content-type".into(), "application/json".into()),
    ]
}

async fn svix_header_names_are_one_event_with_the_webhook_names(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("webform").await;
    let secret = standard_secret(&key);
    let body = lead_event("form-1", "ada@example.com", "2026-11-30T10:00:00Z");

    let svix = svix_headers(&secret, "msg_svix_1", now(), &body);
    let response = app.post_webhook("webform", &svix, &body).await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    assert_eq!(ack["event_id"], "msg_svix_1", "svix-id is the event id");
    let id = ack["id"].as_i64().unwrap();

    // The same message under the webhook-* names is the same event.
    let again = standard_headers(&key, "msg_svix_1", now(), &body);
    let response = app.post_webhook("webform", &again, &body).await;
    assert_eq!(response.status(), 200);
    let ack = body_of(response).await;
    assert_eq!(
        (ack["id"].as_i64(), &ack["duplicate"]),
        (Some(id), &json!(true))
    );

    // Forged or stale under Svix's names: 401, as under the others.
    let mut tampered = body.clone();
    tampered[20] ^= 1;
    let stale = svix_headers(&secret, "msg_svix_2", now() - 600, &body);
    for (case, headers, body) in [
        ("tampered", svix.clone(), tampered),
        ("stale", stale, body.clone()),
    ] {
        let response = app.post_webhook("webform", &headers, &body).await;
        assert_eq!(response.status(), 401, "{case}");
    }

    // Both sets: the webhook-* set counts; a right svix-signature does not
    // rescue a wrong webhook-signature.
    let other = lead_event("form-2", "bob@example.com", "2026-11-30T10:00:00Z");
    let mut both = svix_headers(&secret, "msg_svix_3", now(), &other);
    both.extend(standard_headers(
        b"not-the-key-at-all-000",
        "msg_std_3",
        now(),
        &other,
    ));
    let response = app.post_webhook("webform", &both, &other).await;
    assert_eq!(response.status(), 401);
    let mut both = svix_headers(&secret, "msg_svix_3", now(), &other);
    both.extend(standard_headers(&key, "msg_std_3", now(), &other));
    let response = app.post_webhook("webform", &both, &other).await;
    assert_eq!(response.status(), 202);
    assert_eq!(body_of(response).await["event_id"], "msg_std_3");

    let event = app.wait_for_state(id, "processed").await;
    assert_eq!(event.deliveries, 2);
    assert_eq!(event.outcome.as_deref(), Some("created"));
    assert_eq!(app.count(inbox_event::Entity).await, 2);
    // An unknown name answers Svix's names as it answers any others.
    let response = app.post_webhook("nobody", &svix, &body).await;
    assert_eq!(response.status(), 401);
}

async fn body_of(response: reqwest::Response) -> Value {
    response.json().await.unwrap()
}

async fn repeated_delivery_is_one_inbox_row_and_one_lead(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("webform").await;
    let body = lead_event("form-1", "Ada@Example.com", "2026-11-30T10:00:00Z");
    let headers = standard_headers(&key, "msg_1", now(), &body);

    let mut first = headers.clone();
    first.push(("x-request-id".into(), "req-webhook-1".into()));
    let response = app.post_webhook("webform", &first, &body).await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    assert_eq!(ack["event_id"], "msg_1");
    assert_eq!(ack["state"], "received");
    assert_eq!(ack["duplicate"], false);
    let id = ack["id"].as_i64().unwrap();

    // Redelivered: the same signed request, and a re-signed later attempt.
    for retry in [
        headers.clone(),
        standard_headers(&key, "msg_1", now(), &body),
    ] {
        let response = app.post_webhook("webform", &retry, &body).await;
        assert_eq!(response.status(), 200);
        let ack = body_of(response).await;
        assert_eq!(ack["id"], id, "a duplicate answers with the original id");
        assert_eq!(ack["duplicate"], true);
    }

    let event = app.wait_for_state(id, "processed").await;
    assert_eq!(event.deliveries, 3);
    assert_eq!(event.attempts, 1);
    assert_eq!(event.outcome.as_deref(), Some("created"));
    assert_eq!(event.correlation_id.as_deref(), Some("req-webhook-1"));
    assert_eq!(event.last_error, None);
    assert_eq!(app.count(inbox_event::Entity).await, 1);
    assert_eq!(app.count(lead::Entity).await, 1);
    assert_eq!(app.count(outbox_event::Entity).await, 1);

    let lead = app.lead_by_ref("form-1").await;
    assert_eq!(event.lead_id, Some(lead.id));
    assert_eq!(lead.source, "webform");
    assert_eq!(lead.email.as_deref(), Some("ada@example.com"));
    assert_eq!(lead.payload["company"], "Analytical Engines");
    let timeline = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(lead.id))
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].origin.as_deref(), Some("webhook"));
    // The correlation id travels from the request to the lead's timeline.
    assert_eq!(timeline[0].correlation_id.as_deref(), Some("req-webhook-1"));
}

async fn concurrent_deliveries_of_one_event_store_one_row_and_answer_one_202(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("ads").await;
    let body = lead_event("ad-7", "grace@example.com", "2026-11-30T10:00:00Z");
    let headers = standard_headers(&key, "msg_concurrent", now(), &body);

    let deliveries = (0..20).map(|_| async {
        let response = app.post_webhook("ads", &headers, &body).await;
        let status = response.status().as_u16();
        (status, body_of(response).await["id"].as_i64().unwrap())
    });
    let answers = futures::future::join_all(deliveries).await;

    let accepted = answers.iter().filter(|(status, _)| *status == 202).count();
    let duplicates = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!((accepted, duplicates), (1, 19), "{answers:?}");
    let id = answers[0].1;
    assert!(answers.iter().all(|(_, i)| *i == id), "{answers:?}");

    let event = app.wait_for_state(id, "processed").await;
    assert_eq!(event.deliveries, 20);
    assert_eq!(app.count(inbox_event::Entity).await, 1);
    assert_eq!(app.count(lead::Entity).await, 1);
}

async fn bad_or_stale_signatures_get_401_and_store_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let body = lead_event("form-1", "ada@example.com", "2026-11-30T10:00:00Z");
    let good = standard_headers(&key, "msg_1", now(), &body);
    let without =
        |name: &str| -> Headers { good.iter().filter(|(k, _)| k != name).cloned().collect() };

    let mut tampered = body.clone();
    tampered[20] ^= 1;
    let cases: Vec<(&str, Headers, Vec<u8>)> = vec![
        ("tampered body", good.clone(), tampered),
        (
            "wrong secret",
            standard_headers(b"some-other-key-entirely", "msg_1", now(), &body),
            body.clone(),
        ),
        (
            "ten minutes old",
            standard_headers(&key, "msg_1", now() - 600, &body),
            body.clone(),
        ),
        (
            "ten minutes ahead",
            standard_headers(&key, "msg_1", now() + 600, &body),
            body.clone(),
        ),
        ("no webhook-id", without("webhook-id"), body.clone()),
        (
            "no webhook-timestamp",
            without("webhook-timestamp"),
            body.clone(),
        ),
        (
            "no webhook-signature",
            without("webhook-signature"),
            body.clone(),
        ),
        ("no headers at all", vec![], body.clone()),
    ];
    for (case, headers, body) in cases {
        let response = app.post_webhook("webform", &headers, &body).await;
        assert_eq!(response.status(), 401, "{case}");
        let problem = assert_problem(response, 401, "/problems/invalid-signature").await;
        // One answer whatever the reason: the reason is in logs and metrics.
        assert_eq!(
            problem["detail"], "the webhook signature could not be verified",
            "{case}"
        );
    }
    assert_eq!(app.count(inbox_event::Entity).await, 0);
    assert_eq!(app.count(lead::Entity).await, 0);
}

async fn rotated_secret_is_accepted_and_a_retired_one_is_not(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let (old, new) = (
        b"old-signing-key-0001".as_slice(),
        b"new-signing-key-0002".as_slice(),
    );
    let source = |secrets: Vec<String>| json!({"name": "partner", "scheme": "standard-webhooks", "secrets": secrets});
    let created = app
        .api(&admin)
        .create_source(&source(vec![standard_secret(old)]))
        .await;
    assert_eq!(created.status(), 201);

    // Rotation, step 1: both secrets valid while the sender switches.
    let both = app
        .api(&admin)
        .patch_source(
            "partner",
            &json!({"secrets": [standard_secret(new), standard_secret(old)]}),
        )
        .await;
    assert_eq!(both.status(), 200);
    assert_eq!(body_of(both).await["secret_count"], 2);
    let body = lead_event("p-1", "a@example.com", "2026-11-30T10:00:00Z");
    for (key, msg) in [(old, "msg_old"), (new, "msg_new")] {
        let response = app.post_standard("partner", key, msg, &body).await;
        assert_eq!(response.status(), 202, "{msg}");
    }

    // Step 2: the old secret retired.
    let retired = app
        .api(&admin)
        .patch_source("partner", &json!({"secrets": [standard_secret(new)]}))
        .await;
    assert_eq!(retired.status(), 200);
    let response = app.post_standard("partner", old, "msg_old_2", &body).await;
    assert_problem(response, 401, "/problems/invalid-signature").await;
    let response = app.post_standard("partner", new, "msg_new_2", &body).await;
    assert_eq!(response.status(), 202);
    assert_eq!(app.count(inbox_event::Entity).await, 3);
}

async fn github_delivery_becomes_a_lead(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let response = app
        .api(&app.admin_token().await)
        .create_source(
            &json!({"name": "gh", "scheme": "github", "secrets": ["gh-secret-0123456789"],
                    "record_pointer": "/sender", "source_ref_pointer": "/id",
                    "name_pointer": "/login", "email_pointer": "/email",
                    "allowed_event_types": ["star"]}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let view = body_of(response).await;
    assert_eq!(view["event_id_header"], "x-github-delivery");
    assert_eq!(view["event_type_header"], "x-github-event");

    let body = br#"{"action":"created","sender":{"id":583231,"login":"octocat","email":"octo@github.com"}}"#;
    let headers = github_headers(
        "gh-secret-0123456789",
        "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "star",
        body,
    );
    let response = app.post_webhook("gh", &headers, body).await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    assert_eq!(ack["event_id"], "72d3162e-cc78-11e3-81ab-4c9367dc0958");

    let event = app
        .wait_for_state(ack["id"].as_i64().unwrap(), "processed")
        .await;
    assert_eq!(event.event_type.as_deref(), Some("star"));
    assert_eq!(event.event_id_from, "header");
    let lead = app.lead_by_ref("583231").await;
    assert_eq!(lead.name.as_deref(), Some("octocat"));
    assert_eq!(lead.email.as_deref(), Some("octo@github.com"));
    // Kept for ops, without the signature.
    assert_eq!(event.headers["x-github-event"], "star");
    assert!(event.headers.get("x-hub-signature-256").is_none());
}

async fn stripe_delivery_becomes_a_lead(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let secret = "whsec_test_stripe_0123456789";
    let response = app
        .api(&app.admin_token().await)
        .create_source(
            &json!({"name": "stripe", "scheme": "stripe", "secrets": [secret],
                    "record_pointer": "/data/object", "updated_at_pointer": "/created",
                    "allowed_event_types": ["customer.created", "customer.updated"]}),
        )
        .await;
    assert_eq!(response.status(), 201);

    let body = serde_json::to_vec(&json!({
        "id": "evt_1NlY3q2eZvKYlo2C",
        "object": "event",
        "type": "customer.created",
        "data": {"object": {"id": "cus_9s6XKzkNRiz8i3", "object": "customer",
                            "email": "jenny.rosen@example.com", "name": "Jenny Rosen",
                            "phone": "+1 (555) 010-9999", "created": 1700000000}}
    }))
    .unwrap();
    let response = app
        .post_webhook("stripe", &stripe_headers(secret, now(), &body), &body)
        .await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    // Stripe's event id is in the body.
    assert_eq!(ack["event_id"], "evt_1NlY3q2eZvKYlo2C");

    app.wait_for_state(ack["id"].as_i64().unwrap(), "processed")
        .await;
    let lead = app.lead_by_ref("cus_9s6XKzkNRiz8i3").await;
    assert_eq!(lead.phone.as_deref(), Some("+15550109999"));
    assert_eq!(lead.source_updated_at.unwrap().timestamp(), 1_700_000_000);
}

async fn hmac_delivery_without_an_event_id_is_deduplicated_by_body_hash(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let response = app
        .api(&app.admin_token().await).create_source(
            &json!({"name": "crm-sync", "scheme": "hmac-sha256", "secrets": ["shared-secret-0123456789"],
                    "signature_header": "X-Leadpipe-Signature", "record_pointer": ""}),
        )
        .await;
    assert_eq!(response.status(), 201);

    let body = br#"{"id":"c-42","email":"linus@example.com"}"#;
    let headers = hmac_base64_headers("shared-secret-0123456789", "X-Leadpipe-Signature", body);
    let first = app.post_webhook("crm-sync", &headers, body).await;
    assert_eq!(first.status(), 202);
    let first = body_of(first).await;
    assert!(
        first["event_id"].as_str().unwrap().starts_with("sha256:"),
        "{first}"
    );
    // No id header to strip: the same body is the same event.
    let again = app.post_webhook("crm-sync", &headers, body).await;
    assert_eq!(again.status(), 200);
    assert_eq!(body_of(again).await["id"], first["id"]);

    let event = app
        .wait_for_state(first["id"].as_i64().unwrap(), "processed")
        .await;
    assert_eq!(event.event_id_from, "hash");
    assert_eq!(
        app.lead_by_ref("c-42").await.email.as_deref(),
        Some("linus@example.com")
    );
}

async fn webhook_update_leaves_the_human_owned_status_alone(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("webform").await;
    let v1 = lead_event("form-9", "old@example.com", "2026-11-30T10:00:00Z");
    let ack = body_of(app.post_standard("webform", &key, "msg_v1", &v1).await).await;
    app.wait_for_state(ack["id"].as_i64().unwrap(), "processed")
        .await;
    let lead = app.lead_by_ref("form-9").await;
    // A salesperson works the lead (the sales API is another door).
    app.exec(&format!(
        "UPDATE lead SET status = 'contacted' WHERE id = {}",
        lead.id
    ))
    .await;

    let v2 = lead_event("form-9", "new@example.com", "2026-11-30T11:00:00Z");
    let ack = body_of(app.post_standard("webform", &key, "msg_v2", &v2).await).await;
    let event = app
        .wait_for_state(ack["id"].as_i64().unwrap(), "processed")
        .await;
    assert_eq!(event.outcome.as_deref(), Some("updated"));
    assert_eq!(event.lead_id, Some(lead.id));

    let updated = app.lead_by_ref("form-9").await;
    assert_eq!(updated.email.as_deref(), Some("new@example.com"));
    assert_eq!(updated.version, 2);
    assert_eq!(updated.status, "contacted");
}

async fn event_type_outside_the_allow_list_is_skipped_with_200(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = b"allow-list-key-0001";
    let response = app
        .api(&app.admin_token().await)
        .create_source(&json!({"name": "forms", "scheme": "standard-webhooks",
                    "secrets": [standard_secret(key)],
                    "allowed_event_types": ["lead.created"]}))
        .await;
    assert_eq!(response.status(), 201);

    let body = serde_json::to_vec(&json!({"type": "lead.deleted", "data": {"id": "f-1"}})).unwrap();
    let response = app.post_standard("forms", key, "msg_del", &body).await;
    assert_eq!(response.status(), 200);
    let ack = body_of(response).await;
    assert_eq!(ack["state"], "skipped");
    assert_eq!(ack["duplicate"], false);

    // An allowed one next to it is processed; the skipped one stays skipped.
    let allowed = lead_event("f-2", "x@example.com", "2026-11-30T10:00:00Z");
    let ok = body_of(app.post_standard("forms", key, "msg_ok", &allowed).await).await;
    app.wait_for_state(ok["id"].as_i64().unwrap(), "processed")
        .await;
    let skipped = app.inbox_event(ack["id"].as_i64().unwrap()).await;
    assert_eq!(skipped.state, "skipped");
    assert_eq!(skipped.event_type.as_deref(), Some("lead.deleted"));
    assert_eq!(app.count(lead::Entity).await, 1);
}

async fn unknown_source_answers_like_a_forged_signature_and_oversized_body_is_413(
    backend: Backend,
) {
    let mut http = api::config::HttpSettings::for_tests();
    http.max_body_bytes = 1024;
    let app = TestApp::spawn_with(backend, http).await;
    let key = app.standard_source("webform").await;
    let body = lead_event("form-1", "ada@example.com", "2026-11-30T10:00:00Z");

    // An attacker probing names: a configured source with a forged
    // signature, and names that are not configured, answer byte for byte
    // alike (status, headers that matter, body).
    let forged = app
        .post_standard("webform", b"not-the-key-0123456789", "msg_1", &body)
        .await;
    let forged = (
        forged.status(),
        forged.headers()["content-type"].clone(),
        forged.headers().get("www-authenticate").cloned(),
        forged.text().await.unwrap(),
    );
    assert_eq!(forged.0, 401);
    for name in ["nope", "Not A Source", "webform2"] {
        let response = app.post_standard(name, &key, "msg_1", &body).await;
        let answer = (
            response.status(),
            response.headers()["content-type"].clone(),
            response.headers().get("www-authenticate").cloned(),
            response.text().await.unwrap(),
        );
        assert_eq!(answer, forged, "{name}");
    }
    let problem: Value = serde_json::from_str(&forged.3).unwrap();
    assert_eq!(problem["type"], "/problems/invalid-signature");

    // Too large is too large, for a configured name and for any other.
    let big = serde_json::to_vec(&json!({"data": {"id": "x", "pad": "a".repeat(2000)}})).unwrap();
    for name in ["webform", "nope"] {
        let response = app.post_standard(name, &key, "msg_big", &big).await;
        assert_problem(response, 413, "/problems/payload-too-large").await;
    }
    assert_eq!(app.count(inbox_event::Entity).await, 0);
}

async fn slack_event_signed_as_slack_signs_becomes_a_lead_once_and_the_handshake_is_answered(
    backend: Backend,
) {
    let app = TestApp::spawn_with_workers(backend).await;
    let admin = app.admin_token().await;
    let secret = "8f742231b10e8888abcd99yyyzzz85a5";
    let created = app
        .api(&admin)
        .create_source(
            &json!({"name": "slack-leads", "scheme": "slack", "secrets": [secret],
            "record_pointer": "/event/metadata/event_payload", "source_ref_pointer": "/id"}),
        )
        .await;
    assert_eq!(created.status(), 201);

    // Saving the Events API request URL: Slack's signed handshake.
    let handshake = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let response = app
        .post_webhook(
            "slack-leads",
            &slack_headers(secret, now(), handshake),
            handshake,
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        body_of(response).await,
        json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
    );
    // Unsigned, or to a name nobody configured: no challenge answered.
    for (name, headers) in [
        (
            "slack-leads",
            slack_headers("not-the-signing-secret-00", now(), handshake),
        ),
        ("nobody", slack_headers(secret, now(), handshake)),
    ] {
        let response = app.post_webhook(name, &headers, handshake).await;
        assert_eq!(response.status(), 401, "{name}");
    }
    assert_eq!(
        app.count(inbox_event::Entity).await,
        0,
        "a handshake is not stored"
    );

    // An event callback, as Slack sends it.
    let body = serde_json::to_vec(&json!({
        "token": "XXYYZZ",
        "team_id": "T123ABC456",
        "api_app_id": "A123ABC456",
        "type": "event_callback",
        "event_id": "Ev08MFMKH6",
        "event_time": 1_764_500_000,
        "event": {
            "type": "message",
            "channel": "C2147483705",
            "ts": "1764500000.000100",
            "text": "New lead",
            "metadata": {
                "event_type": "lead_created",
                "event_payload": {"id": "slack-lead-1", "email": "Grace@Example.com", "name": "Grace Hopper"}
            }
        }
    }))
    .unwrap();
    let response = app
        .post_webhook("slack-leads", &slack_headers(secret, now(), &body), &body)
        .await;
    assert_eq!(response.status(), 202);
    let ack = body_of(response).await;
    assert_eq!(ack["event_id"], "Ev08MFMKH6");
    let id = ack["id"].as_i64().unwrap();
    // Slack's retry (X-Slack-Retry-Num), signed again: the same event.
    let mut retry = slack_headers(secret, now() + 1, &body);
    retry.push(("X-Slack-Retry-Num".into(), "1".into()));
    let response = app.post_webhook("slack-leads", &retry, &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(body_of(response).await["id"], id);
    // Stale or tampered: 401.
    let mut tampered = body.clone();
    tampered[12] ^= 1;
    for (headers, body) in [
        (slack_headers(secret, now() - 600, &body), body.clone()),
        (slack_headers(secret, now(), &body), tampered),
    ] {
        let response = app.post_webhook("slack-leads", &headers, &body).await;
        assert_eq!(response.status(), 401);
    }

    let event = app.wait_for_state(id, "processed").await;
    assert_eq!(event.event_type.as_deref(), Some("message"));
    assert_eq!(event.outcome.as_deref(), Some("created"));
    let lead = app.lead_by_ref("slack-lead-1").await;
    assert_eq!(lead.email.as_deref(), Some("grace@example.com"));
    assert_eq!(app.count(inbox_event::Entity).await, 1);
}
