//! Lead processing as batched jobs: a failing lead retries and dies alone
//! while its batch is processed, visible to ops; two workers share one
//! backlog without processing a lead twice; a failed lead's retry is taken
//! by the lead drain once it is due, with no job queued for it; a written
//! lead (intake, a sales edit, a retried reconcile record, another
//! process's write) wakes the lead drain without waiting for a poll.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;
use domain::auth::Role;
use domain::entities::{activity, lead, lead_processing_failure};
use domain::lifecycle::lead_status::LeadStatus;
use leadpipe_tests::poison::{cure_lead_processing, poison_lead_processing};
use leadpipe_tests::reconcile::{crm_with_one_broken_email, map_crm_email_from};
use leadpipe_tests::webhooks::{RunningWorkers, woken_only_settings};
use leadpipe_tests::{Backend, TestApp, eventually, on_both_backends};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Statement};
use serde_json::{Value, json};
use workers::WorkerSettings;
use workers::lead_processor::LeadProcessor;

on_both_backends!(
    a_failing_lead_retries_then_dies_alone_while_its_batch_is_processed,
    two_workers_drain_one_lead_backlog_processing_each_lead_once,
    a_failed_leads_retry_is_taken_by_the_lead_drain_once_due,
    a_written_lead_wakes_the_lead_drain_without_polling,
    a_rejected_record_applied_by_a_retry_wakes_the_lead_drain,
);

async fn unprocessed(app: &TestApp) -> Vec<String> {
    lead::Entity::find()
        .all(&app.db)
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.processed_version < l.version)
        .map(|l| l.source_ref)
        .collect()
}

async fn lead_processing_stats(app: &TestApp) -> Value {
    let ops = app.token(Role::Ops, None).await;
    let response = app.api(&ops).get("/api/ops/stats").await;
    assert_eq!(response.status(), 200);
    let stats: Value = response.json().await.unwrap();
    stats["lead_processing"].clone()
}

async fn a_failing_lead_retries_then_dies_alone_while_its_batch_is_processed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    poison_lead_processing(&app, "form-bad").await;
    app.post_leads((0..9).map(|i| {
        if i == 4 {
            "form-bad".to_owned()
        } else {
            format!("form-{i}")
        }
    }))
    .await;

    // Driven by hand, one batch per call, as a woken worker does.
    let mut settings = WorkerSettings::for_tests();
    settings.retry.max_attempts = 2;
    let processor = LeadProcessor::new(app.db.clone(), settings);
    assert_eq!(processor.drain_once().await.unwrap(), 9);
    assert_eq!(unprocessed(&app).await, ["form-bad"]);

    let bad = app.lead_by_ref("form-bad").await;
    let failed = lead_processing_failure::Entity::find_by_id(bad.id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((failed.state.as_str(), failed.attempts), ("failed", 1));
    assert!(failed.last_error.contains("poisoned lead"), "{failed:?}");
    let stats = lead_processing_stats(&app).await;
    assert_eq!(
        (&stats["backlog"], &stats["failed"], &stats["dead"]),
        (&json!(1), &json!(1), &json!(0)),
        "{stats}"
    );
    // Not taken again before it is due.
    let due = failed.next_attempt_at.unwrap();
    if due > Utc::now() + chrono::Duration::milliseconds(20) {
        assert_eq!(processor.drain_once().await.unwrap(), 0);
    }

    // Its retry: the last attempt, so it is dead with its reason.
    let wait = (due - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait + Duration::from_millis(20)).await;
    assert_eq!(processor.drain_once().await.unwrap(), 1);
    let dead = lead_processing_failure::Entity::find_by_id(bad.id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((dead.state.as_str(), dead.attempts), ("dead", 2));
    assert!(
        dead.last_error.starts_with("gave up after 2 attempts: ")
            && dead.last_error.contains("poisoned lead"),
        "{}",
        dead.last_error
    );
    // Given up: out of the backlog, counted dead, never taken again.
    assert_eq!(processor.drain_once().await.unwrap(), 0);
    let stats = lead_processing_stats(&app).await;
    assert_eq!(
        (&stats["backlog"], &stats["failed"], &stats["dead"]),
        (&json!(0), &json!(0), &json!(1)),
        "{stats}"
    );
    eventually(
        "the dead lead in the metrics",
        Duration::from_secs(5),
        async || {
            app.metrics()
                .await
                .lines()
                .any(|l| l == "leadpipe_lead_processing_failures{state=\"dead\"} 1")
        },
    )
    .await;
}

async fn two_workers_drain_one_lead_backlog_processing_each_lead_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let staff = [
        app.token(Role::Sales, None).await,
        app.token(Role::Sales, None).await,
    ];
    assert_eq!(staff.len(), 2);
    app.post_leads((0..120).map(|i| format!("form-{i}"))).await;

    // Two worker runtimes (as two processes would), small batches, so their
    // claims interleave.
    let mut settings = WorkerSettings::for_tests();
    settings.batch_size = 7;
    let first = RunningWorkers::start(app.db.clone(), settings.clone());
    let second = RunningWorkers::start(app.db.clone(), settings);
    eventually(
        "every lead processed",
        Duration::from_secs(30),
        async || unprocessed(&app).await.is_empty(),
    )
    .await;
    first.stop().await;
    second.stop().await;

    // Each lead was assigned once: one turn, one timeline entry, and the
    // turns alternate between the two sales staff.
    let assigned = activity::Entity::find()
        .filter(activity::Column::Kind.eq("assigned"))
        .all(&app.db)
        .await
        .unwrap();
    let mut per_lead: HashMap<i64, usize> = HashMap::new();
    for entry in &assigned {
        *per_lead.entry(entry.lead_id).or_default() += 1;
    }
    assert_eq!(per_lead.len(), 120);
    assert!(
        per_lead.values().all(|&n| n == 1),
        "a lead was processed twice"
    );
    let turn: i64 = app
        .db
        .query_one_raw(Statement::from_string(
            app.db.get_database_backend(),
            "SELECT turn FROM assignment_cursor WHERE pool = 'sales'",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get("", "turn")
        .unwrap();
    assert_eq!(turn, 120);
    let mut owners: HashMap<i64, usize> = HashMap::new();
    for lead in lead::Entity::find().all(&app.db).await.unwrap() {
        *owners.entry(lead.owner_id.unwrap()).or_default() += 1;
    }
    assert_eq!(owners.values().copied().collect::<Vec<_>>(), [60, 60]);
}

async fn a_failed_leads_retry_is_taken_by_the_lead_drain_once_due(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    poison_lead_processing(&app, "form-retry").await;
    // Retries come due within 200 ms; the poll finds them.
    app.start_workers(WorkerSettings::for_tests());
    app.post_leads(["form-retry".to_owned()]).await;
    let bad = app.lead_by_ref("form-retry").await;
    eventually(
        "the lead's processing failed",
        Duration::from_secs(10),
        async || {
            lead_processing_failure::Entity::find_by_id(bad.id)
                .one(&app.db)
                .await
                .unwrap()
                .is_some_and(|f| f.state == "failed")
        },
    )
    .await;
    // Nothing is written to the lead from here on: only its retry coming
    // due brings it back.
    cure_lead_processing(&app).await;
    eventually(
        "the retried lead was processed",
        Duration::from_secs(10),
        async || unprocessed(&app).await.is_empty(),
    )
    .await;
    let failure = lead_processing_failure::Entity::find_by_id(bad.id)
        .one(&app.db)
        .await
        .unwrap();
    assert_eq!(failure, None, "a processed lead keeps no failure");
    app.stop_workers().await;
}

async fn wait_processed(app: &TestApp, source_ref: &str, what: &str) {
    eventually(what, Duration::from_secs(5), async || {
        let lead = app.lead_by_ref(source_ref).await;
        lead.processed_version >= lead.version
    })
    .await;
}

/// Intake (group commit and keyed), a sales edit and, on PostgreSQL, a lead
/// written by another process each wake the lead drain: with the poll set
/// to minutes, nothing else would process the lead in time.
async fn a_written_lead_wakes_the_lead_drain_without_polling(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    app.start_workers(woken_only_settings());
    // The drain's first pass (at start) has found nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;

    app.post_leads(["wake-grouped".to_owned()]).await;
    wait_processed(
        &app,
        "wake-grouped",
        "the group-committed lead was processed",
    )
    .await;

    let intake = app.token(Role::Intake, Some("webform")).await;
    let keyed = app
        .api(&intake)
        .create_lead(
            &json!({"source": "webform", "source_ref": "wake-keyed", "email": "keyed@example.com"}),
        )
        .key("wake-keyed-1")
        .await;
    assert_eq!(keyed.status(), 201);
    wait_processed(&app, "wake-keyed", "the keyed lead was processed").await;

    let sales = app.token(Role::Sales, None).await;
    let lead = app.lead_by_ref("wake-keyed").await;
    let moved = app
        .api(&sales)
        .move_lead(lead.id, LeadStatus::Contacted, None)
        .await;
    assert_eq!(moved.status(), 200);
    assert!(app.lead_by_ref("wake-keyed").await.version > lead.version);
    wait_processed(&app, "wake-keyed", "the lead's new version was processed").await;

    if backend == Backend::Postgres {
        // This server announces what it wrote to other processes' drains.
        let mut listener = sea_orm::sqlx::postgres::PgListener::connect(&app.database_url)
            .await
            .unwrap();
        listener.listen(workers::wake::LEADS_CHANNEL).await.unwrap();
        app.post_leads(["wake-announced".to_owned()]).await;
        let notice = tokio::time::timeout(Duration::from_secs(5), listener.recv())
            .await
            .expect("no NOTIFY leadpipe_leads after an intake write")
            .unwrap();
        assert_eq!(notice.channel(), workers::wake::LEADS_CHANNEL);

        // A lead written by another process (no in-process signal) is
        // processed once that process announces it.
        let other = app.another_process().await;
        let record = serde_json::from_value(json!({
            "source": "webform", "source_ref": "wake-elsewhere", "email": "elsewhere@example.com"
        }))
        .unwrap();
        domain::lead::ingest::ingest(
            &other,
            record,
            domain::lead::ingest::Origin::Api,
            &Default::default(),
        )
        .await
        .unwrap();
        workers::wake::announce_once(&other, domain::store::Work::Leads).await;
        wait_processed(&app, "wake-elsewhere", "the notified lead was processed").await;
    }
    app.stop_workers().await;
}

/// An ops retry that applies a rejected reconcile record (after a mapping
/// fix) wakes the lead drain like any other write: with the poll set to
/// minutes, nothing else would process the lead in time.
async fn a_rejected_record_applied_by_a_retry_wakes_the_lead_drain(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    app.start_workers(woken_only_settings());
    let admin = app.admin_token().await;
    let ops = app.token(Role::Ops, None).await;
    let fake = crm_with_one_broken_email(&app, &admin, 2).await;
    let run = app.reconcile(&ops, "crm", json!({})).await;
    assert_eq!((run.created, run.rejected), (1, 1));
    wait_processed(
        &app,
        &fake.source_ref(0),
        "the reconciled lead was processed",
    )
    .await;

    map_crm_email_from(&app, &admin, &fake, "/contact_email").await;
    let retried = app.api(&ops).retry_rejected_records(&json!({})).await;
    assert_eq!(retried.status(), 200);
    assert_eq!(retried.json::<Value>().await.unwrap()["resolved"], 1);
    wait_processed(
        &app,
        &fake.source_ref(1),
        "the retried record's lead was processed",
    )
    .await;
    app.stop_workers().await;
    fake.stop().await;
}
