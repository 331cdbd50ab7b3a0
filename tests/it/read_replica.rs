//! `DATABASE_READ_URL`: listings read from a PostgreSQL streaming replica
//! (the standby `scripts/test` starts next to the primary with
//! `pg_basebackup -R`), reads of one resource stay on the primary, and a
//! replica that lags past its bound or stops answering is bypassed.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use api::config::HttpSettings;
use domain::auth::Role;
use leadpipe_tests::prometheus::series_value;
use leadpipe_tests::{
    Backend, TestApp, eventually, fresh_postgres_database, on_both_backends, replica_url,
};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};
use serde_json::{Value, json};

on_both_backends!(listings_follow_the_replica_within_its_lag_bound);

fn record(source_ref: &str) -> Value {
    json!({
        "source": "webform",
        "source_ref": source_ref,
        "email": format!("{source_ref}@example.com"),
        "name": "Replica Test",
        "source_updated_at": "2026-11-01T10:00:00Z",
    })
}

fn with_replica(url: Option<String>, max_lag_secs: f64) -> HttpSettings {
    HttpSettings {
        database_read_url: url,
        read_max_lag_secs: max_lag_secs,
        ..HttpSettings::for_tests()
    }
}

async fn listed_refs(app: &TestApp, token: &str) -> Vec<String> {
    let response = app.api(token).get("/api/leads?limit=100").await;
    assert_eq!(response.status(), 200);
    let page: Value = response.json().await.unwrap();
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lead| lead["source_ref"].as_str().unwrap().to_owned())
        .collect()
}

/// Polls `check` for up to 20 s.
async fn listings_follow_the_replica_within_its_lag_bound(backend: Backend) {
    if backend == Backend::Sqlite {
        // A SQLite primary has no streaming replica: refused at start, not
        // silently ignored.
        let db = Database::connect("sqlite::memory:").await.unwrap();
        let db = domain::store::Store::new(
            db,
            &domain::sealed::Keyring::for_tests(),
            domain::store::Signals::new(),
        );
        let refused = api::startup::Application::build(
            db,
            with_replica(Some("postgres://postgres@127.0.0.1:1/replica".into()), 5.0),
        );
        let error = refused
            .err()
            .expect("a read replica beside SQLite must be refused");
        assert!(error.to_string().contains("DATABASE_READ_URL"), "{error}");
        return;
    }

    let primary_url = fresh_postgres_database().await;
    let replica_url = replica_url(&primary_url);
    // The new database reaches the standby through the WAL stream.
    eventually(
        "the database exists on the replica",
        Duration::from_secs(20),
        || async { Database::connect(&replica_url).await.is_ok() },
    )
    .await;
    let standby = Database::connect(&replica_url).await.unwrap();
    resume_replay(&standby).await;

    // Tolerates a long lag: shows where listings are read from.
    let patient = TestApp::spawn_on_postgres(
        primary_url.clone(),
        with_replica(Some(replica_url.clone()), 3600.0),
    )
    .await;
    // Tolerates half a second: shows the bypass.
    let strict = TestApp::spawn_on_postgres(
        primary_url.clone(),
        with_replica(Some(replica_url.clone()), 0.5),
    )
    .await;
    let intake = patient.token(Role::Intake, Some("webform")).await;
    let sales = patient.token(Role::Sales, None).await;

    assert_eq!(
        patient
            .api(&intake)
            .create_lead(&record("before-pause"))
            .await
            .status(),
        201
    );
    eventually(
        "the first lead is listed by both apps",
        Duration::from_secs(20),
        || async {
            listed_refs(&patient, &sales)
                .await
                .contains(&"before-pause".to_owned())
                && listed_refs(&strict, &sales)
                    .await
                    .contains(&"before-pause".to_owned())
        },
    )
    .await;

    // The standby stops replaying: it falls behind from here on.
    standby
        .execute_unprepared("SELECT pg_wal_replay_pause()")
        .await
        .unwrap();
    let created = patient
        .api(&intake)
        .create_lead(&record("during-pause"))
        .await;
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();

    // One lead by id is read from the primary: a client that just wrote it
    // (and wants its ETag for an If-Match) sees it at once.
    assert_eq!(
        patient
            .get(&sales, &format!("/api/leads/{id}"))
            .await
            .status(),
        200
    );
    // The patient app's listing comes from the paused replica, which has not
    // replayed the new lead.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let listed = listed_refs(&patient, &sales).await;
    assert!(listed.contains(&"before-pause".to_owned()), "{listed:?}");
    assert!(
        !listed.contains(&"during-pause".to_owned()),
        "listings must come from the replica while it is within its bound: {listed:?}"
    );
    // The strict app saw the lag pass half a second and reads the primary.
    eventually(
        "the strict app lists the new lead from the primary",
        Duration::from_secs(20),
        || async {
            listed_refs(&strict, &sales)
                .await
                .contains(&"during-pause".to_owned())
        },
    )
    .await;
    let lag = series_value(&strict.metrics().await, "leadpipe_read_replica_lag_seconds").unwrap();
    assert!(lag > 0.5, "the lag metric shows the paused replica: {lag}");

    // Replay resumes: the replica catches up and serves listings again.
    resume_replay(&standby).await;
    eventually(
        "the patient app lists the new lead from the replica",
        Duration::from_secs(20),
        || async {
            listed_refs(&patient, &sales)
                .await
                .contains(&"during-pause".to_owned())
        },
    )
    .await;
    eventually(
        "the lag metric falls back to zero",
        Duration::from_secs(20),
        || async {
            series_value(&strict.metrics().await, "leadpipe_read_replica_lag_seconds") == Some(0.0)
        },
    )
    .await;

    // A replica that does not answer (stopped, or never started): the app
    // starts all the same and serves every listing from the primary.
    let (base, name) = replica_url.rsplit_once('/').unwrap();
    let (host, _port) = base.rsplit_once(':').unwrap();
    let stopped = TestApp::spawn_on_postgres(
        primary_url.clone(),
        with_replica(Some(format!("{host}:1/{name}")), 3600.0),
    )
    .await;
    let listed = listed_refs(&stopped, &sales).await;
    assert!(listed.contains(&"during-pause".to_owned()), "{listed:?}");
    // And a second later still: the unreachable replica is never used.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let listed = listed_refs(&stopped, &sales).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
}

async fn resume_replay(standby: &DatabaseConnection) {
    standby
        .execute_unprepared("SELECT pg_wal_replay_resume()")
        .await
        .unwrap();
}
