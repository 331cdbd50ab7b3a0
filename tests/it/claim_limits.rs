//! A claim takes at most the batch it asked for, whatever join PostgreSQL
//! picks. Written as `UPDATE … WHERE id IN (SELECT … LIMIT n FOR UPDATE
//! SKIP LOCKED)`, the candidate subquery may run again for every row of a
//! nested loop; each run skips the rows the statement already updated and
//! locks the next ones, so one claim took every ready event (seen in
//! `bench/run`: 1,917 events in a claim of 100 that ran for 110 s, and
//! processing stalled for a minute) and a publisher's claim of five took
//! all thirty due deliveries.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use chrono::Utc;
use domain::auth::Role;
use domain::inbound::inbox::batch::claim_batch;
use domain::outbound::delivery;
use leadpipe_tests::{Backend, TestApp};
use serde_json::json;

const LIMIT: u64 = 10;

/// Joins PostgreSQL may choose for a small backlog's statistics: the
/// candidate subquery as the inner side of a nested loop, run again for
/// every outer row. Set on a new pool, as a database default.
async fn pool_with_nested_loops(app: &TestApp) -> domain::store::Store {
    app.exec(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET enable_hashagg = off', current_database()); \
         EXECUTE format('ALTER DATABASE %I SET enable_hashjoin = off', current_database()); \
         EXECUTE format('ALTER DATABASE %I SET enable_mergejoin = off', current_database()); \
         EXECUTE format('ALTER DATABASE %I SET enable_material = off', current_database()); \
         EXECUTE format('ALTER DATABASE %I SET enable_sort = off', current_database()); END $$",
    )
    .await;
    app.db
        .with_pool(sea_orm::Database::connect(&app.database_url).await.unwrap())
}

async fn store_received(app: &TestApp, events: usize) {
    app.standard_source("webform").await;
    app.exec(&format!(
        "INSERT INTO inbox_event (source, event_id, event_id_from, headers, body, state, \
         deliveries, attempts, retries, received_at, last_delivery_at, updated_at) \
         SELECT 'webform', 'msg_' || g, 'header', '{{}}'::jsonb, '{{}}'::bytea, 'received', \
         1, 0, 0, now(), now(), now() FROM generate_series(1, {events}) g"
    ))
    .await;
}

/// A worker asks for ten of 300 ready events and gets ten, whatever join
/// PostgreSQL picks; the rest stay ready for other workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn an_inbox_claim_takes_at_most_its_batch_on_postgres() {
    let app = TestApp::spawn(Backend::Postgres).await;
    store_received(&app, 300).await;
    let db = pool_with_nested_loops(&app).await;

    let claimed = claim_batch(&db, "w1", Utc::now(), Duration::from_secs(600), LIMIT)
        .await
        .unwrap();
    assert_eq!(
        claimed.len() as u64,
        LIMIT,
        "events claimed with a limit of {LIMIT}"
    );
    let ids: Vec<i64> = claimed.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        (1..=LIMIT as i64).collect::<Vec<_>>(),
        "the oldest ten"
    );
    assert_eq!(
        app.scalar("SELECT count(*) FROM inbox_event WHERE state = 'processing'")
            .await,
        LIMIT as i64
    );
    assert_eq!(
        app.scalar("SELECT count(*) FROM inbox_event WHERE state = 'received'")
            .await,
        290
    );
}

/// A publisher asks for five of thirty due deliveries (thirty leads, one
/// subscription) and gets five: its in-flight limit is what it claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn a_delivery_claim_takes_at_most_its_limit_on_postgres() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let response = app
        .client
        .post(app.url("/api/subscriptions"))
        .bearer_auth(&admin)
        .json(&json!({"url": "https://hooks.example.com/leads", "event_types": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    for n in 0..30 {
        let body = json!({"source": "webform", "source_ref": format!("d-{n}"), "name": "Ada"});
        assert_eq!(app.api(&intake).create_lead(&body).await.status(), 201);
    }
    assert_eq!(delivery::fan_out(&app.db, 500).await.unwrap(), 30);
    let db = pool_with_nested_loops(&app).await;

    let claimed = delivery::claim_due(&db, 5, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 5, "deliveries claimed with a limit of 5");
    assert_eq!(
        app.scalar("SELECT count(*) FROM outbox_delivery WHERE state = 'delivering'")
            .await,
        5
    );
}
