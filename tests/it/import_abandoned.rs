//! An import whose process is killed mid-file must not stay `running` for
//! ever: housekeeping marks it `abandoned` once its heartbeat stops, says how
//! to resume, and importing the same file again finishes the job with every
//! row applied exactly once.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::Duration;

use domain::auth::Role;
use domain::entities::{import_run, lead};
use leadpipe_tests::{Backend, TestApp, eventually, on_both_backends};
use sea_orm::{EntityTrait, QueryOrder};
use serde_json::Value;

on_both_backends!(an_import_killed_mid_file_is_abandoned_and_resumes_by_running_it_again);

const ROWS: usize = 20_000;

fn import(app: &TestApp, file: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_leadpipe-cli"));
    command
        .args([
            "import",
            "--source",
            "fair",
            "--batch-size",
            "200",
            "--no-progress",
        ])
        .arg(file)
        .env("DATABASE_URL", &app.database_url)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

async fn runs(app: &TestApp) -> Vec<import_run::Model> {
    import_run::Entity::find()
        .order_by_asc(import_run::Column::Id)
        .all(&app.db)
        .await
        .unwrap()
}

async fn an_import_killed_mid_file_is_abandoned_and_resumes_by_running_it_again(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let dir = std::env::temp_dir().join(format!("lp-import-kill-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fair.csv");
    let mut csv = String::from("source_ref,email\n");
    for i in 0..ROWS {
        csv.push_str(&format!("fair-{i},person{i}@example.com\n"));
    }
    std::fs::write(&file, csv).unwrap();

    // Killed with SIGKILL once some batches are committed.
    let mut child = import(&app, &file).spawn().unwrap();
    eventually(
        "the import to get going",
        Duration::from_secs(30),
        async || {
            let started = runs(&app).await;
            if started.first().is_some_and(|r| r.rows >= 400) {
                return true;
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "the import finished before it was killed"
            );
            false
        },
    )
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = runs(&app).await.remove(0);
    assert_eq!(killed.state, "running");
    assert!((killed.rows as usize) < ROWS, "it was killed mid-file");

    // A live heartbeat is never abandoned; a silent one is, once it is
    // older than the limit (time moved on instead of waiting a minute).
    let now = domain::clock::now();
    let after = domain::import::ABANDONED_AFTER;
    assert_eq!(
        domain::import::abandon_silent_runs(&app.db, now, after)
            .await
            .unwrap(),
        0
    );
    let later = now + chrono::TimeDelta::from_std(after).unwrap() + chrono::TimeDelta::seconds(1);
    assert_eq!(
        domain::import::abandon_silent_runs(&app.db, later, after)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        domain::import::abandon_silent_runs(&app.db, later, after)
            .await
            .unwrap(),
        0
    );

    let ops = app.token(Role::Ops, None).await;
    let shown: Value = app
        .api(&ops)
        .get(&format!("/api/imports/{}", killed.id))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["state"], "abandoned", "{shown}");
    assert!(
        shown["error"].as_str().unwrap().contains("same file again"),
        "{shown}"
    );

    // Resume: the same file again.
    let status = import(&app, &file).status().unwrap();
    assert!(status.success());
    let all = runs(&app).await;
    assert_eq!(all.len(), 2);
    let resumed = &all[1];
    assert_eq!(resumed.state, "done");
    assert_eq!(resumed.rows as usize, ROWS);
    assert_eq!(
        resumed.created as usize,
        ROWS - killed.rows as usize,
        "{resumed:?}"
    );
    assert_eq!(app.count(lead::Entity).await as usize, ROWS);
    let _ = std::fs::remove_dir_all(&dir);
}
