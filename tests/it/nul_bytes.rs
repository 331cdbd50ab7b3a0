//! A NUL character (`\u0000`) in a record: PostgreSQL's `text` and `jsonb`
//! refuse it, SQLite stores it. Both backends answer alike: the record is
//! invalid (422 naming the field, or a dead inbox event with that reason),
//! and the valid records sharing its batch are written as usual.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use domain::entities::lead;
use leadpipe_tests::webhooks::{ack_id, now, stripe_headers};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use serde_json::{Value, json};
use workers::WorkerSettings;

on_both_backends!(
    a_posted_nul_is_a_422_and_its_concurrent_neighbours_are_written,
    a_webhook_event_with_a_nul_dies_alone_while_its_batch_becomes_leads,
    a_webhook_with_a_nul_in_its_type_is_received_as_untyped,
    a_nul_in_an_event_id_from_the_body_is_hashed_and_still_dedupes,
    a_reconcile_run_rejects_a_pulled_record_with_a_nul_and_writes_the_rest,
    a_nul_in_any_json_body_is_a_422_and_stores_nothing,
);

fn error_fields(body: &Value) -> Vec<&str> {
    body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect()
}

async fn a_posted_nul_is_a_422_and_its_concurrent_neighbours_are_written(backend: Backend) {
    // Group commit is on by default: concurrent posts share batches.
    let app = TestApp::spawn(backend).await;
    let token = app.token(Role::Intake, Some("webform")).await;
    let stored = json!({"source": "webform", "source_ref": "stored", "name": "Stored Name"});
    assert_eq!(app.api(&token).create_lead(&stored).await.status(), 201);

    let bad_name = json!({"source": "webform", "source_ref": "bad-name", "name": "a\u{0}b"});
    let bad_payload = json!({"source": "webform", "source_ref": "bad-payload",
                             "payload": {"note": "x\u{0}y"}});
    let bad_key = json!({"source": "webform", "source_ref": "bad-key",
                         "payload": {"nested": [{"k\u{0}": 1}]}});
    // An update of the stored lead that carries a NUL changes nothing.
    let bad_update = json!({"source": "webform", "source_ref": "stored", "name": "New\u{0}Name"});
    let bads = [bad_name, bad_payload, bad_key, bad_update];
    let goods: Vec<Value> = (0..24)
        .map(|i| {
            json!({"source": "webform", "source_ref": format!("good-{i}"), "name": "Ada",
                        "payload": {"i": i}})
        })
        .collect();
    // Bad records interleaved with good ones, all in flight at once.
    let mut bodies = goods.clone();
    for (n, bad) in bads.iter().enumerate() {
        bodies.insert(n * 6 + 3, bad.clone());
    }
    let responses =
        futures::future::join_all(bodies.iter().map(|b| app.api(&token).create_lead(b))).await;

    let mut problems = Vec::new();
    for (body, response) in bodies.iter().zip(responses) {
        if bads.contains(body) {
            problems.push(assert_problem(response, 422, "/problems/validation").await);
        } else {
            let status = response.status();
            let answer: Value = response.json().await.unwrap();
            assert_eq!(status, 201, "{body} -> {answer}");
            assert_eq!(answer["outcome"], "created", "{answer}");
        }
    }
    assert_eq!(error_fields(&problems[0]), ["name"]);
    assert_eq!(error_fields(&problems[1]), ["payload"]);
    assert_eq!(error_fields(&problems[2]), ["payload"]);
    assert_eq!(error_fields(&problems[3]), ["name"]);
    for problem in &problems {
        let message = problem["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("NUL"), "{problem}");
    }
    assert!(
        problems[1]["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("/note"),
        "names where in the payload: {}",
        problems[1]
    );

    assert_eq!(app.count(lead::Entity).await, 1 + 24);
    let kept = app.lead_by_ref("stored").await;
    assert_eq!(
        (kept.name.as_deref(), kept.version),
        (Some("Stored Name"), 1)
    );
    for i in [0, 11, 23] {
        let good = app.lead_by_ref(&format!("good-{i}")).await;
        assert_eq!(good.payload, json!({"i": i}));
    }
}

async fn a_webhook_event_with_a_nul_dies_alone_while_its_batch_becomes_leads(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(app.post_numbered_lead_event(&key, i).await);
    }
    // The receipt stores the raw bytes: the NUL is only met when mapped.
    let bad = serde_json::to_vec(&json!({
        "type": "lead.created",
        "data": {"id": "form-nul", "email": "nul@example.com", "name": "a\u{0}b",
                 "updated_at": "2026-11-30T10:00:00Z"}
    }))
    .unwrap();
    let bad_id = ack_id(app.post_standard("webform", &key, "msg_nul", &bad).await).await;

    let processor = app.processor(WorkerSettings::for_tests());
    assert_eq!(processor.drain_once().await.unwrap(), 6);

    for &id in &ids {
        let event = app.inbox_event(id).await;
        assert_eq!(event.state, "processed", "{:?}", event.last_error);
    }
    let dead = app.inbox_event(bad_id).await;
    assert_eq!((dead.state.as_str(), dead.attempts), ("dead", 1));
    let reason = dead.last_error.unwrap();
    assert!(
        reason.starts_with("invalid record: ") && reason.contains("name must not contain NUL"),
        "{reason}"
    );
    assert_eq!(app.count(lead::Entity).await, 5);
    assert_eq!(processor.drain_once().await.unwrap(), 0);
}

/// A NUL in what the inbox reads from a body at receipt (the event type or
/// id) makes that value absent, as a blank one is: the delivery is stored and
/// processed on both backends (PostgreSQL's `text` refused it: a 500).
async fn a_webhook_with_a_nul_in_its_type_is_received_as_untyped(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let body = serde_json::to_vec(&json!({
        "type": "lead.\u{0}created",
        "data": {"id": "form-type", "email": "ada@example.com", "name": "Ada",
                 "updated_at": "2026-11-30T10:00:00Z"}
    }))
    .unwrap();
    let id = ack_id(app.post_standard("webform", &key, "msg_type", &body).await).await;
    assert_eq!(app.inbox_event(id).await.event_type, None);

    let processor = app.processor(WorkerSettings::for_tests());
    assert_eq!(processor.drain_once().await.unwrap(), 1);
    let event = app.inbox_event(id).await;
    assert_eq!(event.state, "processed", "{:?}", event.last_error);
    assert_eq!(
        app.lead_by_ref("form-type").await.name.as_deref(),
        Some("Ada")
    );
}

/// An event id read from the body with a NUL in it is hashed, as an overlong
/// one is: the delivery is stored on both backends and a redelivery with the
/// same id is still a duplicate.
async fn a_nul_in_an_event_id_from_the_body_is_hashed_and_still_dedupes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let secret = "whsec_test_stripe_0123456789";
    let response = app
        .api(&app.admin_token().await)
        .create_source(
            &json!({"name": "stripe", "scheme": "stripe", "secrets": [secret],
                    "record_pointer": "/data/object"}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let delivery = |name: &str| {
        serde_json::to_vec(&json!({
            "id": "evt_\u{0}1", "type": "customer.created",
            "data": {"object": {"id": "cus_1", "name": name}}
        }))
        .unwrap()
    };
    let first = delivery("Jenny");
    let response = app
        .post_webhook("stripe", &stripe_headers(secret, now(), &first), &first)
        .await;
    let status = response.status();
    let ack: Value = response.json().await.unwrap();
    assert_eq!(status, 202, "{ack}");
    let event_id = ack["event_id"].as_str().unwrap();
    assert!(event_id.starts_with("sha256:"), "{ack}");

    // The same event id again, another body: a duplicate of the first.
    let again = delivery("Jenny Rosen");
    let response = app
        .post_webhook("stripe", &stripe_headers(secret, now(), &again), &again)
        .await;
    let status = response.status();
    let ack: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{ack}");
    assert_eq!(
        (ack["duplicate"].as_bool(), ack["event_id"].as_str()),
        (Some(true), Some(event_id))
    );
}

/// A pulled record with a NUL is rejected and kept for ops like any invalid
/// one (PostgreSQL failed the whole run: `jsonb` refuses NUL); the run ends
/// `done` with the other records written.
async fn a_reconcile_run_rejects_a_pulled_record_with_a_nul_and_writes_the_rest(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (kept, mut shown) = app
        .reconcile_one_bad_record(|record| record["name"] = json!("a\u{0}b"))
        .await;
    assert!(
        kept.reason.contains("name") && kept.reason.contains("NUL"),
        "{:?}",
        kept.reason
    );
    // Kept with the NUL shown as U+FFFD (PostgreSQL's `jsonb` refuses NUL).
    shown["name"] = json!("a\u{FFFD}b");
    assert_eq!(kept.record, shown);
}

/// Every JSON body is held to the same rule at the door: a NUL anywhere in a
/// key or string is a 422 naming the top-level field (PostgreSQL answered a
/// note, a contact or a company with a NUL with 500), and nothing is stored.
async fn a_nul_in_any_json_body_is_a_422_and_stores_nothing(backend: Backend) {
    use domain::entities::{activity, company, contact};

    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let created = app
        .api(&intake)
        .create_lead(&json!({"source": "webform", "source_ref": "n1", "name": "Ada"}))
        .await;
    assert_eq!(created.status(), 201);
    let id = app.lead_by_ref("n1").await.id;
    let notes_before = app.count(activity::Entity).await;

    let sales = app.api(&sales);
    let send = |method: reqwest::Method, path: String, body: Value, key: &'static str| {
        sales.request(method, &path).json(&body).key(key)
    };
    let cases = [
        (
            reqwest::Method::POST,
            format!("/api/leads/{id}/notes"),
            json!({"text": "call\u{0}back"}),
            "text",
            "nul-note",
        ),
        (
            reqwest::Method::POST,
            "/api/contacts".to_owned(),
            json!({"email": "zed@acme.example", "name": "Z\u{0}ed"}),
            "name",
            "nul-contact",
        ),
        (
            reqwest::Method::POST,
            "/api/companies".to_owned(),
            json!({"domain": "acme.example", "name": "Ac\u{0}me"}),
            "name",
            "nul-company",
        ),
    ];
    for (method, path, body, field, key) in cases {
        let response = send(method.clone(), path.clone(), body, key).await;
        let problem = assert_problem(response, 422, "/problems/validation").await;
        assert_eq!(
            error_fields(&problem),
            [field],
            "{method} {path}: {problem}"
        );
        let message = problem["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("NUL"), "{problem}");
    }
    assert_eq!(app.count(activity::Entity).await, notes_before);
    assert_eq!(app.count(contact::Entity).await, 0);
    assert_eq!(app.count(company::Entity).await, 0);
    assert_eq!(app.lead_by_ref("n1").await.name.as_deref(), Some("Ada"));

    // An escaped backslash before `u0000` is text, not a NUL.
    let literal = r#"{"text": "path C:\\u0000 is fine"}"#;
    let response = sales
        .request(reqwest::Method::POST, &format!("/api/leads/{id}/notes"))
        .body("application/json", literal)
        .key("literal-note")
        .await;
    assert_eq!(response.status(), 201);
    assert_eq!(app.count(activity::Entity).await, notes_before + 1);
}
