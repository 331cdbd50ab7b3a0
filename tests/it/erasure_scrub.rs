//! The WAL checkpoint after an erasure on SQLite when a reader keeps it from
//! finishing: the erasure still answers, and housekeeping's retry truncates
//! the WAL once the reader is done. The pending retry belongs to the app's
//! store: another test's housekeeping cannot take it.

#![allow(clippy::unwrap_used)]

use leadpipe_tests::{Backend, TestApp};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, TransactionTrait};
use serde_json::{Value, json};

const CANARY: &str = "zq-scrub-canary";

/// Whether the SQLite database file or its `-wal` holds `needle`.
fn on_disk(app: &TestApp, needle: &str) -> Vec<&'static str> {
    let path = app
        .database_url
        .strip_prefix("sqlite://")
        .and_then(|rest| rest.split('?').next())
        .unwrap();
    ["", "-wal"]
        .into_iter()
        .filter(|suffix| {
            match std::fs::read(format!("{path}{suffix}")) {
                Ok(bytes) => bytes
                    .windows(needle.len())
                    .any(|window| window == needle.as_bytes()),
                // SQLite removes the `-wal` when its last connection closes
                // (the pool may close idle ones): a WAL that is gone holds
                // nothing. The database file itself must be there.
                Err(e) if *suffix == "-wal" && e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => panic!("reading {path}{suffix}: {e}"),
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_delays_the_wal_truncation_until_housekeeping_retries() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let admin = app.admin_token().await;
    let created = app
        .api(&admin)
        .create_lead(&json!({"source": "web", "source_ref": "r-1",
                    "email": format!("{CANARY}@example.com"), "name": CANARY}))
        .await;
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();

    // Another process's long read: its snapshot keeps the WAL in use.
    let reader = Database::connect(
        ConnectOptions::new(app.database_url.clone())
            .max_connections(1)
            .to_owned(),
    )
    .await
    .unwrap();
    let reading = reader.begin().await.unwrap();
    reading
        .execute_unprepared("SELECT count(*) FROM lead")
        .await
        .unwrap();

    let erased = app
        .client
        .delete(app.url(&format!("/api/leads/{id}?reason=ticket%201")))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(erased.status(), 200, "the erasure answers all the same");
    assert_eq!(
        on_disk(&app, CANARY),
        ["-wal"],
        "the reader kept the WAL from being truncated"
    );

    reading.commit().await.unwrap();
    reader.close().await.unwrap();
    app.db
        .scrub_if_pending(domain::erasure::ERASED_TABLES)
        .await;
    assert_eq!(on_disk(&app, CANARY), Vec::<&str>::new());
}
