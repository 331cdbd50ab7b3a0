//! Pooled connections that broke while idle (the database restarted, an
//! administrator ended the sessions) are found and replaced: the group
//! committers' pools skip sqlx's ping before every acquire and ping only a
//! connection that sat idle for a second or more; the shared pool pings
//! before every acquire. A connection that broke just after its last use
//! fails its batch, which is then committed again on a fresh one.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use domain::auth::Role;
use leadpipe_tests::{Backend, TestApp};
use serde_json::json;

/// Every session of the service is ended behind its back; a second later
/// intake (the group committers' own pools) and reads (the main pool)
/// answer as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn connections_ended_while_idle_are_replaced_on_postgres() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let token = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let post = |n: u32| {
        let body = json!({"source": "webform", "source_ref": format!("idle-{n}"), "name": "Ada"});
        let (app, token) = (&app, &token);
        async move { app.api(token).create_lead(&body).await }
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

    let ended = end_sessions(&app).await;
    assert!(ended >= 2, "the pools had open sessions to end: {ended}");
    // Past the idle second after which a committer's pool pings a
    // connection: the passing time is what is tested.
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

/// Ends every session of the app's database but the caller's; how many.
async fn end_sessions(app: &TestApp) -> i64 {
    app.scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .await
}

/// Sessions ended right after intake used them (no idle time for the ping
/// before acquire to catch it): each post still answers 201 and is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn connections_ended_just_after_use_are_replaced_on_postgres() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let token = app.token(Role::Intake, Some("webform")).await;
    for n in 0..6 {
        let body = json!({"source": "webform", "source_ref": format!("busy-{n}"), "name": "Ada"});
        let response = app.api(&token).create_lead(&body).await;
        let status = response.status();
        let text = response.text().await.unwrap();
        assert_eq!(
            status, 201,
            "intake {n} right after the sessions ended: {text}"
        );
        // After sqlx's ping on release, well inside the idle second.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(end_sessions(&app).await >= 1, "intake's session was open");
    }
    assert_eq!(app.count(domain::entities::lead::Entity).await, 6);
}
