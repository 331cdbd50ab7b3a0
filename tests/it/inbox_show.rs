//! One inbox event as ops look at it, through `GET /api/ops/inbox/{id}`
//! and `leadpipe inbox show ID`: its payload and headers masked as log
//! lines are, how its delivery was verified, and what it became.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use leadpipe_tests::cli::output_text;
use leadpipe_tests::client::Answer;
use leadpipe_tests::webhooks::{ack_id, hmac_base64_headers, lead_event};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use serde_json::{Value, json};

on_both_backends!(
    one_event_shows_its_masked_payload_its_verification_and_its_lead,
    an_event_whose_id_is_not_signed_says_so,
);

async fn one_event_shows_its_masked_payload_its_verification_and_its_lead(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("webform").await;
    let ops = app.token(Role::Ops, None).await;
    let id = ack_id(
        app.post_standard(
            "webform",
            &key,
            "msg_1",
            &lead_event("form-1", "ada@example.com", "2026-11-30T10:00:00Z"),
        )
        .await,
    )
    .await;
    let event = app.wait_for_state(id, "processed").await;
    let lead_id = event.lead_id.unwrap();

    let shown = app
        .api(&ops)
        .get(&format!("/api/ops/inbox/{id}"))
        .await
        .expect(200)
        .await;
    assert_eq!(shown["body"]["data"]["email"], "***@example.com");
    assert_eq!(shown["body"]["data"]["id"], "form-1");
    assert_eq!(shown["body"]["data"]["name"], "Ada Lovelace");
    assert_eq!(shown["headers"]["webhook-id"], "msg_1");
    assert!(shown["headers"].get("webhook-signature").is_none());
    assert!(!shown.to_string().contains("ada@example.com"), "{shown}");
    assert_eq!(
        shown["verification"],
        json!({"signature": "verified", "event_id_signed": true})
    );
    assert_eq!(
        (&shown["state"], &shown["outcome"], &shown["lead_id"]),
        (&json!("processed"), &json!("created"), &json!(lead_id))
    );
    // The list shows no bodies and no verification.
    let list = app.api(&ops).get("/api/ops/inbox").await.expect(200).await;
    assert!(list["data"][0].get("verification").is_none(), "{list}");
    assert_problem(
        app.api(&ops)
            .get(&format!("/api/ops/inbox/{}", id + 100))
            .await,
        404,
        "/problems/not-found",
    )
    .await;

    // The command line shows the same.
    let output = app.run_cli(&["inbox", "show", &id.to_string()], &[]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("***@example.com"), "{text}");
    assert!(!text.contains("ada@example.com"), "{text}");
    assert!(
        text.contains("verification    verified; event id signed (header)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("lead_id         {lead_id}")),
        "{text}"
    );
    assert!(text.contains("outcome         created"), "{text}");
    assert!(text.contains("webhook-id: msg_1"), "{text}");

    let output = app.run_cli(&["inbox", "show", &id.to_string(), "-o", "json"], &[]);
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["body"], shown["body"]);
    assert_eq!(json["verification"], shown["verification"]);
    assert_eq!(json["lead_id"], lead_id);

    let output = app.run_cli(&["inbox", "show", &(id + 100).to_string()], &[]);
    assert_eq!(output.status.code(), Some(3), "{}", output_text(&output));
}

async fn an_event_whose_id_is_not_signed_says_so(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let secret = "partner-hmac-secret-0123456789";
    app.api(&admin)
        .create_source(&json!({"name": "partner", "scheme": "hmac-sha256",
            "secrets": [secret], "event_id_header": "x-event-id"}))
        .await
        .expect(201)
        .await;
    let body = lead_event("p-1", "grace@example.com", "2026-11-30T10:00:00Z");
    let mut headers = hmac_base64_headers(secret, "x-signature", &body);
    headers.push(("x-event-id".into(), "evt_1".into()));
    let id = ack_id(app.post_webhook("partner", &headers, &body).await).await;

    let shown = app
        .api(&admin)
        .get(&format!("/api/ops/inbox/{id}"))
        .await
        .expect(200)
        .await;
    assert_eq!(
        shown["verification"],
        json!({"signature": "verified", "event_id_signed": false})
    );
    assert_eq!(shown["event_id"], "evt_1");
    assert_eq!(shown["headers"]["x-event-id"], "evt_1");
    assert_eq!(shown["state"], "received");
    assert_eq!(shown["lead_id"], Value::Null);
    let output = app.run_cli(&["inbox", "show", &id.to_string()], &[]);
    let text = output_text(&output);
    assert!(
        text.contains("event id not signed: the body's hash backs it (header)"),
        "{text}"
    );
}
