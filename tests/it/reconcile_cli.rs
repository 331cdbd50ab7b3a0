//! `leadpipe reconcile` as ops run it: a process of its own on the app's
//! database, reading the same reconcile settings as `serve` and `work`.

#![allow(clippy::unwrap_used)]

use api::cli::demo::fake_source::{Failure, FakeSource};
use domain::entities::{lead, reconcile_run};
use leadpipe_tests::cli::output_text;
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;

on_both_backends!(
    the_command_creates_what_the_webhooks_missed,
    the_command_reads_the_reconcile_settings_from_the_environment,
    a_lease_too_short_for_the_timeout_is_refused_before_a_run_starts,
);

/// The fake's loopback server is an internal address: allowed explicitly,
/// as an operator would.
const ALLOW: (&str, &str) = ("LEADPIPE_OUTBOUND_ALLOW", "127.0.0.1");

async fn pull_source(app: &TestApp, name: &str, fake: &FakeSource) {
    app.standard_source(name).await;
    let response = app
        .api(&app.admin_token().await)
        .patch_source(
            name,
            &json!({"pull_url": fake.pull_url, "pull_page_size": 10}),
        )
        .await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

async fn leads_of(app: &TestApp, source: &str) -> u64 {
    lead::Entity::find()
        .filter(lead::Column::Source.eq(source))
        .count(&app.db)
        .await
        .unwrap()
}

async fn the_command_creates_what_the_webhooks_missed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(12).await.unwrap();
    pull_source(&app, "partner", &fake).await;

    let output = app.run_cli(
        &["reconcile", "--source", "partner", "--no-progress"],
        &[ALLOW],
    );
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("state      done"), "{text}");
    assert!(text.contains("created    12"), "{text}");
    assert_eq!(leads_of(&app, "partner").await, 12);
    let run = reconcile_run::Entity::find()
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((run.trigger.as_str(), run.created), ("cli", 12));

    // Again: everything is there already.
    let output = app.run_cli(
        &["reconcile", "--source", "partner", "--no-progress"],
        &[ALLOW],
    );
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("created    0"), "{text}");
    assert_eq!(leads_of(&app, "partner").await, 12);
}

async fn the_command_reads_the_reconcile_settings_from_the_environment(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(5).await.unwrap();
    pull_source(&app, "flaky", &fake).await;
    fake.fail(Some(Failure {
        from_seq: 0,
        status: 503,
        times: None,
    }));

    // One attempt a page, as the environment says (the default is six).
    let output = app.run_cli(
        &["reconcile", "--source", "flaky", "--no-progress"],
        &[
            ALLOW,
            ("LEADPIPE_RECONCILE_MAX_ATTEMPTS", "1"),
            ("LEADPIPE_RETRY_BASE", "10ms"),
        ],
    );
    let text = output_text(&output);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("state      failed"), "{text}");
    assert_eq!(fake.requests().len(), 1, "{:?}", fake.requests());
    assert_eq!(leads_of(&app, "flaky").await, 0);

    // The same settings in the environment do not trouble the other
    // reconcile command, which reads none of them.
    let output = app.run_cli(
        &["reconcile", "retry-rejected", "--source", "flaky"],
        &[ALLOW, ("LEADPIPE_RECONCILE_MAX_ATTEMPTS", "1")],
    );
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("0 rejected record(s) retried"), "{text}");
}

async fn a_lease_too_short_for_the_timeout_is_refused_before_a_run_starts(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(3).await.unwrap();
    pull_source(&app, "partner", &fake).await;

    let output = app.run_cli(
        &["reconcile", "--source", "partner", "--no-progress"],
        &[
            ALLOW,
            ("LEADPIPE_RECONCILE_TIMEOUT", "30s"),
            ("LEADPIPE_RECONCILE_LEASE", "45s"),
        ],
    );
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the reconcile lease must be more than twice the request timeout"),
        "{text}"
    );
    assert_eq!(app.count(reconcile_run::Entity).await, 0);
    assert!(fake.requests().is_empty());
    assert_eq!(leads_of(&app, "partner").await, 0);
}
