//! Ops see lead processing that failed and send it back: a dead lead is
//! listed, retried once and processed once (its activities and outbox
//! events not doubled), also when retries race each other and the workers;
//! the same from the command line; only ops and admin may, and bad input
//! is a problem.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use domain::auth::Role;
use domain::entities::{activity, lead, lead_processing_failure, outbox_event};
use leadpipe_tests::poison::{cure_lead_processing, poison_lead_processing};
use leadpipe_tests::webhooks::RunningWorkers;
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter, Statement, TransactionTrait,
};
use serde_json::{Value, json};
use workers::WorkerSettings;
use workers::lead_processor::LeadProcessor;

on_both_backends!(
    a_dead_lead_is_listed_then_retried_once_without_doubling_its_events,
    the_command_line_lists_and_retries_dead_leads,
    only_ops_retry_and_bad_input_is_a_problem,
);

const FAILURES: &str = "/api/ops/lead-processing/failures";

/// Posts `good` healthy and `bad` poisoned leads and processes them by hand
/// with one attempt allowed: the poisoned ones end `dead`.
async fn with_dead_leads(app: &TestApp, good: usize, bad: usize) {
    // Someone to assign leads to, so processing writes activities and events.
    app.token(Role::Sales, None).await;
    poison_lead_processing(app, "bad-%").await;
    app.post_leads(
        (0..good)
            .map(|i| format!("good-{i}"))
            .chain((0..bad).map(|i| format!("bad-{i}"))),
    )
    .await;
    let mut settings = WorkerSettings::for_tests();
    settings.retry.max_attempts = 1;
    let processor = LeadProcessor::new(app.db.clone(), settings);
    assert_eq!(processor.drain_once().await.unwrap(), good + bad);
    let dead = lead_processing_failure::Entity::find()
        .filter(lead_processing_failure::Column::State.eq("dead"))
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(dead.len(), bad, "{dead:?}");
}

/// What processing left behind, per lead: (outbox events, activities).
async fn traces(app: &TestApp) -> HashMap<String, (usize, usize)> {
    let leads = lead::Entity::find().all(&app.db).await.unwrap();
    let events = outbox_event::Entity::find().all(&app.db).await.unwrap();
    let activities = activity::Entity::find().all(&app.db).await.unwrap();
    leads
        .into_iter()
        .map(|l| {
            let e = events.iter().filter(|e| e.lead_id == Some(l.id)).count();
            let a = activities.iter().filter(|a| a.lead_id == l.id).count();
            (l.source_ref, (e, a))
        })
        .collect()
}

async fn assert_problem(response: reqwest::Response, status: u16, what: &str) -> Value {
    assert_eq!(response.status(), status, "{what}");
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json",
        "{what}"
    );
    response.json().await.unwrap()
}

async fn a_dead_lead_is_listed_then_retried_once_without_doubling_its_events(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    with_dead_leads(&app, 1, 1).await;
    let bad = app.lead_by_ref("bad-0").await;
    let ops = app.token(Role::Ops, None).await;

    let response = app.api(&ops).get(&format!("{FAILURES}?state=dead")).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(
        !text.contains("example.com"),
        "personal data listed: {text}"
    );
    let page: Value = serde_json::from_str(&text).unwrap();
    let rows = page["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{page}");
    assert_eq!(
        (
            &rows[0]["lead_id"],
            &rows[0]["version"],
            &rows[0]["state"],
            &rows[0]["attempts"]
        ),
        (
            &json!(bad.id),
            &json!(bad.version),
            &json!("dead"),
            &json!(1)
        ),
        "{page}"
    );
    assert!(
        rows[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("poisoned lead"),
        "{page}"
    );
    assert!(page["next_cursor"].is_null());
    let failed: Value = app
        .api(&ops)
        .get(&format!("{FAILURES}?state=failed"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(failed["data"], json!([]));

    // Still poisoned: the retry fails again, says so, and the lead has a
    // fresh budget of attempts (failed, to be retried).
    let again: Value = app
        .api(&ops)
        .retry_lead_processing(&json!({"lead_id": bad.id}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        again,
        json!({"dry_run": false, "matched": 1, "retried": 1, "results": {"failed": 1}})
    );
    let listed: Value = app.api(&ops).get(FAILURES).await.json().await.unwrap();
    assert_eq!(
        (&listed["data"][0]["state"], &listed["data"][0]["attempts"]),
        (&json!("failed"), &json!(1)),
        "{listed}"
    );
    assert!(listed["data"][0]["next_attempt_at"].is_string(), "{listed}");

    cure_lead_processing(&app).await;
    let response = app
        .api(&ops)
        .retry_lead_processing(&json!({"lead_id": bad.id}))
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"dry_run": false, "matched": 1, "retried": 1, "results": {"processed": 1}})
    );
    let bad = app.lead_by_ref("bad-0").await;
    assert_eq!(bad.processed_version, bad.version);
    let listed: Value = app.api(&ops).get(FAILURES).await.json().await.unwrap();
    assert_eq!(listed["data"], json!([]));

    // Processed once: the retried lead left what a healthy one left.
    let traces = traces(&app).await;
    assert_eq!(traces["bad-0"], traces["good-0"], "{traces:?}");
    assert!(traces["good-0"].0 >= 2, "{traces:?}");

    // Nothing left to retry: a second retry, and the workers, do nothing.
    let response = app
        .api(&ops)
        .retry_lead_processing(&json!({"lead_id": bad.id}))
        .await;
    assert_problem(response, 409, "retrying a processed lead").await;
    assert_eq!(
        workers::lead_processor::run_once(&app.db, 10)
            .await
            .unwrap(),
        0
    );
    assert_eq!(traces, self::traces(&app).await);
}

fn json_lines(output: std::process::Output) -> Vec<Value> {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn the_command_line_lists_and_retries_dead_leads(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    with_dead_leads(&app, 1, 2).await;

    let listed = json_lines(
        app.cli()
            .args(["lead", "failures", "--state", "dead", "-o", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(
        listed.iter().all(|row| row["state"] == "dead"),
        "{listed:?}"
    );

    let counted = json_lines(
        app.cli()
            .args(["lead", "retry", "--dry-run", "-o", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        counted,
        [json!({"dry_run": true, "matched": 2, "retried": 0, "results": {}})]
    );

    cure_lead_processing(&app).await;
    let retried = json_lines(
        app.cli()
            .args(["lead", "retry", "--limit", "1", "-o", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        retried,
        [json!({"dry_run": false, "matched": 2, "retried": 1, "results": {"processed": 1}})]
    );
    let rest = app.cli().args(["lead", "retry"]).output().unwrap();
    assert!(rest.status.success());
    assert_eq!(
        String::from_utf8_lossy(&rest.stdout).trim(),
        "1 of 1 lead(s) processed again (processed 1)"
    );

    let traces = traces(&app).await;
    assert_eq!(traces["bad-0"], traces["good-0"], "{traces:?}");
    assert_eq!(traces["bad-1"], traces["good-0"], "{traces:?}");

    // One lead by id: none left to retry (exit 1 or more, a message).
    let bad = app.lead_by_ref("bad-0").await;
    let refused = app
        .cli()
        .args(["lead", "retry", &bad.id.to_string()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no failed or dead processing"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let missing = app
        .cli()
        .args(["lead", "retry", "999999"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no such lead"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

async fn only_ops_retry_and_bad_input_is_a_problem(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    with_dead_leads(&app, 0, 1).await;
    let bad = app.lead_by_ref("bad-0").await;

    for role in [Role::Intake, Role::Sales] {
        let source = (role == Role::Intake).then_some("webform");
        let token = app.token(role, source).await;
        assert_eq!(
            app.api(&token).get(FAILURES).await.status(),
            403,
            "{role:?}"
        );
        let response = app
            .api(&token)
            .retry_lead_processing(&json!({"lead_id": bad.id}))
            .await;
        assert_problem(response, 403, "a retry below ops").await;
    }
    let admin = app.token(Role::Admin, None).await;
    assert_eq!(app.api(&admin).get(FAILURES).await.status(), 200);

    let ops = app.token(Role::Ops, None).await;
    let response = app
        .api(&ops)
        .retry_lead_processing(&json!({"lead_id": 999_999}))
        .await;
    assert_problem(response, 404, "an unknown lead").await;
    let response = app
        .api(&ops)
        .get(&format!("{FAILURES}?state=processed"))
        .await;
    let problem = assert_problem(response, 422, "listing an unknown state").await;
    assert!(problem.to_string().contains("state"), "{problem}");
    for (body, field) in [
        (json!({"state": "processed"}), "state"),
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 1001}), "limit"),
        (json!({"lead_id": bad.id, "state": "dead"}), "lead_id"),
    ] {
        let response = app.api(&ops).retry_lead_processing(&body).await;
        let problem = assert_problem(response, 422, &body.to_string()).await;
        assert!(problem.to_string().contains(field), "{body}: {problem}");
    }
    let response = app
        .api(&ops)
        .retry_lead_processing(&json!({"lead": bad.id}))
        .await;
    assert!(
        response.status().is_client_error(),
        "an unknown field: {}",
        response.status()
    );
    // Nothing was retried by any of these.
    let listed: Value = app.api(&ops).get(FAILURES).await.json().await.unwrap();
    assert_eq!(listed["data"][0]["state"], "dead", "{listed}");
}

/// Bulk and single retries of the same dead leads at once, with two worker
/// runtimes running: every lead processed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn concurrent_retries_process_each_dead_lead_once_on_postgres() {
    let app = TestApp::spawn(Backend::Postgres).await;
    with_dead_leads(&app, 1, 30).await;
    cure_lead_processing(&app).await;
    let first = app.lead_by_ref("bad-0").await;
    let ops = app.token(Role::Ops, None).await;

    let workers = [
        RunningWorkers::start(app.db.clone(), WorkerSettings::for_tests()),
        RunningWorkers::start(app.db.clone(), WorkerSettings::for_tests()),
    ];
    let bulk = json!({"limit": 1000});
    let one = json!({"lead_id": first.id});
    let requests = (0..8).map(|i| if i % 2 == 0 { &bulk } else { &one });
    let responses =
        futures::future::join_all(requests.map(|body| app.api(&ops).retry_lead_processing(body)))
            .await;
    let mut retried = 0;
    for response in responses {
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        match status {
            200 => {
                let processed = body["results"]["processed"].as_u64().unwrap_or(0);
                assert_eq!(body["retried"].as_u64(), Some(processed), "{body}");
                retried += processed;
            }
            409 => {}
            other => panic!("{other}: {body}"),
        }
    }
    for running in workers {
        running.stop().await;
    }

    assert_eq!(retried, 30, "each dead lead retried once");
    assert_eq!(app.count(lead_processing_failure::Entity).await, 0);
    let traces = traces(&app).await;
    let healthy = traces["good-0"];
    assert!(
        traces.values().all(|t| *t == healthy),
        "a lead processed twice: {traces:?}"
    );
    let assigned = activity::Entity::find()
        .filter(activity::Column::Kind.eq("assigned"))
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(assigned.len(), 31);
}

/// A lead a worker holds in its batch (its row locked) is not taken by a
/// retry meanwhile: `409`, and the retry after the batch processes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn a_retry_skips_a_lead_a_worker_holds_on_postgres() {
    let app = TestApp::spawn(Backend::Postgres).await;
    with_dead_leads(&app, 1, 1).await;
    cure_lead_processing(&app).await;
    let bad = app.lead_by_ref("bad-0").await;
    let ops = app.token(Role::Ops, None).await;

    // As a worker's claim does, mid-batch.
    let batch = app.db.begin().await.unwrap();
    batch
        .execute_raw(Statement::from_string(
            DbBackend::Postgres,
            format!("SELECT id FROM lead WHERE id = {} FOR UPDATE", bad.id),
        ))
        .await
        .unwrap();
    // A retry that waited for the lock would hang here until the batch ends.
    let response = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        app.api(&ops)
            .retry_lead_processing(&json!({"lead_id": bad.id})),
    )
    .await
    .expect("the retry waited for the worker's lock");
    let problem = assert_problem(response, 409, "a retry of a held lead").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("being processed"),
        "{problem}"
    );
    let bulk: Value = app
        .api(&ops)
        .retry_lead_processing(&json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        bulk,
        json!({"dry_run": false, "matched": 1, "retried": 0, "results": {}})
    );
    batch.rollback().await.unwrap();

    let response = app
        .api(&ops)
        .retry_lead_processing(&json!({"lead_id": bad.id}))
        .await;
    assert_eq!(response.status(), 200);
    let traces = traces(&app).await;
    assert_eq!(traces["bad-0"], traces["good-0"], "{traces:?}");
}
