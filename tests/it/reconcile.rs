//! Reconcile end to end: a fake sender with a pull API (a real HTTP server on
//! loopback), webhooks that lose some deliveries, and runs started over the
//! ops API, by the CLI's code path, and by cron.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use api::cli::demo::fake_source::{Failure, FakeSource};
use domain::auth::Role;
use domain::entities::{activity, lead, outbox_event, reconcile_run};
use domain::reconcile::run::{self as runs, StartRun, Trigger};
use leadpipe_tests::{Backend, TestApp, assert_problem, eventually, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};

on_both_backends!(
    dropped_webhooks_are_created_by_reconcile_and_counted_missed,
    a_record_changed_at_the_source_is_updated_and_human_fields_stay,
    a_failing_page_fails_the_run_and_the_next_run_resumes_there,
    a_failed_page_write_keeps_the_cursor_and_a_rerun_doubles_nothing,
    transient_page_errors_are_retried_until_the_page_arrives,
    two_concurrent_starts_give_one_run_and_one_409,
    a_keyed_start_replays_its_run_and_starts_nothing_more,
    a_dry_run_compares_and_writes_nothing,
    the_demo_puts_every_record_in_the_table_exactly_once,
    the_demo_reconciles_several_sources_at_once,
    pull_urls_to_internal_addresses_are_refused_unless_allow_listed,
    the_auth_value_is_sent_and_never_shown,
    roles_decide_who_may_reconcile,
    an_abandoned_run_is_failed_and_the_source_freed,
    a_run_that_lost_its_lease_writes_nothing,
    a_page_waits_for_the_write_turn_on_sqlite,
    cron_starts_one_run_per_tick_across_worker_processes,
);

const WAIT: Duration = Duration::from_secs(20);

/// A standard-webhooks source whose pull API is `fake`; returns the signing key.
async fn pull_source(app: &TestApp, name: &str, fake: &FakeSource, page_size: u32) -> Vec<u8> {
    let key = app.standard_source(name).await;
    let response = app
        .api(&app.admin_token().await)
        .patch_source(
            name,
            &json!({"pull_url": fake.pull_url, "pull_page_size": page_size}),
        )
        .await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    key
}

/// Delivers record `index` as the fake would, signed now.
async fn deliver(app: &TestApp, source: &str, key: &[u8], fake: &FakeSource, index: usize) {
    let (event_id, body) = fake.delivery(index);
    let response = app.post_standard(source, key, &event_id, &body).await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
}

async fn lead_count(app: &TestApp, source: &str) -> u64 {
    lead::Entity::find()
        .filter(lead::Column::Source.eq(source))
        .count(&app.db)
        .await
        .unwrap()
}

async fn wait_for_leads(app: &TestApp, source: &str, n: u64) {
    eventually(&format!("{n} leads of {source}"), WAIT, async || {
        lead_count(app, source).await >= n
    })
    .await;
}

async fn lead_by_ref(app: &TestApp, source: &str, source_ref: &str) -> Option<lead::Model> {
    lead::Entity::find()
        .filter(lead::Column::Source.eq(source))
        .filter(lead::Column::SourceRef.eq(source_ref))
        .one(&app.db)
        .await
        .unwrap()
}

/// Starts a run (`202`, `Location`) and returns it.
async fn started(app: &TestApp, token: &str, source: &str, body: Option<Value>) -> Value {
    let response = app.api(token).start_reconcile(source, body.as_ref()).await;
    let status = response.status();
    let location = response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned());
    let run: Value = response.json().await.unwrap();
    assert_eq!(status, 202, "{run}");
    assert_eq!(
        location.as_deref(),
        Some(format!("/api/ops/reconcile-runs/{}", run["id"]).as_str())
    );
    assert_eq!(run["state"], "running");
    run
}

/// Polls the run until it is no longer running.
async fn finished(app: &TestApp, token: &str, run: &Value) -> Value {
    app.reconcile_run_ended(token, &run["id"]).await
}

async fn reconcile(app: &TestApp, token: &str, source: &str, body: Option<Value>) -> Value {
    let run = started(app, token, source, body).await;
    finished(app, token, &run).await
}

fn counts(run: &Value) -> [i64; 7] {
    [
        "fetched",
        "created",
        "updated",
        "unchanged",
        "stale",
        "rejected",
        "missed",
    ]
    .map(|k| run[k].as_i64().unwrap())
}

async fn source_cursor(app: &TestApp, source: &str) -> Value {
    let admin = app.admin_token().await;
    let body: Value = app
        .api(&admin)
        .get(&format!("/api/sources/{source}"))
        .await
        .json()
        .await
        .unwrap();
    body["reconcile_cursor"].clone()
}

async fn dropped_webhooks_are_created_by_reconcile_and_counted_missed(backend: Backend) {
    let app = TestApp::spawn_with_workers(backend).await;
    let fake = FakeSource::start(25).await.unwrap();
    let key = pull_source(&app, "partner", &fake, 10).await;
    let dropped = [3usize, 11, 20];
    for index in (0..25).filter(|i| !dropped.contains(i)) {
        deliver(&app, "partner", &key, &fake, index).await;
    }
    wait_for_leads(&app, "partner", 22).await;
    for index in dropped {
        assert!(
            lead_by_ref(&app, "partner", &fake.source_ref(index))
                .await
                .is_none()
        );
    }
    let delivered = lead_by_ref(&app, "partner", &fake.source_ref(0))
        .await
        .unwrap();
    let events_before = app.count(outbox_event::Entity).await;

    let ops = app.token(Role::Ops, None).await;
    let run = reconcile(&app, &ops, "partner", None).await;
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(run["trigger"], "api");
    assert_eq!(run["pages"], 3);
    // fetched, created, updated, unchanged, stale, rejected, missed
    assert_eq!(counts(&run), [25, 3, 0, 22, 0, 0, 3]);
    assert_eq!(run["cursor"], "25");
    assert_eq!(source_cursor(&app, "partner").await, "25");
    assert_eq!(lead_count(&app, "partner").await, 25);
    for index in dropped {
        let repaired = lead_by_ref(&app, "partner", &fake.source_ref(index))
            .await
            .unwrap();
        assert_eq!(repaired.payload, fake.record(index));
    }
    // The delivered leads: nothing written but a timeline entry each.
    let again = lead_by_ref(&app, "partner", &fake.source_ref(0))
        .await
        .unwrap();
    assert_eq!(again.version, delivered.version);
    assert_eq!(app.count(outbox_event::Entity).await, events_before + 3);
    let timeline = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(delivered.id))
        .filter(activity::Column::Origin.eq("reconcile"))
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].outcome.as_deref(), Some("unchanged"));
    assert_eq!(
        timeline[0].correlation_id.as_deref(),
        Some(format!("reconcile-{}", run["id"]).as_str())
    );

    // Nothing changed since: the next run starts at the cursor and finds nothing.
    let next = reconcile(&app, &ops, "partner", None).await;
    assert_eq!(next["cursor_start"], "25");
    assert_eq!(counts(&next), [0, 0, 0, 0, 0, 0, 0]);

    let metrics = app.metrics().await;
    assert!(
        metrics.contains("leadpipe_reconcile_missed_total{source=\"partner\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("leadpipe_reconcile_runs_total"));
}

async fn a_record_changed_at_the_source_is_updated_and_human_fields_stay(backend: Backend) {
    let mut app = TestApp::spawn_with_workers(backend).await;
    let fake = FakeSource::start(5).await.unwrap();
    let key = pull_source(&app, "crm-x", &fake, 100).await;
    for index in 0..5 {
        deliver(&app, "crm-x", &key, &fake, index).await;
    }
    wait_for_leads(&app, "crm-x", 5).await;
    let ops = app.token(Role::Ops, None).await;
    let first = reconcile(&app, &ops, "crm-x", None).await;
    assert_eq!(counts(&first), [5, 0, 0, 5, 0, 0, 0]);
    // From here on nobody but this test and reconcile touches the leads (the
    // lead processor would assign them to the seller below).
    app.stop_workers().await;

    // Sales works the lead; then the sender changes it and its webhook is lost.
    let owner = domain::auth::create_principal(&app.db, "seller", Role::Sales, None)
        .await
        .unwrap()
        .principal
        .id;
    let id = lead_by_ref(&app, "crm-x", &fake.source_ref(2))
        .await
        .unwrap()
        .id;
    app.exec(&format!(
        "UPDATE lead SET status = 'contacted', owner_id = {owner} WHERE id = {id}"
    ))
    .await;
    let target = lead_by_ref(&app, "crm-x", &fake.source_ref(2))
        .await
        .unwrap();
    fake.update(2, |r| {
        r["email"] = json!("new.address@example-company.com");
        r["updated_at"] = json!("2026-11-30T12:00:00Z");
    });

    let run = reconcile(&app, &ops, "crm-x", None).await;
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(counts(&run), [1, 0, 1, 0, 0, 0, 1]);
    let updated = lead_by_ref(&app, "crm-x", &fake.source_ref(2))
        .await
        .unwrap();
    assert_eq!(
        updated.email.as_deref(),
        Some("new.address@example-company.com")
    );
    assert_eq!(updated.version, target.version + 1);
    assert_eq!(updated.status, "contacted");
    assert_eq!(updated.owner_id, Some(owner));
}

async fn a_failing_page_fails_the_run_and_the_next_run_resumes_there(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(30).await.unwrap();
    pull_source(&app, "pager", &fake, 10).await;
    fake.fail(Some(Failure {
        from_seq: 20,
        status: 400,
        times: None,
    }));
    let ops = app.token(Role::Ops, None).await;
    let failed = reconcile(&app, &ops, "pager", None).await;
    assert_eq!(failed["state"], "failed");
    assert!(
        failed["error"].as_str().unwrap().contains("HTTP 400"),
        "{failed}"
    );
    assert_eq!(failed["pages"], 2);
    assert_eq!(failed["cursor"], FakeSource::cursor_after(2, 10));
    assert_eq!(
        source_cursor(&app, "pager").await,
        FakeSource::cursor_after(2, 10)
    );
    assert_eq!(lead_count(&app, "pager").await, 20);

    fake.fail(None);
    let resumed = reconcile(&app, &ops, "pager", None).await;
    assert_eq!(resumed["state"], "done", "{resumed}");
    assert_eq!(resumed["cursor_start"], "20");
    assert_eq!(counts(&resumed), [10, 10, 0, 0, 0, 0, 10]);
    assert_eq!(lead_count(&app, "pager").await, 30);
    // Page 3 was asked for twice (failed, then resumed); pages 1-2 once.
    let asked: Vec<Option<String>> = fake.requests().into_iter().map(|r| r.since).collect();
    assert_eq!(
        asked,
        [
            None,
            Some("10".into()),
            Some("20".into()),
            Some("20".into())
        ]
    );

    let listed: Value = app
        .api(&ops)
        .get("/api/ops/reconcile-runs?source=pager")
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&Value> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, [&resumed["id"], &failed["id"]]);
    let only_failed: Value = app
        .api(&ops)
        .get("/api/ops/reconcile-runs?state=failed&limit=1")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(only_failed["data"][0]["id"], failed["id"]);
    assert_eq!(only_failed["next_cursor"], Value::Null);
}

/// Page 3 of 4 cannot be written (the database refuses one of its rows)
/// while page 4 is already being fetched: the run fails with the cursor
/// after page 2, page 4 is not written, and a re-run writes pages 3 and 4
/// once, with one lead and one outbox event per record.
async fn a_failed_page_write_keeps_the_cursor_and_a_rerun_doubles_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(40).await.unwrap();
    pull_source(&app, "pager", &fake, 10).await;
    let poisoned = fake.source_ref(25);
    match app.backend {
        Backend::Sqlite => {
            app.exec(&format!(
                "CREATE TRIGGER refuse_one BEFORE INSERT ON lead WHEN NEW.source_ref = '{poisoned}' \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            ))
            .await
        }
        Backend::Postgres => {
            app.exec(&format!(
                "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.source_ref = '{poisoned}' THEN RAISE EXCEPTION 'refused by the test'; END IF; \
                 RETURN NEW; END $$"
            ))
            .await;
            app.exec(
                "CREATE TRIGGER refuse_one BEFORE INSERT ON lead FOR EACH ROW EXECUTE FUNCTION refuse_one()",
            )
            .await
        }
    }
    let ops = app.token(Role::Ops, None).await;
    let failed = reconcile(&app, &ops, "pager", None).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert!(
        failed["error"].as_str().unwrap().contains("database error"),
        "{failed}"
    );
    assert_eq!(failed["pages"], 2);
    assert_eq!(
        source_cursor(&app, "pager").await,
        FakeSource::cursor_after(2, 10)
    );
    assert_eq!(lead_count(&app, "pager").await, 20);

    app.exec(match app.backend {
        Backend::Sqlite => "DROP TRIGGER refuse_one",
        Backend::Postgres => "DROP TRIGGER refuse_one ON lead",
    })
    .await;
    let resumed = reconcile(&app, &ops, "pager", None).await;
    assert_eq!(resumed["state"], "done", "{resumed}");
    assert_eq!(resumed["cursor_start"], FakeSource::cursor_after(2, 10));
    assert_eq!(counts(&resumed), [20, 20, 0, 0, 0, 0, 20]);
    assert_eq!(lead_count(&app, "pager").await, 40);
    let events = outbox_event::Entity::find().count(&app.db).await.unwrap();
    assert_eq!(events, 40, "one lead.created per record, none twice");
}

async fn transient_page_errors_are_retried_until_the_page_arrives(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(12).await.unwrap();
    pull_source(&app, "flaky", &fake, 5).await;
    fake.fail(Some(Failure {
        from_seq: 5,
        status: 503,
        times: Some(2),
    }));
    let ops = app.token(Role::Ops, None).await;
    let run = reconcile(&app, &ops, "flaky", None).await;
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(counts(&run), [12, 12, 0, 0, 0, 0, 12]);
    let statuses: Vec<u16> = fake.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 503, 503, 200, 200]);

    // A 429 that never clears uses up the attempts (4 in the test settings).
    fake.fail(Some(Failure {
        from_seq: 0,
        status: 429,
        times: None,
    }));
    let run = reconcile(&app, &ops, "flaky", Some(json!({"from_start": true}))).await;
    assert_eq!(run["state"], "failed");
    assert!(
        run["error"]
            .as_str()
            .unwrap()
            .starts_with("gave up after 4 attempts: the pull API answered HTTP 429"),
        "{run}"
    );
}

async fn two_concurrent_starts_give_one_run_and_one_409(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(10).await.unwrap();
    pull_source(&app, "busy", &fake, 5).await;
    fake.delay(Duration::from_millis(300));
    let ops = app.token(Role::Ops, None).await;
    let (a, b) = tokio::join!(
        app.api(&ops).start_reconcile("busy", None),
        app.api(&ops).start_reconcile("busy", None)
    );
    let (won, lost) = if a.status() == 202 { (a, b) } else { (b, a) };
    assert_eq!(won.status(), 202);
    let run: Value = won.json().await.unwrap();
    let problem = assert_problem(lost, 409, "/problems/reconcile-running").await;
    assert_eq!(problem["run_id"], run["id"]);
    // Still refused while it runs; free again once it is done.
    let third = app
        .api(&ops)
        .start_reconcile("busy", Some(&json!({"dry_run": true})))
        .await;
    assert_problem(third, 409, "/problems/reconcile-running").await;
    let done = finished(&app, &ops, &run).await;
    assert_eq!(done["state"], "done");
    let next = started(&app, &ops, "busy", None).await;
    assert_ne!(next["id"], run["id"]);
    finished(&app, &ops, &next).await;
}

async fn a_keyed_start_replays_its_run_and_starts_nothing_more(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(6).await.unwrap();
    pull_source(&app, "keyed", &fake, 10).await;
    let ops = app.token(Role::Ops, None).await;
    let keyed = || {
        app.api(&ops)
            .start_reconcile("keyed", None)
            .key("nightly-2026-11-30")
    };
    let first = keyed().await;
    assert_eq!(first.status(), 202);
    assert_eq!(first.headers()["idempotent-replayed"], "false");
    let run: Value = first.json().await.unwrap();
    let done = finished(&app, &ops, &run).await;
    assert_eq!(done["state"], "done");
    let again = keyed().await;
    assert_eq!(again.status(), 202);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let replayed: Value = again.json().await.unwrap();
    assert_eq!(replayed["id"], run["id"]);
    // Time for a wrongly started second run to show: none must.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(app.count(reconcile_run::Entity).await, 1);
    assert_eq!(fake.requests().len(), 1);
}

async fn a_dry_run_compares_and_writes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(8).await.unwrap();
    pull_source(&app, "preview", &fake, 3).await;
    let ops = app.token(Role::Ops, None).await;
    let dry = reconcile(&app, &ops, "preview", Some(json!({"dry_run": true}))).await;
    assert_eq!(dry["state"], "done", "{dry}");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(counts(&dry), [8, 8, 0, 0, 0, 0, 8]);
    assert_eq!(lead_count(&app, "preview").await, 0);
    assert_eq!(app.count(activity::Entity).await, 0);
    assert_eq!(app.count(outbox_event::Entity).await, 0);
    assert_eq!(source_cursor(&app, "preview").await, Value::Null);

    // After a real run, a changed record is predicted `updated`, the rest `unchanged`.
    let real = reconcile(&app, &ops, "preview", None).await;
    assert_eq!(counts(&real), [8, 8, 0, 0, 0, 0, 8]);
    fake.update(4, |r| r["name"] = json!("Renamed"));
    let activities = app.count(activity::Entity).await;
    let dry = reconcile(
        &app,
        &ops,
        "preview",
        Some(json!({"dry_run": true, "from_start": true})),
    )
    .await;
    assert_eq!(counts(&dry), [8, 0, 1, 7, 0, 0, 1]);
    assert_eq!(app.count(activity::Entity).await, activities);
    assert_eq!(source_cursor(&app, "preview").await, "8");
    let lead = lead_by_ref(&app, "preview", &fake.source_ref(4))
        .await
        .unwrap();
    assert_ne!(lead.name.as_deref(), Some("Renamed"));
}

async fn the_demo_puts_every_record_in_the_table_exactly_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut args = api::cli::demo::DemoArgs::with_records(80);
    args.page_size = 25;
    args.db = Some(app.database_url.clone());
    let report = api::cli::demo::run_demo(&app.database_url, &args)
        .await
        .unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(report.leads_in_table, 80);
    assert_eq!(report.duplicate_leads, 0);
    assert!(report.dropped > 0 && report.redeliveries > 0, "{report:?}");
    assert_eq!(report.missed_repaired, report.dropped);
    assert_eq!(report.reconcile_run["pages"], 4);
    let table = report.render();
    assert!(
        table.contains("missed and repaired by reconcile"),
        "{table}"
    );
}

async fn the_demo_reconciles_several_sources_at_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut args = api::cli::demo::DemoArgs::with_records(150);
    args.sources = 3;
    args.page_size = 10;
    args.db = Some(app.database_url.clone());
    let demo = api::cli::demo::run_demos(&app.database_url, &args)
        .await
        .unwrap();
    assert_eq!(demo.reports.len(), 3);
    for report in &demo.reports {
        assert!(report.failures().is_empty(), "{:?}", report.failures());
        assert_eq!(report.leads_in_table, 150);
        assert_eq!(report.reconcile_run["pages"], 15);
    }
    let sources: std::collections::HashSet<_> = demo.reports.iter().map(|r| &r.source).collect();
    assert_eq!(sources.len(), 3, "one source each");
    let runs = reconcile_run::Entity::find().all(&app.db).await.unwrap();
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r.state == "done"), "{runs:?}");
    // On PostgreSQL the runs overlap: each started before any of them
    // finished. SQLite's one writer takes them in turns, and a 150-record
    // run can end before the next one's start gets the turn (seen in CI).
    if matches!(backend, Backend::Postgres) {
        let last_start = runs.iter().map(|r| r.started_at).max().unwrap();
        let first_end = runs.iter().filter_map(|r| r.finished_at).min().unwrap();
        assert!(last_start < first_end, "{runs:?}");
    }
    assert!(
        demo.render_together()
            .contains("3 sources reconciled at once: 450 records"),
        "{}",
        demo.render_together()
    );
}

async fn pull_urls_to_internal_addresses_are_refused_unless_allow_listed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let body = |url: &str| json!({"name": "puller", "scheme": "hmac-sha256", "secrets": ["sixteen-byte-key"], "pull_url": url});
    for internal in [
        "http://10.0.0.5/leads",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:8080/leads",
    ] {
        let refused = app.api(&admin).create_source(&body(internal)).await;
        let problem = assert_problem(refused, 422, "/problems/validation").await;
        assert_eq!(problem["errors"][0]["field"], "pull_url", "{problem}");
    }
    // The test configuration allow-lists 127.0.0.1.
    let allowed = app
        .api(&admin)
        .create_source(&body("http://127.0.0.1:9/leads"))
        .await;
    assert_eq!(allowed.status(), 201);
    let bad = app
        .api(&admin)
        .create_source(
            &json!({"name": "puller", "scheme": "hmac-sha256", "cron": "*/5 * * * *",
                    "pull_page_size": 5000}),
        )
        .await;
    let problem = assert_problem(bad, 422, "/problems/validation").await;
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["pull_page_size", "cron"], "{problem}");

    // The run checks again: a URL saved while allowed is refused by a
    // reconciler whose policy does not allow it, and the run fails at once.
    let strict = workers::reconcile::Reconciler::new(
        app.db.clone(),
        workers::reconcile::ReconcileSettings {
            keyring: domain::sealed::Keyring::for_tests(),
            ..Default::default()
        },
    )
    .unwrap();
    let run = runs::start(&app.db, &start_of("puller")).await.unwrap();
    let run = strict.execute(run, |_| {}).await.unwrap();
    assert_eq!(run.state, "failed");
    assert!(
        run.error.as_deref().unwrap().contains("internal address"),
        "{run:?}"
    );
}

/// Source `name` as the runner reads it, secrets opened.
async fn stored_source(app: &TestApp, name: &str) -> domain::inbound::source::Source {
    domain::inbound::source::find(&app.db, name, &domain::sealed::Keyring::for_tests())
        .await
        .unwrap()
        .unwrap()
}

fn start_of(source: &str) -> StartRun {
    StartRun {
        source: source.into(),
        dry_run: false,
        since: None,
        trigger: Trigger::Cli,
        tick_key: None,
        started_by: None,
        lease: Duration::from_secs(30),
    }
}

async fn the_auth_value_is_sent_and_never_shown(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(3).await.unwrap();
    fake.require_auth("authorization", "Bearer pull-token-9f8e7d");
    let admin = app.admin_token().await;
    let saved = app
        .api(&admin)
        .create_source(
            &json!({"name": "locked", "scheme": "hmac-sha256", "secrets": ["sixteen-byte-key"],
                    "pull_url": fake.pull_url, "pull_auth_header": "Authorization",
                    "pull_auth_secret": "Bearer pull-token-9f8e7d", "cron": "0 0 3 * * *"}),
        )
        .await;
    let text = saved.text().await.unwrap();
    assert!(!text.contains("pull-token-9f8e7d"), "{text}");
    let view: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(view["pull_auth_header"], "authorization");
    assert_eq!(view["pull_auth_configured"], true);
    assert_eq!(view["cron"], "0 0 3 * * *");

    // A change that does not give the value keeps it.
    let resaved = app
        .api(&admin)
        .patch_source(
            "locked",
            &json!({"pull_url": fake.pull_url, "pull_auth_header": "authorization"}),
        )
        .await;
    assert_eq!(resaved.status(), 200);
    let ops = app.token(Role::Ops, None).await;
    let run = reconcile(&app, &ops, "locked", None).await;
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(
        fake.requests()[0].auth.as_deref(),
        Some("Bearer pull-token-9f8e7d")
    );
    for path in [
        "/api/sources",
        "/api/sources/locked",
        "/api/ops/reconcile-runs",
    ] {
        let body = app.api(&admin).get(path).await.text().await.unwrap();
        assert!(!body.contains("pull-token-9f8e7d"), "{path}: {body}");
    }

    // A wrong value is a permanent error: the run fails with the status.
    fake.require_auth("authorization", "Bearer rotated");
    let run = reconcile(&app, &ops, "locked", Some(json!({"from_start": true}))).await;
    assert_eq!(run["state"], "failed");
    let error = run["error"].as_str().unwrap();
    assert!(error.contains("HTTP 401"), "{error}");
    assert!(!error.contains("pull-token"), "{error}");
}

async fn roles_decide_who_may_reconcile(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(2).await.unwrap();
    pull_source(&app, "guarded", &fake, 10).await;
    app.standard_source("push-only").await;
    for role in [Role::Sales, Role::Intake] {
        let source = (role == Role::Intake).then_some("guarded");
        let token = app.token(role, source).await;
        assert_problem(
            app.api(&token).start_reconcile("guarded", None).await,
            403,
            "/problems/forbidden",
        )
        .await;
        assert_problem(
            app.api(&token).get("/api/ops/reconcile-runs").await,
            403,
            "/problems/forbidden",
        )
        .await;
    }
    let anonymous = app
        .client
        .post(app.url("/api/ops/reconcile/guarded"))
        .send()
        .await
        .unwrap();
    assert_problem(anonymous, 401, "/problems/unauthorized").await;
    let ops = app.token(Role::Ops, None).await;
    assert_problem(
        app.api(&ops).start_reconcile("nowhere", None).await,
        404,
        "/problems/not-found",
    )
    .await;
    assert_problem(
        app.api(&ops).start_reconcile("push-only", None).await,
        422,
        "/problems/validation",
    )
    .await;
    assert_problem(
        app.api(&ops)
            .start_reconcile("guarded", Some(&json!({"since": "5", "from_start": true})))
            .await,
        422,
        "/problems/validation",
    )
    .await;
    assert_problem(
        app.api(&ops).get("/api/ops/reconcile-runs/424242").await,
        404,
        "/problems/not-found",
    )
    .await;
    let admin = app.admin_token().await;
    let run = reconcile(&app, &admin, "guarded", None).await;
    assert_eq!(run["state"], "done");
    assert!(run["started_by"].as_i64().is_some(), "{run}");
}

async fn an_abandoned_run_is_failed_and_the_source_freed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(4).await.unwrap();
    pull_source(&app, "orphan", &fake, 10).await;
    // A run whose process died: running, heartbeat long ago.
    let dead = runs::start(&app.db, &start_of("orphan")).await.unwrap();
    let ops = app.token(Role::Ops, None).await;
    assert_problem(
        app.api(&ops).start_reconcile("orphan", None).await,
        409,
        "/problems/reconcile-running",
    )
    .await;
    app.exec(&format!(
        "UPDATE reconcile_run SET heartbeat_at = '2020-01-01 00:00:00+00:00' WHERE id = {}",
        dead.id
    ))
    .await;
    let run = reconcile(&app, &ops, "orphan", None).await;
    assert_eq!(run["state"], "done", "{run}");
    let dead = runs::find(&app.db, dead.id).await.unwrap().unwrap();
    assert_eq!(dead.state, "failed");
    assert!(dead.error.unwrap().starts_with("abandoned"));
}

async fn a_run_that_lost_its_lease_writes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(4).await.unwrap();
    pull_source(&app, "fenced", &fake, 10).await;
    let run = runs::start(&app.db, &start_of("fenced")).await.unwrap();
    // Another process declared it dead meanwhile.
    runs::finish(&app.db, run.id, Some("abandoned: test"))
        .await
        .unwrap();
    let source = stored_source(&app, "fenced").await;
    let page = domain::reconcile::PulledPage {
        records: vec![fake.record(0), fake.record(1)],
        next_cursor: Some("2".into()),
        has_more: true,
    };
    let result = domain::reconcile::page::apply(&app.db, &run, &source, &page).await;
    assert!(matches!(
        result,
        Err(domain::reconcile::page::PageError::LeaseLost)
    ));
    assert_eq!(lead_count(&app, "fenced").await, 0);
    assert_eq!(source_cursor(&app, "fenced").await, Value::Null);
    let reconciler = workers::reconcile::Reconciler::new(
        app.db.clone(),
        workers::reconcile::ReconcileSettings::for_tests(),
    )
    .unwrap();
    assert!(matches!(
        reconciler.execute(run, |_| {}).await,
        Err(workers::reconcile::ExecuteError::LeaseLost)
    ));
    assert_eq!(lead_count(&app, "fenced").await, 0);
}

/// On SQLite a page is written in this process's write turn, as every
/// other background writer is, so it never sleeps in SQLite's busy handler
/// behind them: while another writer holds the turn, the page waits.
/// PostgreSQL has no turn.
async fn a_page_waits_for_the_write_turn_on_sqlite(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(3).await.unwrap();
    pull_source(&app, "turns", &fake, 10).await;
    let run = runs::start(&app.db, &start_of("turns")).await.unwrap();
    let source = stored_source(&app, "turns").await;
    let page = domain::reconcile::PulledPage {
        records: (0..3).map(|i| fake.record(i)).collect(),
        next_cursor: Some("3".into()),
        has_more: false,
    };
    let turn = app.db.write_turn().await;
    let write = {
        let (db, run, source, page) = (app.db.clone(), run.clone(), source.clone(), page.clone());
        tokio::spawn(async move { domain::reconcile::page::apply(&db, &run, &source, &page).await })
    };
    // Time for a writer that skipped the turn to write: none must.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let written_meanwhile = lead_count(&app, "turns").await;
    drop(turn);
    let counts = write.await.unwrap().unwrap();
    if backend == Backend::Sqlite {
        assert_eq!(
            written_meanwhile, 0,
            "the page was written in another's turn"
        );
    }
    assert_eq!(counts.created, 3);
    assert_eq!(lead_count(&app, "turns").await, 3);
}

async fn cron_starts_one_run_per_tick_across_worker_processes(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    let fake = FakeSource::start(3).await.unwrap();
    pull_source(&app, "nightly", &fake, 10).await;
    let admin = app.admin_token().await;
    let every_second = app
        .api(&admin)
        .patch_source("nightly", &json!({"cron": "* * * * * *"}))
        .await;
    assert_eq!(every_second.status(), 200);
    // Two worker processes' runtimes on one database.
    app.start_workers(workers::WorkerSettings::for_tests());
    let other = leadpipe_tests::webhooks::RunningWorkers::start(
        app.db.clone(),
        workers::WorkerSettings::for_tests(),
    );
    let began = std::time::Instant::now();
    // Three and a half seconds of ticks: the passing time is what is tested.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    app.stop_workers().await;
    other.stop().await;
    let seconds = began.elapsed().as_secs() + 1;

    let scheduled = reconcile_run::Entity::find()
        .filter(reconcile_run::Column::Trigger.eq("schedule"))
        .all(&app.db)
        .await
        .unwrap();
    assert!(!scheduled.is_empty(), "cron started no run");
    // One run per tick at most, though two schedulers saw every tick.
    assert!(
        scheduled.len() as u64 <= seconds,
        "{} runs in {seconds} s",
        scheduled.len()
    );
    let mut ticks: Vec<&str> = scheduled
        .iter()
        .map(|r| r.tick_key.as_deref().unwrap())
        .collect();
    ticks.sort_unstable();
    ticks.dedup();
    assert_eq!(ticks.len(), scheduled.len());
    assert_eq!(lead_count(&app, "nightly").await, 3);
    assert!(
        scheduled.iter().all(|r| r.state != "running"),
        "{scheduled:?}"
    );
}
