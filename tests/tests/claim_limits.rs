//! A claim takes at most the batch it asked for, even while other
//! transactions update the candidate rows. PostgreSQL re-checks a row that
//! changed after the statement's snapshot (EvalPlanQual) by running the
//! candidate subquery again, and with `LIMIT … FOR UPDATE SKIP LOCKED` each
//! run returns other rows: an `UPDATE … WHERE id IN (subquery)` claim then
//! took thousands of events at once (seen in `bench/run`: batches of 1,917
//! events with a limit of 100, claims of 50–110 s, processing stalled for a
//! minute).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use chrono::Utc;
use domain::inbound::inbox::batch::claim_batch;
use leadpipe_tests::{Backend, TestApp};
use sea_orm::ConnectionTrait;

const LIMIT: u64 = 10;

/// Joins PostgreSQL may choose for a small backlog's statistics: the
/// candidate subquery as the inner side of a nested loop, run again for
/// every outer row. Set on a new pool, as a database default.
async fn pool_with_nested_loops(app: &TestApp) -> sea_orm::DatabaseConnection {
    app.exec(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET enable_hashagg = off', current_database()); \
         EXECUTE format('ALTER DATABASE %I SET enable_hashjoin = off', current_database()); \
         EXECUTE format('ALTER DATABASE %I SET enable_mergejoin = off', current_database()); \
         EXECUTE format('ALTER DATABASE %I SET enable_material = off', current_database()); \
         EXECUTE format('ALTER DATABASE %I SET enable_sort = off', current_database()); END $$",
    )
    .await;
    sea_orm::Database::connect(&app.database_url).await.unwrap()
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
async fn an_inbox_claim_takes_at_most_its_batch_on_postgres() {
    if leadpipe_tests::postgres_skipped() {
        return;
    }
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
        count(
            &app,
            "SELECT count(*) AS n FROM inbox_event WHERE state = 'processing'"
        )
        .await,
        LIMIT as i64
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) AS n FROM inbox_event WHERE state = 'received'"
        )
        .await,
        290
    );
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    app.db
        .query_one_raw(sea_orm::Statement::from_string(
            app.db.get_database_backend(),
            sql,
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap()
}
