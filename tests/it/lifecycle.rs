//! Data lifecycle: retention sweeps, ordered bulk inbox retries, online
//! backups, and imports across a graceful stop.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::Utc;
use domain::auth::Role;
use domain::entities::{import_row, import_run, inbox_event, lead, outbox_delivery, outbox_event};
use leadpipe_tests::prometheus::series_value;
use leadpipe_tests::receiver::Receiver;
use leadpipe_tests::reconcile::{crm_with_one_broken_email, map_crm_email_from};
use leadpipe_tests::{Backend, TestApp, assert_problem, eventually, on_both_backends};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Statement,
};
use serde_json::{Value, json};

on_both_backends!(
    retention_empties_old_bodies_keeps_dedup_and_deletes_only_delivered_history,
    bulk_retry_applies_in_received_order_and_refuses_processed_unless_asked,
    backup_under_write_load_holds_every_lead_committed_before_it,
    sigterm_during_an_import_waits_for_it,
    sigterm_past_the_grace_marks_the_import_interrupted_with_its_rows,
    rejected_reconcile_records_are_kept_and_applied_once_after_a_mapping_fix,
);

const WAIT: Duration = Duration::from_secs(30);

fn days_ago(days: i64) -> chrono::DateTime<Utc> {
    Utc::now() - chrono::TimeDelta::days(days)
}

async fn retention_empties_old_bodies_keeps_dedup_and_deletes_only_delivered_history(
    backend: Backend,
) {
    let app = TestApp::spawn_with_workers(backend).await;
    let admin = app.admin_token().await;
    let receiver = Receiver::start().await;
    app.api(&admin).subscribe(&receiver, json!([])).await;
    let key = app.standard_source("webform").await;
    let mut ids = Vec::new();
    for name in ["old", "ancient", "recent", "undelivered"] {
        let body = leadpipe_tests::webhooks::lead_event(
            name,
            &format!("{name}@example.com"),
            "2026-11-30T10:00:00Z",
        );
        let ack: Value = app
            .post_standard("webform", &key, &format!("msg-{name}"), &body)
            .await
            .json()
            .await
            .unwrap();
        ids.push(ack["id"].as_i64().unwrap());
    }
    let [old, ancient, recent, undelivered] = ids[..] else {
        unreachable!()
    };
    for id in &ids {
        app.wait_for_state(*id, "processed").await;
    }
    eventually("every delivery delivered", WAIT, || async {
        let delivered = outbox_delivery::Entity::find()
            .filter(outbox_delivery::Column::State.eq("delivered"))
            .count(&app.db)
            .await
            .unwrap();
        (delivered == 4).then_some(())
    })
    .await;
    // A finished import with its per-row report.
    let imported = app
        .api(&admin)
        .upload_import(
            "source=fair",
            "text/csv",
            "source_ref,email\nfair-1,one@example.com\nfair-2,two@example.com\n",
        )
        .await;
    assert_eq!(imported.status(), 202);
    let run_id = imported.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    eventually("the import to finish", WAIT, || async {
        let run = import_run::Entity::find_by_id(run_id)
            .one(&app.db)
            .await
            .unwrap()?;
        (run.state == "done").then_some(())
    })
    .await;
    let before = app.metrics().await;
    let removed_before = series_value(
        &before,
        "leadpipe_retention_removed_total{kind=\"inbox_body\"}",
    )
    .unwrap_or(0.0);

    // Age the data: "old" past the body window, "ancient" past the event
    // window; "undelivered" is old too but its delivery died.
    let age = |id: i64, days: i64| {
        inbox_event::Entity::update_many()
            .col_expr(inbox_event::Column::ReceivedAt, Expr::value(days_ago(days)))
            .col_expr(
                inbox_event::Column::LastDeliveryAt,
                Expr::value(days_ago(days)),
            )
            .filter(inbox_event::Column::Id.eq(id))
            .exec(&app.db)
    };
    age(old, 40).await.unwrap();
    age(ancient, 100).await.unwrap();
    age(undelivered, 40).await.unwrap();
    let event_of = |name: &'static str| {
        let app = &app;
        async move {
            let lead = app.lead_by_ref(name).await;
            outbox_event::Entity::find()
                .filter(outbox_event::Column::LeadId.eq(lead.id))
                .one(&app.db)
                .await
                .unwrap()
                .unwrap()
                .id
        }
    };
    let (old_event, ancient_event, recent_event, undelivered_event) = (
        event_of("old").await,
        event_of("ancient").await,
        event_of("recent").await,
        event_of("undelivered").await,
    );
    outbox_event::Entity::update_many()
        .col_expr(outbox_event::Column::CreatedAt, Expr::value(days_ago(40)))
        .filter(outbox_event::Column::Id.is_in([old_event, ancient_event, undelivered_event]))
        .exec(&app.db)
        .await
        .unwrap();
    outbox_delivery::Entity::update_many()
        .col_expr(outbox_delivery::Column::State, Expr::value("dead"))
        .filter(outbox_delivery::Column::OutboxEventId.eq(undelivered_event))
        .exec(&app.db)
        .await
        .unwrap();
    import_run::Entity::update_many()
        .col_expr(
            import_run::Column::FinishedAt,
            Expr::value(Some(days_ago(40))),
        )
        .filter(import_run::Column::Id.eq(run_id))
        .exec(&app.db)
        .await
        .unwrap();

    // The workers' next sweep.
    eventually("the retention sweep", WAIT, || async {
        let gone = inbox_event::Entity::find_by_id(ancient)
            .one(&app.db)
            .await
            .unwrap()
            .is_none();
        let rows = import_row::Entity::find()
            .filter(import_row::Column::RunId.eq(run_id))
            .count(&app.db)
            .await
            .unwrap();
        (gone && rows == 0).then_some(())
    })
    .await;
    let old_row = app.inbox_event(old).await;
    assert!(old_row.body.is_empty(), "the old body is emptied");
    assert_eq!(old_row.state, "processed", "its row stays");
    assert!(
        !app.inbox_event(recent).await.body.is_empty(),
        "a recent body is kept"
    );
    let remaining: Vec<i64> = outbox_event::Entity::find()
        .order_by_asc(outbox_event::Column::Id)
        .all(&app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .filter(|id| [old_event, ancient_event, recent_event, undelivered_event].contains(id))
        .collect();
    let mut kept = vec![recent_event, undelivered_event];
    kept.sort_unstable();
    assert_eq!(
        remaining, kept,
        "old delivered events go; a recent one and one with a dead delivery stay"
    );
    assert_eq!(
        outbox_delivery::Entity::find()
            .filter(outbox_delivery::Column::OutboxEventId.is_in([old_event, ancient_event]))
            .count(&app.db)
            .await
            .unwrap(),
        0
    );
    let run = import_run::Entity::find_by_id(run_id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (run.state.as_str(), run.rows),
        ("done", 2),
        "the run keeps its counts"
    );

    // A late redelivery of the swept event is still a duplicate.
    let leads = app.count(lead::Entity).await;
    let body =
        leadpipe_tests::webhooks::lead_event("old", "old@example.com", "2026-11-30T10:00:00Z");
    let again = app.post_standard("webform", &key, "msg-old", &body).await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    assert_eq!(
        (again["duplicate"].as_bool(), again["id"].as_i64()),
        (Some(true), Some(old))
    );
    assert_eq!(app.inbox_event(old).await.deliveries, 2);
    assert_eq!(app.count(lead::Entity).await, leads);

    // The sweep counts what it removed once its statements are done: the
    // rows above may be gone a moment before the counters move.
    let after = eventually("the retention counters", WAIT, || async {
        let after = app.metrics().await;
        let body = series_value(
            &after,
            "leadpipe_retention_removed_total{kind=\"inbox_body\"}",
        )?;
        let others = [
            "inbox_event",
            "outbox_event",
            "outbox_delivery",
            "import_row",
        ]
        .iter()
        .all(|kind| {
            let series = format!("leadpipe_retention_removed_total{{kind=\"{kind}\"}}");
            series_value(&after, &series).is_some_and(|n| n >= 1.0)
        });
        (body >= removed_before + 1.0 && others).then_some(after)
    })
    .await;
    let last = series_value(&after, "leadpipe_retention_last_sweep_timestamp_seconds").unwrap();
    assert!(last >= (Utc::now().timestamp() - 60) as f64, "{last}");
}

/// A body without `updated_at`: only the order of application decides
/// which of two events for one lead ends on it.
fn undated_event(source_ref: &str, email: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "lead.created",
        "data": {"id": source_ref, "email": email, "name": "Ada"}
    }))
    .unwrap()
}

async fn bulk_retry_applies_in_received_order_and_refuses_processed_unless_asked(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ops = app.token(Role::Ops, None).await;
    let key = app.standard_source("webform").await;
    let mut ids = Vec::new();
    for (msg, email) in [
        ("first", "first@example.com"),
        ("second", "second@example.com"),
        ("third", "third@example.com"),
    ] {
        let ack: Value = app
            .post_standard("webform", &key, msg, &undated_event("form-1", email))
            .await
            .json()
            .await
            .unwrap();
        ids.push(ack["id"].as_i64().unwrap());
    }
    // As if a mapping error had killed them all (no workers run here).
    app.exec("UPDATE inbox_event SET state = 'dead', last_error = 'mapping'")
        .await;
    let ops_api = app.api(&ops);
    let retry = |body: Value| {
        let ops = ops_api.clone();
        async move { ops.retry_inbox_events(&body).await }
    };

    let dry: Value = retry(json!({"dry_run": true})).await.json().await.unwrap();
    assert_eq!(dry["by_state"], json!({"dead": 3}));
    assert_eq!(dry["retried"], 0);
    let done = retry(json!({"state": "dead"})).await;
    assert_eq!(done.status(), 200);
    let done: Value = done.json().await.unwrap();
    assert_eq!(
        (&done["retried"], &done["results"]),
        (&json!(3), &json!({"processed": 3}))
    );
    assert_eq!(
        app.lead_by_ref("form-1").await.email.as_deref(),
        Some("third@example.com"),
        "the last received event ends on the lead"
    );
    assert_eq!(app.count(lead::Entity).await, 1);

    // Processed events are refused unless asked explicitly.
    for body in [
        json!({"state": "processed"}),
        json!({"state": "processed", "dry_run": true}),
    ] {
        let refused = assert_problem(retry(body).await, 422, "/problems/validation").await;
        assert_eq!(refused["errors"][0]["field"], "include_processed");
    }
    let dry: Value = retry(json!({"include_processed": true, "dry_run": true}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(dry["by_state"], json!({"processed": 3}));
    assert!(
        dry["note"].as_str().unwrap().contains("historic payloads"),
        "{dry}"
    );
    let without: Value = retry(json!({})).await.json().await.unwrap();
    assert_eq!(without["matched"], 0, "processed are not taken by default");

    // Asked explicitly: re-applied in received order again.
    app.exec("UPDATE lead SET email = 'changed@example.com' WHERE source_ref = 'form-1'")
        .await;
    let again: Value = retry(json!({"state": "processed", "include_processed": true}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["results"], json!({"processed": 3}));
    assert_eq!(
        app.lead_by_ref("form-1").await.email.as_deref(),
        Some("third@example.com")
    );
    for id in ids {
        assert_eq!(app.inbox_event(id).await.retries, 2);
    }

    // The command line says the same.
    let refused = app
        .cli()
        .args(["inbox", "retry", "--state", "processed"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("include_processed"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let dry = app
        .cli()
        .args(["inbox", "retry", "--include-processed", "--dry-run"])
        .output()
        .unwrap();
    assert!(dry.status.success());
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(
        text.contains("3 event(s) would be re-applied in received order (processed 3)"),
        "{text}"
    );
    assert!(text.contains("historic payloads"), "{text}");
}

fn random_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn backup_under_write_load_holds_every_lead_committed_before_it(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let dir = std::env::temp_dir().join(format!("lp-backup-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("copy.db");
    if backend == Backend::Postgres {
        let refused = app.cli().arg("backup").arg(&file).output().unwrap();
        assert!(!refused.status.success());
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("pg_dump"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
        assert!(!file.exists());
        return;
    }
    // Writers keep committing leads while the backup runs.
    let token = app.token(Role::Intake, Some("webform")).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (intake, stop) = (app.api(&token), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let response = intake
                    .create_lead(
                        &json!({"source": "webform", "source_ref": format!("w{w}-{i}"),
                                  "email": format!("w{w}-{i}@example.com")}),
                    )
                    .await;
                assert_eq!(response.status(), 201);
                i += 1;
            }
        }));
    }
    eventually("writers to get going", WAIT, || async {
        (app.count(lead::Entity).await >= 200).then_some(())
    })
    .await;
    let committed_before = app.count(lead::Entity).await;
    let backup = {
        let mut command = app.cli();
        command.arg("backup").arg(&file);
        tokio::task::spawn_blocking(move || command.output().unwrap())
            .await
            .unwrap()
    };
    let during = app.count(lead::Entity).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    assert!(
        backup.status.success(),
        "{}",
        String::from_utf8_lossy(&backup.stderr)
    );
    assert!(
        during > committed_before,
        "the writers kept writing during the backup"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // The copy opens with leadpipe, and holds every lead committed before.
    let url = format!("sqlite://{}", file.display());
    let copy = api::storage::open(&url, 1, false, &domain::sealed::Keyring::for_tests())
        .await
        .unwrap();
    let check = copy
        .query_one_raw(Statement::from_string(
            copy.get_database_backend(),
            "PRAGMA integrity_check",
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(check.try_get_by_index::<String>(0).unwrap(), "ok");
    let in_copy = lead::Entity::find().count(&copy).await.unwrap();
    assert!(
        in_copy >= committed_before,
        "{in_copy} leads in the copy, {committed_before} committed before it"
    );
    copy.close().await.unwrap();
    let listed = Command::new(env!("CARGO_BIN_EXE_leadpipe-cli"))
        .args(["inbox", "list"])
        .env("DATABASE_URL", &url)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );

    // An existing file is never overwritten.
    let again = app.cli().arg("backup").arg(&file).output().unwrap();
    assert!(!again.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `leadpipe serve` on its own port against the app's database, with an
/// import of `rows` rows under way; returns the child and the run.
async fn serve_with_an_import(
    app: &TestApp,
    grace_secs: u64,
    rows: usize,
) -> (std::process::Child, i64) {
    let port = random_port();
    let child = app
        .cli()
        .args([
            "serve",
            "--no-workers",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .env(
            "LEADPIPE_IMPORT_SHUTDOWN_GRACE_SECS",
            grace_secs.to_string(),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    eventually("serve to listen", WAIT, || async {
        app.client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    let mut csv = String::from("source_ref,email\n");
    for i in 0..rows {
        csv.push_str(&format!("big-{i},person{i}@example.com\n"));
    }
    let admin = app.admin_token().await;
    let started = app
        .client
        .post(format!("{base}/api/imports?source=big"))
        .bearer_auth(&admin)
        .header("content-type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 202);
    let run_id = started.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    eventually("the import to get going", WAIT, || async {
        let run = import_run::Entity::find_by_id(run_id)
            .one(&app.db)
            .await
            .unwrap()?;
        assert!((run.rows as usize) < rows, "the import finished too soon");
        (run.rows >= 1000).then_some(())
    })
    .await;
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    (child, run_id)
}

async fn wait_for_exit(mut child: std::process::Child) -> std::process::ExitStatus {
    tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap()
}

async fn sigterm_during_an_import_waits_for_it(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // A grace far longer than the import needs, even on a busy machine.
    let rows = 20_000;
    let (child, run_id) = serve_with_an_import(&app, 900, rows).await;
    let status = wait_for_exit(child).await;
    assert!(status.success(), "{status}");
    let run = import_run::Entity::find_by_id(run_id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (run.state.as_str(), run.rows as usize),
        ("done", rows),
        "{:?}",
        run.error
    );
    assert_eq!(app.count(lead::Entity).await as usize, rows);
}

async fn sigterm_past_the_grace_marks_the_import_interrupted_with_its_rows(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let rows = 40_000;
    let (child, run_id) = serve_with_an_import(&app, 0, rows).await;
    let status = wait_for_exit(child).await;
    assert!(status.success(), "{status}");
    let run = import_run::Entity::find_by_id(run_id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.state, "interrupted");
    assert!((run.rows as usize) < rows, "{}", run.rows);
    assert!(run.finished_at.is_some());
    let leads = app.count(lead::Entity).await as i64;
    assert_eq!(
        leads, run.rows,
        "every counted row is committed, and no more"
    );
    let error = run.error.unwrap();
    assert!(
        error.contains(&format!("{} rows committed", run.rows))
            && error.contains("import the same file again"),
        "{error}"
    );
}

/// A record the mapping rejects is kept, listed, and applied once after the fix.
async fn rejected_reconcile_records_are_kept_and_applied_once_after_a_mapping_fix(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let ops = app.token(Role::Ops, None).await;
    let fake = crm_with_one_broken_email(&app, &admin, 3).await;

    let run = app.reconcile(&ops, "crm", json!({})).await;
    assert_eq!(
        (run.state.as_str(), run.created, run.rejected),
        ("done", 2, 1)
    );
    let listed: Value = app
        .api(&ops)
        .get("/api/ops/reconcile/rejected?source=crm")
        .await
        .json()
        .await
        .unwrap();
    let kept = &listed["data"][0];
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        (&kept["state"], &kept["run_id"], &kept["record"]),
        (&json!("rejected"), &json!(run.id), &fake.record(1))
    );
    assert!(kept["reason"].as_str().unwrap().contains("email"), "{kept}");
    // Read again from the start: still one dead letter, not two.
    let again = app
        .reconcile(&ops, "crm", json!({"from_start": true}))
        .await;
    assert_eq!(again.rejected, 1);
    let listed: Value = app
        .api(&ops)
        .get("/api/ops/reconcile/rejected")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["data"][0]["run_id"], json!(again.id));

    // A retry before the fix changes nothing.
    let ops_api = app.api(&ops);
    let retry = |body: Value| {
        let ops = ops_api.clone();
        async move {
            let response = ops.retry_rejected_records(&body).await;
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.unwrap()
        }
    };
    assert_eq!(
        retry(json!({"source": "crm"})).await,
        json!({"retried": 1, "resolved": 0, "still_rejected": 1})
    );
    let leads = || async {
        lead::Entity::find()
            .filter(lead::Column::Source.eq("crm"))
            .count(&app.db)
            .await
            .unwrap()
    };
    assert_eq!(leads().await, 2);

    // The mapping fixed, the retry applies it, once.
    map_crm_email_from(&app, &admin, &fake, "/contact_email").await;
    assert_eq!(
        retry(json!({})).await,
        json!({"retried": 1, "resolved": 1, "still_rejected": 0})
    );
    let fixed = app.lead_by_ref(&fake.source_ref(1)).await;
    assert_eq!(fixed.email.as_deref(), Some("fixed@example.com"));
    assert_eq!(leads().await, 3);
    let resolved: Value = app
        .api(&ops)
        .get("/api/ops/reconcile/rejected?state=resolved")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(resolved["data"][0]["lead_id"], json!(fixed.id));
    let cli_retry = app
        .cli()
        .args(["reconcile", "retry-rejected", "--source", "crm"])
        .output()
        .unwrap();
    assert!(cli_retry.status.success());
    assert_eq!(
        String::from_utf8_lossy(&cli_retry.stdout).trim(),
        "0 rejected record(s) retried: 0 resolved, 0 still rejected"
    );
    assert_eq!(leads().await, 3, "nothing doubled");
    assert_problem(
        app.api(&ops)
            .get("/api/ops/reconcile/rejected?state=nope")
            .await,
        422,
        "/problems/validation",
    )
    .await;
    fake.stop().await;
}
