//! Inbox processing when things go wrong: permanent errors go `dead`,
//! transient ones are retried with backoff, events nothing woke a worker
//! for are found by the poll, and processing an event twice changes nothing.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use chrono::Utc;
use domain::entities::{activity, inbox_event, lead, outbox_event};
use domain::inbound::inbox::process::claim;
use domain::inbound::inbox::receive::{Delivery, receive};
use domain::lead::ingest::Outcome;
use leadpipe_tests::webhooks::{ack_id, lead_event, now, standard_headers, standard_secret};
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};
use workers::WorkerSettings;
use workers::inbox_job::Step;

on_both_backends!(
    bad_record_is_dead_until_the_mapping_is_fixed_and_the_event_retried,
    missing_source_ref_is_dead_with_its_reason,
    transient_failure_is_retried_with_backoff_then_succeeds,
    transient_failures_that_never_clear_end_dead_after_max_attempts,
    event_stored_without_a_wake_up_is_finished_by_the_poll,
    event_abandoned_mid_attempt_is_taken_over_after_its_lease,
    processing_an_event_twice_changes_nothing,
);

/// Makes every lead insert fail with a database error until `end_outage`.
async fn start_outage(app: &TestApp) {
    let statements: &[&str] = match app.backend {
        Backend::Sqlite => &[
            "CREATE TABLE chaos_outage (id INTEGER PRIMARY KEY)",
            "INSERT INTO chaos_outage VALUES (1)",
            "CREATE TRIGGER lead_outage BEFORE INSERT ON lead \
             WHEN EXISTS (SELECT 1 FROM chaos_outage) \
             BEGIN SELECT RAISE(ABORT, 'simulated outage'); END",
        ],
        Backend::Postgres => &[
            "CREATE TABLE chaos_outage (id int)",
            "INSERT INTO chaos_outage VALUES (1)",
            "CREATE FUNCTION lead_outage() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF EXISTS (SELECT 1 FROM chaos_outage) THEN \
             RAISE EXCEPTION 'simulated outage' USING ERRCODE = '08006'; END IF; \
             RETURN NEW; END $$",
            "CREATE TRIGGER lead_outage BEFORE INSERT ON lead \
             FOR EACH ROW EXECUTE FUNCTION lead_outage()",
        ],
    };
    for sql in statements {
        app.db.execute_unprepared(sql).await.unwrap();
    }
}

async fn end_outage(app: &TestApp) {
    app.exec("DELETE FROM chaos_outage").await;
}

async fn bad_record_is_dead_until_the_mapping_is_fixed_and_the_event_retried(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("partner").await;
    // This sender nests its record under /lead, not the default /data.
    let body = serde_json::to_vec(&json!({"type": "lead.created",
        "lead": {"id": "p-77", "email": "mary@example.com"}}))
    .unwrap();
    let id = ack_id(
        app.post_standard("partner", &key, "msg_nested", &body)
            .await,
    )
    .await;

    let dead = app.wait_for_state(id, "dead").await;
    assert_eq!(dead.attempts, 1, "permanent errors are not retried");
    assert_eq!(
        dead.last_error.as_deref(),
        Some(r#"mapping: no record at "/data""#)
    );
    assert_eq!(dead.next_attempt_at, None);
    assert_eq!(app.count(lead::Entity).await, 0);

    // Ops see it, the admin fixes the mapping (secrets kept), ops retry.
    let ops = app.token(domain::auth::Role::Ops, None).await;
    let listed: Value = app
        .api(&ops)
        .get("/api/ops/inbox?state=dead&source=partner")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["data"][0]["id"], id);
    assert_eq!(
        listed["data"][0]["last_error"],
        r#"mapping: no record at "/data""#
    );
    let fixed = app
        .api(&app.admin_token().await)
        .patch_source("partner", &json!({"record_pointer": "/lead"}))
        .await;
    assert_eq!(fixed.status(), 200);
    assert_eq!(fixed.json::<Value>().await.unwrap()["secret_count"], 1);

    let retry = app.api(&ops).retry_inbox_event(id).await;
    assert_eq!(retry.status(), 202);
    let processed = app.wait_for_state(id, "processed").await;
    assert_eq!(processed.retries, 1);
    assert_eq!(processed.attempts, 1);
    assert_eq!(processed.last_error, None);
    assert_eq!(processed.outcome.as_deref(), Some("created"));
    assert_eq!(app.count(lead::Entity).await, 1);

    // Retrying a processed event reprocesses the same row: still one lead.
    let again = app.api(&ops).retry_inbox_event(id).await;
    assert_eq!(again.status(), 202);
    let again = app
        .wait_for_event(id, "reprocessed", |e| {
            e.state == "processed" && e.retries == 2
        })
        .await;
    assert_eq!(again.outcome.as_deref(), Some("unchanged"));
    assert_eq!(again.lead_id, processed.lead_id);
    assert_eq!(app.count(lead::Entity).await, 1);
    assert_eq!(app.count(inbox_event::Entity).await, 1);
}

async fn missing_source_ref_is_dead_with_its_reason(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("webform").await;
    let body = serde_json::to_vec(&json!({"type": "lead.created",
        "data": {"email": "no-id@example.com"}}))
    .unwrap();
    let id = ack_id(app.post_standard("webform", &key, "msg_noid", &body).await).await;
    let dead = app.wait_for_state(id, "dead").await;
    assert_eq!(
        dead.last_error.as_deref(),
        Some("invalid record: source_ref is required")
    );
    assert_eq!(dead.attempts, 1);

    let body = serde_json::to_vec(&json!({"type": "lead.created",
        "data": {"id": "x-1", "email": "not an address"}}))
    .unwrap();
    let id = ack_id(
        app.post_standard("webform", &key, "msg_bad_email", &body)
            .await,
    )
    .await;
    let dead = app.wait_for_state(id, "dead").await;
    assert_eq!(
        dead.last_error.as_deref(),
        Some("invalid record: email must be an email address")
    );
    assert_eq!(app.count(lead::Entity).await, 0);
}

async fn transient_failure_is_retried_with_backoff_then_succeeds(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("webform").await;
    start_outage(&app).await;

    let body = lead_event("form-5", "ada@example.com", "2026-11-30T10:00:00Z");
    let id = ack_id(
        app.post_standard("webform", &key, "msg_outage", &body)
            .await,
    )
    .await;

    // The real retry path: failed with a due time, the next job runs after it.
    let failing = app
        .wait_for_event(id, "failed twice", |e| {
            e.state == "failed" && e.attempts >= 2
        })
        .await;
    let error = failing.last_error.clone().unwrap();
    assert!(error.contains("simulated outage"), "{error}");
    assert!(failing.next_attempt_at.is_some());
    assert_eq!(app.count(lead::Entity).await, 0);

    end_outage(&app).await;
    let done = app.wait_for_state(id, "processed").await;
    assert!(done.attempts >= 3, "attempts {}", done.attempts);
    assert_eq!(done.last_error, None);
    assert_eq!(done.next_attempt_at, None);
    assert_eq!(app.count(lead::Entity).await, 1);
    assert_eq!(app.count(outbox_event::Entity).await, 1);
}

async fn transient_failures_that_never_clear_end_dead_after_max_attempts(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    let mut settings = WorkerSettings::for_tests();
    settings.retry.max_attempts = 2;
    app.start_workers(settings);
    let key = app.standard_source("webform").await;
    start_outage(&app).await;

    let body = lead_event("form-6", "ada@example.com", "2026-11-30T10:00:00Z");
    let id = ack_id(app.post_standard("webform", &key, "msg_down", &body).await).await;
    let dead = app.wait_for_state(id, "dead").await;
    assert_eq!(dead.attempts, 2);
    let error = dead.last_error.unwrap();
    assert!(error.starts_with("gave up after 2 attempts: "), "{error}");
    assert!(error.contains("simulated outage"), "{error}");

    // Once the database is back, a retry by ops gets a fresh budget.
    end_outage(&app).await;
    let ops = app.token(domain::auth::Role::Ops, None).await;
    let retried = app
        .api(&ops)
        .retry_inbox_events(&json!({"state": "dead", "source": "webform"}))
        .await;
    assert_eq!(retried.status(), 200);
    let retried: Value = retried.json().await.unwrap();
    assert_eq!(
        (
            &retried["matched"],
            &retried["retried"],
            &retried["results"]
        ),
        (&json!(1), &json!(1), &json!({"processed": 1}))
    );
    app.wait_for_state(id, "processed").await;
}

async fn event_stored_without_a_wake_up_is_finished_by_the_poll(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let key = app.standard_source("webform").await;
    // Stored exactly as the receiver stores it, by the domain alone: the
    // row is the queue entry, whatever wakes the workers or not.
    let source =
        domain::inbound::source::find(&app.db, "webform", &domain::sealed::Keyring::for_tests())
            .await
            .unwrap()
            .unwrap();
    let body = lead_event("form-8", "ada@example.com", "2026-11-30T10:00:00Z");
    let headers = standard_headers(&key, "msg_stranded", now(), &body);
    let received = receive(
        &app.db,
        app.db.hasher(),
        &source,
        &Delivery {
            headers: &headers,
            body: &body,
            correlation_id: None,
            target: None,
        },
        Utc::now(),
    )
    .await
    .unwrap();
    assert!(received.needs_processing());

    let done = app.wait_for_state(received.id, "processed").await;
    assert_eq!(done.attempts, 1);
    assert_eq!(app.count(lead::Entity).await, 1);
}

async fn event_abandoned_mid_attempt_is_taken_over_after_its_lease(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let body = lead_event("form-10", "ada@example.com", "2026-11-30T10:00:00Z");
    let id = ack_id(
        app.post_standard("webform", &key, "msg_abandoned", &body)
            .await,
    )
    .await;
    // A worker claims it and dies before finishing.
    let lease = Duration::from_secs(2);
    let claimed = claim(&app.db, id, "worker-that-died", Utc::now(), lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.state, "processing");

    let mut settings = WorkerSettings::for_tests();
    settings.attempt_timeout = Duration::from_secs(1);
    settings.lease = lease;
    app.start_workers(settings);
    // The workers' first passes find the event held, and leave it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.inbox_event(id).await.state, "processing");

    let done = app.wait_for_state(id, "processed").await;
    assert_eq!(done.attempts, 2);
    assert_eq!(done.locked_by, None);
    assert_eq!(app.count(lead::Entity).await, 1);
}

async fn processing_an_event_twice_changes_nothing(backend: Backend) {
    // No worker runtime: attempts run synchronously, one per call.
    let app = TestApp::spawn(backend).await;
    let key = b"sync-key-00000001";
    let created = app
        .api(&app.admin_token().await)
        .create_source(&json!({"name": "webform", "scheme": "standard-webhooks",
                    "secrets": [standard_secret(key)]}))
        .await;
    assert_eq!(created.status(), 201);
    let body = lead_event("form-11", "ada@example.com", "2026-11-30T10:00:00Z");
    let id = ack_id(app.post_standard("webform", key, "msg_twice", &body).await).await;

    let processor = app.processor(WorkerSettings::for_tests());
    let first = processor.process(id).await.unwrap();
    let Step::Processed { outcome, lead_id } = first else {
        panic!("expected processed, got {first:?}")
    };
    assert_eq!(outcome, Outcome::Created);
    let counts = (
        app.count(lead::Entity).await,
        app.count(activity::Entity).await,
        app.count(outbox_event::Entity).await,
    );

    // A second attempt at the same event (an ops retry racing a worker)
    // finds it done.
    assert_eq!(processor.process(id).await.unwrap(), Step::NothingToDo);
    assert_eq!(
        (
            app.count(lead::Entity).await,
            app.count(activity::Entity).await,
            app.count(outbox_event::Entity).await,
        ),
        counts
    );
    assert_eq!(counts, (1, 1, 1));
    let event = app.inbox_event(id).await;
    assert_eq!((event.state.as_str(), event.attempts), ("processed", 1));
    assert_eq!(event.lead_id, lead_id);
}
