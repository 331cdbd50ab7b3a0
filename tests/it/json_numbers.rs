//! Numbers in what senders send are kept exactly, digit for digit: a
//! 30-digit id, a decimal with more digits than a 64-bit float holds. They
//! were read as 64-bit floats, so two different large numeric ids became one
//! natural key (the second delivery overwrote the first lead) and payloads
//! came back rounded. A number written with an exponent is kept written out
//! in full, as PostgreSQL writes it, on both backends; one that would take
//! more than 400 digits to write out is refused (a few bytes of exponent
//! became hundreds of kilobytes in PostgreSQL).

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use domain::entities::{lead, outbox_event};
use leadpipe_tests::webhooks::ack_id;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::Value;
use workers::WorkerSettings;

on_both_backends!(
    two_large_numeric_ids_are_two_leads,
    a_payload_keeps_every_digit_at_every_read,
    an_exponent_is_written_out_so_a_resend_in_either_form_is_unchanged,
    a_number_too_long_to_write_out_is_a_422_and_changes_nothing,
    a_reconcile_run_keeps_a_pulled_record_with_a_huge_number_as_rejected,
    a_webhook_event_with_a_long_number_under_a_nul_key_dies_alone,
);

/// Posts `body` exactly as written (a `Value` literal could not hold it).
async fn post_raw(app: &TestApp, token: &str, body: &str) -> reqwest::Response {
    app.api(token)
        .request(reqwest::Method::POST, "/api/leads")
        .body("application/json", body.to_owned())
        .await
}

/// The `payload` of a JSON text, as text (numbers as they were written).
fn payload_text(document: &str) -> String {
    let value: Value = serde_json::from_str(document).unwrap();
    value["payload"].to_string()
}

async fn two_large_numeric_ids_are_two_leads(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    // The first two round to 1.2345678901234568e22 as 64-bit floats; the
    // third is keyed as it is stored, written out.
    let ids = [
        "12345678901234567890123",
        "12345678901234567890124",
        "4.20E1",
    ];
    for (n, id) in ids.iter().enumerate() {
        let body = format!(
            r#"{{"type": "lead.created", "data": {{"id": {id}, "email": "n{n}@example.com", "name": "Lead {n}"}}}}"#
        );
        ack_id(
            app.post_standard("webform", &key, &format!("msg_{n}"), body.as_bytes())
                .await,
        )
        .await;
    }
    let processor = app.processor(WorkerSettings::for_tests());
    assert_eq!(processor.drain_once().await.unwrap(), 3);

    assert_eq!(app.count(lead::Entity).await, 3);
    for (n, id) in ["12345678901234567890123", "12345678901234567890124", "42.0"]
        .iter()
        .enumerate()
    {
        let stored = app.lead_by_ref(id).await;
        assert_eq!(
            (stored.email.as_deref(), stored.version),
            (Some(format!("n{n}@example.com").as_str()), 1)
        );
        assert_eq!(stored.payload["id"].to_string(), *id);
    }
}

const EXACT: &str = r#"{"big": 123456789012345678901234567890, "negative": -98765432109876543210987, "price": 0.1000000000000000055511151231257827, "scaled": 1.50, "small": 7}"#;

async fn a_payload_keeps_every_digit_at_every_read(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let body = format!(r#"{{"source": "webform", "source_ref": "exact", "payload": {EXACT}}}"#);

    let response = post_raw(&app, &intake, &body).await;
    assert_eq!(response.status(), 201);
    let answer = response.text().await.unwrap();
    assert_eq!(payload_text(&answer), payload_text(&body), "the answer");

    let stored = app.lead_by_ref("exact").await;
    assert_eq!(
        stored.payload.to_string(),
        payload_text(&body),
        "the stored row"
    );
    let read = app
        .api(&sales)
        .get(&format!("/api/leads/{}", stored.id))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(payload_text(&read), payload_text(&body), "GET");

    let event = outbox_event::Entity::find()
        .filter(outbox_event::Column::LeadId.eq(stored.id))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        event.payload["payload"].to_string(),
        payload_text(&body),
        "the outbox event"
    );

    // The same text again: nothing changed.
    let again = post_raw(&app, &intake, &body).await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["outcome"], "unchanged", "{again}");
}

async fn an_exponent_is_written_out_so_a_resend_in_either_form_is_unchanged(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let post = |payload: &str| {
        format!(r#"{{"source": "webform", "source_ref": "exp", "payload": {payload}}}"#)
    };
    let sent = r#"{"a": 1.5E3, "b": 25e-3, "c": -0, "d": -0.0, "e": 1.0e+2, "f": 6.02214076e23, "g": 1e-5}"#;
    let written =
        r#"{"a":1500,"b":0.025,"c":0,"d":0.0,"e":100,"f":602214076000000000000000,"g":0.00001}"#;

    let response = post_raw(&app, &intake, &post(sent)).await;
    assert_eq!(response.status(), 201);
    assert_eq!(
        payload_text(&response.text().await.unwrap()),
        written,
        "the answer"
    );
    assert_eq!(app.lead_by_ref("exp").await.payload.to_string(), written);

    for again in [sent, written] {
        let response = post_raw(&app, &intake, &post(again)).await;
        assert_eq!(response.status(), 200, "{again}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["outcome"], "unchanged", "{again}: {answer}");
    }
}

async fn a_number_too_long_to_write_out_is_a_422_and_changes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let stored =
        r#"{"source": "webform", "source_ref": "kept", "name": "Kept", "payload": {"n": 1}}"#;
    assert_eq!(post_raw(&app, &intake, stored).await.status(), 201);

    let digits_401 = format!("1{}", "0".repeat(400));
    let digits_400 = format!("1{}", "0".repeat(399));
    for (payload, pointer) in [
        // PostgreSQL refused this one with a 500.
        (r#"{"n": 1e131072}"#.to_owned(), "/n"),
        (r#"{"deep": [1, {"n": 1e400}]}"#.to_owned(), "/deep/1/n"),
        (r#"{"tiny": 1e-400}"#.to_owned(), "/tiny"),
        (format!(r#"{{"long": {digits_401}}}"#), "/long"),
        (r#"{"n": 1e99999999999999999999}"#.to_owned(), "/n"),
    ] {
        for source_ref in ["new", "kept"] {
            let body = format!(
                r#"{{"source": "webform", "source_ref": "{source_ref}", "name": "Changed", "payload": {payload}}}"#
            );
            let problem = assert_problem(
                post_raw(&app, &intake, &body).await,
                422,
                "/problems/validation",
            )
            .await;
            assert_eq!(problem["errors"][0]["field"], "payload", "{problem}");
            let message = problem["errors"][0]["message"].as_str().unwrap();
            assert!(
                message.contains("400 digits") && message.ends_with(&format!("found at {pointer}")),
                "{payload}: {message}"
            );
        }
    }
    assert_eq!(app.count(lead::Entity).await, 1);
    let kept = app.lead_by_ref("kept").await;
    assert_eq!(
        (kept.name.as_deref(), kept.version, kept.payload.to_string()),
        (Some("Kept"), 1, r#"{"n":1}"#.to_owned())
    );

    // 400 digits are taken, as are the extremes of a 64-bit float.
    let body = format!(
        r#"{{"source": "webform", "source_ref": "edge", "payload": {{"long": {digits_400}, "max": 1.7976931348623157e308, "min": 5e-324}}}}"#
    );
    let response = post_raw(&app, &intake, &body).await;
    assert_eq!(response.status(), 201);
    let edge = app.lead_by_ref("edge").await;
    assert_eq!(edge.payload["long"].to_string(), digits_400);
    assert_eq!(
        edge.payload["max"].to_string(),
        format!("17976931348623157{}", "0".repeat(292))
    );
    assert_eq!(
        edge.payload["min"].to_string(),
        format!("0.{}5", "0".repeat(323))
    );
}

/// A pulled record with a number beyond the rule is rejected and kept for
/// ops, the number kept as the text it was sent as; the run ends `done`
/// with the other records written.
async fn a_reconcile_run_keeps_a_pulled_record_with_a_huge_number_as_rejected(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let huge: Value = serde_json::from_str("1e131072").unwrap();
    let (kept, mut shown) = app
        .reconcile_one_bad_record(|record| record["score"] = huge)
        .await;
    assert!(
        kept.reason.contains("payload") && kept.reason.contains("/score"),
        "{:?}",
        kept.reason
    );
    // serde_json writes the exponent `e+`.
    shown["score"] = serde_json::json!("1e+131072");
    assert_eq!(kept.record, shown);
}

/// A number too long to write out under a key holding a NUL: the event dies
/// alone with a reason PostgreSQL can store (the pointer writes the NUL as
/// `\u0000`), and the events delivered with it become leads.
async fn a_webhook_event_with_a_long_number_under_a_nul_key_dies_alone(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let mut good = Vec::new();
    for i in 0..2 {
        good.push(app.post_numbered_lead_event(&key, i).await);
    }
    let bad = br#"{"type": "lead.created", "data": {"id": "form-bad", "a\u0000": 1e400}}"#;
    let bad = ack_id(app.post_standard("webform", &key, "msg_bad", bad).await).await;

    let processor = app.processor(WorkerSettings::for_tests());
    assert_eq!(processor.drain_once().await.unwrap(), 3);
    for id in good {
        let event = app.inbox_event(id).await;
        assert_eq!(event.state, "processed", "{:?}", event.last_error);
    }
    let dead = app.inbox_event(bad).await;
    assert_eq!(dead.state, "dead");
    let reason = dead.last_error.unwrap();
    assert!(
        reason.contains("400 digits") && reason.contains("/a\\u0000"),
        "{reason}"
    );
    assert_eq!(app.count(lead::Entity).await, 2);
}
