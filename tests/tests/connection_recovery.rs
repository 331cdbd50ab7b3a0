//! Pooled connections that broke while idle (the database restarted, an
//! administrator ended the sessions) are found and replaced: the group
//! committers' pools skip sqlx's ping before every acquire and ping only a
//! connection that sat idle for a second or more; the shared pool pings
//! before every acquire.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use domain::auth::Role;
use leadpipe_tests::{Backend, TestApp};
use sea_orm::ConnectionTrait;
use serde_json::json;

/// Every session of the service is ended behind its back; a second later
/// intake (the group committers' own pools) and reads (the main pool)
/// answer as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_ended_while_idle_are_replaced_on_postgres() {
    if leadpipe_tests::postgres_skipped() {
        return;
    }
    let app = TestApp::spawn(Backend::Postgres).await;
    let token = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let post = |n: u32| {
        let body = json!({"source": "webform", "source_ref": format!("idle-{n}"), "name": "Ada"});
        let (app, token) = (&app, &token);
        async move { app.post_lead(token, &body).await }
    };
    // Warm: the committer's and the main pool's connections are open.
    assert_eq!(post(0).await.status(), 201);
    let list = || async {
        app.client
            .get(app.url("/api/leads"))
            .bearer_auth(&sales)
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(list().await, 200);

    let ended = app
        .db
        .query_one_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap();
    assert!(ended >= 2, "the pools had open sessions to end: {ended}");
    tokio::time::sleep(Duration::from_millis(1_200)).await;

    for n in 1..=3 {
        assert_eq!(
            post(n).await.status(),
            201,
            "intake after the sessions ended"
        );
    }
    assert_eq!(list().await, 200, "a read after the sessions ended");
}
