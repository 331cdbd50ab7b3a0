//! What an attacker replaying captured deliveries, or a sender with a broken
//! clock, could do to a lead, through every door: a signed body replayed under
//! a fresh, unsigned event id; a `source_updated_at` far in the future or in
//! unix milliseconds; an import for a source nobody configured.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use domain::entities::inbox_event;
use leadpipe_tests::webhooks::{
    Headers, github_headers, hmac_base64_headers, now, standard_secret,
};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use serde_json::{Value, json};

on_both_backends!(
    github_body_replayed_under_a_new_delivery_id_cannot_roll_a_lead_back,
    unsigned_event_id_header_cannot_turn_a_replay_into_new_events,
    standard_webhooks_source_cannot_take_its_event_id_from_an_unsigned_header,
    intake_refuses_a_timestamp_in_the_future_and_keeps_the_lead,
    webhook_timestamps_in_milliseconds_are_read_and_future_ones_are_dead,
    import_refuses_future_rows_and_unconfigured_sources_for_ops,
);

const GITHUB_SECRET: &str = "gh-webhook-secret-0123456789";
const HMAC_SECRET: &str = "hmac-webhook-secret-0123456789";

/// Posts and returns (status, ack body).
async fn deliver(app: &TestApp, source: &str, headers: &Headers, body: &[u8]) -> (u16, Value) {
    let response = app.post_webhook(source, headers, body).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Creates a source as an admin and asserts it was created.
async fn create_source(app: &TestApp, config: Value) {
    let response = app
        .api(&app.admin_token().await)
        .create_source(&config)
        .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
}

fn github_record(name: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"lead": {"id": "gh-1", "name": name, "email": "ada@example.com"}}))
        .unwrap()
}

async fn github_body_replayed_under_a_new_delivery_id_cannot_roll_a_lead_back(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    create_source(
        &app,
        json!({"name": "gh", "scheme": "github", "secrets": [GITHUB_SECRET],
               "record_pointer": "/lead"}),
    )
    .await;

    let v1 = github_record("Old");
    let v2 = github_record("New");
    let (status, first) = deliver(
        &app,
        "gh",
        &github_headers(GITHUB_SECRET, "d-1", "lead", &v1),
        &v1,
    )
    .await;
    assert_eq!(status, 202);
    app.wait_for_state(first["id"].as_i64().unwrap(), "processed")
        .await;
    let (status, second) = deliver(
        &app,
        "gh",
        &github_headers(GITHUB_SECRET, "d-2", "lead", &v2),
        &v2,
    )
    .await;
    assert_eq!(status, 202);
    app.wait_for_state(second["id"].as_i64().unwrap(), "processed")
        .await;
    let before = app.find_lead_by_ref("gh-1").await.unwrap();
    assert_eq!(before.name.as_deref(), Some("New"));

    // The attacker re-posts v1's signed body under delivery ids of its own.
    for forged in ["d-attacker-1", "d-attacker-2"] {
        let (status, ack) = deliver(
            &app,
            "gh",
            &github_headers(GITHUB_SECRET, forged, "lead", &v1),
            &v1,
        )
        .await;
        assert_eq!(status, 200, "a replayed body is a duplicate: {ack}");
        assert_eq!(ack["duplicate"], true);
        assert_eq!(ack["id"], first["id"], "it answers with the original event");
    }
    // And without any delivery id at all.
    let mut bare = github_headers(GITHUB_SECRET, "unused", "lead", &v1);
    bare.retain(|(name, _)| !name.eq_ignore_ascii_case("x-github-delivery"));
    let (status, ack) = deliver(&app, "gh", &bare, &v1).await;
    assert_eq!(
        status, 200,
        "a replayed body without its id is a duplicate: {ack}"
    );
    assert_eq!(ack["id"], first["id"]);
    // GitHub's own redelivery (same id, same body) is still a duplicate too.
    let (status, ack) = deliver(
        &app,
        "gh",
        &github_headers(GITHUB_SECRET, "d-2", "lead", &v2),
        &v2,
    )
    .await;
    assert_eq!((status, ack["duplicate"].clone()), (200, json!(true)));

    // Time for a wrongly applied replay to land: nothing must change.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let after = app.find_lead_by_ref("gh-1").await.unwrap();
    assert_eq!(
        after.name.as_deref(),
        Some("New"),
        "the lead was rolled back"
    );
    assert_eq!(after.version, before.version);
    assert_eq!(app.count(inbox_event::Entity).await, 2);
    let original = app.inbox_event(first["id"].as_i64().unwrap()).await;
    assert_eq!(original.deliveries, 4);
}

async fn unsigned_event_id_header_cannot_turn_a_replay_into_new_events(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_source(
        &app,
        json!({"name": "ads", "scheme": "hmac-sha256", "secrets": [HMAC_SECRET],
               "event_id_header": "x-event-id", "record_pointer": ""}),
    )
    .await;
    let body = br#"{"id":"ad-1","name":"Old"}"#;
    let signed = |event_id: &str| {
        let mut headers = hmac_base64_headers(HMAC_SECRET, "x-signature", body);
        headers.push(("x-event-id".into(), event_id.into()));
        headers
    };
    let (status, first) = deliver(&app, "ads", &signed("evt-1"), body).await;
    assert_eq!((status, first["duplicate"].clone()), (202, json!(false)));
    for forged in ["evt-2", "evt-3", "evt-4"] {
        let (status, ack) = deliver(&app, "ads", &signed(forged), body).await;
        assert_eq!(status, 200, "{ack}");
        assert_eq!(ack["id"], first["id"]);
    }
    // The same signed body with its id header left out.
    let bare = hmac_base64_headers(HMAC_SECRET, "x-signature", body);
    let (status, ack) = deliver(&app, "ads", &bare, body).await;
    assert_eq!(
        (status, ack["id"].clone()),
        (200, first["id"].clone()),
        "{ack}"
    );
    assert_eq!(app.count(inbox_event::Entity).await, 1);

    // A body first delivered without an id is found by a later copy that
    // carries one.
    let unlabelled = br#"{"id":"ad-2","name":"Bare"}"#;
    let headers = hmac_base64_headers(HMAC_SECRET, "x-signature", unlabelled);
    let (status, first_bare) = deliver(&app, "ads", &headers, unlabelled).await;
    assert_eq!(status, 202, "{first_bare}");
    let mut labelled = hmac_base64_headers(HMAC_SECRET, "x-signature", unlabelled);
    labelled.push(("x-event-id".into(), "evt-9".into()));
    let (status, ack) = deliver(&app, "ads", &labelled, unlabelled).await;
    assert_eq!(
        (status, ack["id"].clone()),
        (200, first_bare["id"].clone()),
        "{ack}"
    );
    assert_eq!(app.count(inbox_event::Entity).await, 2);

    // A different body under a reused id is still the same event: the id
    // keeps deduplicating as it always did.
    let other = br#"{"id":"ad-1","name":"Other"}"#;
    let mut headers = hmac_base64_headers(HMAC_SECRET, "x-signature", other);
    headers.push(("x-event-id".into(), "evt-1".into()));
    let (status, ack) = deliver(&app, "ads", &headers, other).await;
    assert_eq!((status, ack["id"].clone()), (200, first["id"].clone()));
    assert_eq!(app.count(inbox_event::Entity).await, 2);
}

async fn standard_webhooks_source_cannot_take_its_event_id_from_an_unsigned_header(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let secret = standard_secret(b"partner-signing-key-0123456789");
    let response = app
        .api(&admin)
        .create_source(
            &json!({"name": "partner", "scheme": "standard-webhooks", "secrets": [secret],
                    "event_id_header": "x-event-id"}),
        )
        .await;
    let problem = assert_problem(response, 422, "/problems/validation").await;
    assert_eq!(
        problem["errors"][0]["field"], "event_id_header",
        "{problem}"
    );
    // The signed header itself, named explicitly, is fine.
    let response = app
        .api(&admin)
        .create_source(
            &json!({"name": "partner", "scheme": "standard-webhooks", "secrets": [secret],
                    "event_id_header": "Webhook-Id"}),
        )
        .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
}

async fn intake_refuses_a_timestamp_in_the_future_and_keeps_the_lead(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let now_rfc = chrono::Utc::now().to_rfc3339();
    let response = app
        .api(&intake)
        .create_lead(
            &json!({"source": "webform", "source_ref": "f-1", "name": "Ada",
                    "source_updated_at": now_rfc}),
        )
        .await;
    assert_eq!(response.status(), 201);

    for future in ["9999-12-31T00:00:00Z", "2100-01-01T00:00:00Z"] {
        let response = app
            .api(&intake)
            .create_lead(
                &json!({"source": "webform", "source_ref": "f-1", "name": "Mallory",
                        "source_updated_at": future}),
            )
            .await;
        let problem = assert_problem(response, 422, "/problems/validation").await;
        assert_eq!(
            problem["errors"][0]["field"], "source_updated_at",
            "{problem}"
        );
    }
    let stored = app.find_lead_by_ref("f-1").await.unwrap();
    assert_eq!(stored.name.as_deref(), Some("Ada"));
    assert_eq!(stored.version, 1);

    // A real later update is applied, not `stale`.
    let response = app
        .api(&intake)
        .create_lead(
            &json!({"source": "webform", "source_ref": "f-1", "name": "Ada L.",
                    "source_updated_at": chrono::Utc::now().to_rfc3339()}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["outcome"], "updated", "{body}");
}

async fn webhook_timestamps_in_milliseconds_are_read_and_future_ones_are_dead(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    create_source(
        &app,
        json!({"name": "ads", "scheme": "hmac-sha256", "secrets": [HMAC_SECRET],
               "record_pointer": ""}),
    )
    .await;

    let millis = now() * 1000 - 60_000;
    let body =
        serde_json::to_vec(&json!({"id": "ms-1", "name": "Ada", "updated_at": millis})).unwrap();
    let (status, ack) = deliver(
        &app,
        "ads",
        &hmac_base64_headers(HMAC_SECRET, "x-signature", &body),
        &body,
    )
    .await;
    assert_eq!(status, 202);
    app.wait_for_state(ack["id"].as_i64().unwrap(), "processed")
        .await;
    let stored = app.find_lead_by_ref("ms-1").await.unwrap();
    assert_eq!(
        stored.source_updated_at.unwrap().timestamp_millis(),
        millis,
        "milliseconds are not read as seconds"
    );

    let future = now() + 3600;
    let body = serde_json::to_vec(&json!({"id": "fut-1", "name": "Mallory", "updated_at": future}))
        .unwrap();
    let (status, ack) = deliver(
        &app,
        "ads",
        &hmac_base64_headers(HMAC_SECRET, "x-signature", &body),
        &body,
    )
    .await;
    assert_eq!(status, 202);
    let event = app
        .wait_for_state(ack["id"].as_i64().unwrap(), "dead")
        .await;
    assert_eq!(event.attempts, 1, "a permanent error is not retried");
    let error = event.last_error.unwrap_or_default();
    assert!(
        error.contains("source_updated_at") && error.contains("future"),
        "{error}"
    );
    assert!(app.find_lead_by_ref("fut-1").await.is_none());
}

async fn import_refuses_future_rows_and_unconfigured_sources_for_ops(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ops = app.token(Role::Ops, None).await;
    let admin = app.admin_token().await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let response = app
        .api(&intake)
        .create_lead(&json!({"source": "webform", "source_ref": "w-1", "name": "Ada"}))
        .await;
    assert_eq!(response.status(), 201);

    let upload = |token: &str, query: &'static str, csv: &'static str| {
        app.api(token).upload_import(query, "text/csv", csv)
    };
    let csv = "source_ref,name,source_updated_at\n\
               w-1,Mallory,9999-12-31T00:00:00Z\n\
               w-2,Bob,1700000000000\n";
    let response = upload(&ops, "source=webform", csv).await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
    let run: Value = response.json().await.unwrap();
    let location = format!("/api/imports/{}", run["id"]);
    let finished = app.run_ended(&ops, &location).await;
    assert_eq!(finished["state"], "done", "{finished}");
    assert_eq!(finished["rejected"], 1, "{finished}");
    assert_eq!(finished["created"], 1, "{finished}");

    let report = app
        .api(&ops)
        .get(&format!("{location}/report.csv"))
        .await
        .text()
        .await
        .unwrap();
    let refused = report
        .lines()
        .find(|l| l.contains("w-1"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        refused.contains("rejected") && refused.contains("future"),
        "{report}"
    );
    let kept = app.find_lead_by_ref("w-1").await.unwrap();
    assert_eq!(kept.name.as_deref(), Some("Ada"));
    assert_eq!(kept.source_updated_at, None);
    let bob = app.find_lead_by_ref("w-2").await.unwrap();
    assert_eq!(
        bob.source_updated_at.unwrap().timestamp_millis(),
        1_700_000_000_000
    );

    // Ops may not invent a source; an admin may.
    let response = upload(&ops, "source=typo-source", "source_ref\nx-1\n").await;
    let problem = assert_problem(response, 403, "/problems/forbidden").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("configured source"),
        "{problem}"
    );
    let response = upload(&admin, "source=typo-source", "source_ref\nx-1\n").await;
    assert_eq!(response.status(), 202);
}
