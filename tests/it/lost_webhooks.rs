//! Lost webhooks, reported: a source that has gone quiet for longer than it
//! usually does (`quiet_seconds`, `usual_gap_seconds` in `/api/ops/stats`,
//! `leadpipe_source_quiet_seconds` and `leadpipe_source_usual_gap_seconds`
//! in a scrape), and what reconcile found the webhooks missed, per source
//! and window (`reconciled`, `missed`, `missed_rate`) and per bucket of
//! `/api/ops/stats/series`.

#![allow(clippy::unwrap_used)]

use chrono::{DateTime, Duration, Utc};
use domain::auth::Role;
use domain::entities::{inbox_event, reconcile_run};
use leadpipe_tests::prometheus::{sample, series_value};
use leadpipe_tests::webhooks::standard_secret;
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use sea_orm::{ActiveModelTrait, Set};
use serde_json::{Value, json};

on_both_backends!(
    a_quiet_source_shows_its_silence_against_its_usual_gap,
    an_expected_interval_is_the_usual_gap_of_its_source,
    what_reconcile_found_missing_shows_per_source_and_per_bucket,
);

async fn seed_event(app: &TestApp, source: &str, event_id: &str, received: DateTime<Utc>) {
    inbox_event::ActiveModel {
        source: Set(source.into()),
        event_id: Set(event_id.into()),
        event_id_from: Set("header".into()),
        headers: Set(json!({})),
        body: Set(b"{}".to_vec()),
        state: Set("processed".into()),
        deliveries: Set(1),
        attempts: Set(1),
        retries: Set(0),
        received_at: Set(received),
        last_delivery_at: Set(received),
        processed_at: Set(Some(received)),
        updated_at: Set(received),
        ..Default::default()
    }
    .insert(&app.db)
    .await
    .unwrap();
}

/// A finished reconcile run of `source` that last wrote at `at`.
async fn seed_run(
    app: &TestApp,
    source: &str,
    at: DateTime<Utc>,
    (fetched, missed): (i64, i64),
    dry_run: bool,
) {
    reconcile_run::ActiveModel {
        source: Set(source.into()),
        state: Set("done".into()),
        dry_run: Set(dry_run),
        trigger: Set("schedule".into()),
        pages: Set(1),
        fetched: Set(fetched),
        created: Set(missed),
        updated: Set(0),
        unchanged: Set(fetched - missed),
        stale: Set(0),
        suppressed: Set(0),
        rejected: Set(0),
        missed: Set(missed),
        started_at: Set(at - Duration::seconds(5)),
        heartbeat_at: Set(at),
        finished_at: Set(Some(at)),
        ..Default::default()
    }
    .insert(&app.db)
    .await
    .unwrap();
}

async fn stats_of(app: &TestApp, ops: &str, source: &str) -> Value {
    let response = app.api(ops).get("/api/ops/stats").await;
    assert_eq!(response.status(), 200);
    let stats: Value = response.json().await.unwrap();
    stats["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == source)
        .unwrap_or_else(|| panic!("no source {source} in {stats}"))
        .clone()
}

fn seconds(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

async fn a_quiet_source_shows_its_silence_against_its_usual_gap(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ops = app.token(Role::Ops, None).await;
    for name in ["partner", "weekly", "fresh"] {
        app.standard_source(name).await;
    }
    let now = Utc::now();
    // Every ten minutes, the last an hour ago.
    for k in 0..8 {
        let at = now - Duration::hours(1) - Duration::minutes(10 * k);
        seed_event(&app, "partner", &format!("p{k}"), at).await;
    }
    // Once a week: too few deliveries to learn a rhythm from.
    for k in 0..3 {
        let at = now - Duration::days(2) - Duration::days(7 * k);
        seed_event(&app, "weekly", &format!("w{k}"), at).await;
    }

    let partner = stats_of(&app, &ops, "partner").await;
    assert_eq!(seconds(&partner["usual_gap_seconds"]), 600.0, "{partner}");
    let quiet = seconds(&partner["quiet_seconds"]);
    assert!((3600.0..3700.0).contains(&quiet), "{partner}");
    let weekly = stats_of(&app, &ops, "weekly").await;
    assert_eq!(weekly["usual_gap_seconds"], Value::Null, "{weekly}");
    let quiet = seconds(&weekly["quiet_seconds"]);
    assert!((172_800.0..172_900.0).contains(&quiet), "{weekly}");
    let fresh = stats_of(&app, &ops, "fresh").await;
    assert_eq!(fresh["quiet_seconds"], Value::Null, "{fresh}");
    assert_eq!(fresh["usual_gap_seconds"], Value::Null, "{fresh}");

    let text = app
        .metrics_until("the quiet gauges", |t| {
            t.contains("leadpipe_source_quiet_seconds{source=\"weekly\"}")
        })
        .await;
    assert_eq!(
        series_value(
            &text,
            "leadpipe_source_usual_gap_seconds{source=\"partner\"}"
        ),
        Some(600.0),
        "{text}"
    );
    let quiet = sample(
        &text,
        "leadpipe_source_quiet_seconds",
        &[("source", "partner")],
    );
    assert!((3600.0..3700.0).contains(&quiet), "{text}");
    assert!(
        !text.contains("leadpipe_source_usual_gap_seconds{source=\"weekly\"}"),
        "no usual gap is learned from three deliveries: {text}"
    );
    assert!(
        !text.contains("leadpipe_source_quiet_seconds{source=\"fresh\"}"),
        "{text}"
    );
}

async fn an_expected_interval_is_the_usual_gap_of_its_source(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ops = app.token(Role::Ops, None).await;
    let admin = app.admin_token().await;
    app.standard_source("partner").await;
    let now = Utc::now();
    for k in 0..8 {
        let at = now - Duration::hours(1) - Duration::minutes(10 * k);
        seed_event(&app, "partner", &format!("p{k}"), at).await;
    }
    let response = app
        .api(&admin)
        .patch_source("partner", &json!({"expected_interval": "2h"}))
        .await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["expected_interval"], "2h", "{body}");
    let partner = stats_of(&app, &ops, "partner").await;
    assert_eq!(seconds(&partner["usual_gap_seconds"]), 7200.0, "{partner}");

    let text = app
        .metrics_until("the configured gap", |t| {
            series_value(t, "leadpipe_source_usual_gap_seconds{source=\"partner\"}") == Some(7200.0)
        })
        .await;
    assert!(text.contains("leadpipe_source_quiet_seconds{source=\"partner\"}"));

    // Cleared with null: learned again.
    let response = app
        .api(&admin)
        .patch_source("partner", &json!({"expected_interval": null}))
        .await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let partner = stats_of(&app, &ops, "partner").await;
    assert_eq!(seconds(&partner["usual_gap_seconds"]), 600.0, "{partner}");

    // Given at creation, it shows as written; a source that never delivered
    // has a usual gap but no silence to compare it with yet.
    let response = app
        .api(&admin)
        .create_source(&json!({"name": "nightly", "scheme": "standard-webhooks",
            "secrets": [standard_secret(b"nightly-signing-key-0123456789")],
            "expected_interval": "1d"}))
        .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["expected_interval"], "1d", "{body}");
    let nightly = stats_of(&app, &ops, "nightly").await;
    assert_eq!(
        seconds(&nightly["usual_gap_seconds"]),
        86_400.0,
        "{nightly}"
    );
    assert_eq!(nightly["quiet_seconds"], Value::Null, "{nightly}");

    // Not a duration: refused, naming the field.
    let response = app
        .api(&admin)
        .patch_source("partner", &json!({"expected_interval": "often"}))
        .await;
    assert_eq!(response.status(), 422, "{}", response.text().await.unwrap());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errors"][0]["field"], "expected_interval", "{body}");
}

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, 0).unwrap()
}

async fn what_reconcile_found_missing_shows_per_source_and_per_bucket(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ops = app.token(Role::Ops, None).await;
    app.standard_source("partner").await;
    app.standard_source("other").await;
    let minute = Utc::now().timestamp().div_euclid(60) * 60;
    let five_ago = minute - 5 * 60;
    seed_run(&app, "partner", at(five_ago + 10), (10, 3), false).await;
    // A dry run repairs nothing: not counted.
    seed_run(&app, "partner", at(five_ago + 20), (4, 4), true).await;
    seed_run(&app, "partner", at(minute - 3 * 86_400), (5, 5), false).await;
    seed_run(&app, "other", at(five_ago + 30), (6, 0), false).await;

    let partner = stats_of(&app, &ops, "partner").await;
    for window in ["last_hour", "last_day"] {
        let w = &partner[window];
        assert_eq!(
            (&w["reconciled"], &w["missed"], &w["missed_rate"]),
            (&json!(10), &json!(3), &json!(0.3)),
            "{window}: {partner}"
        );
    }
    let all = &partner["all_time"];
    assert_eq!(
        (&all["reconciled"], &all["missed"]),
        (&json!(15), &json!(8))
    );
    let other = stats_of(&app, &ops, "other").await;
    assert_eq!(other["last_hour"]["missed_rate"], 0.0, "{other}");
    assert_eq!(other["last_hour"]["reconciled"], 6, "{other}");

    let response = app.api(&ops).get("/api/ops/stats/series?window=1h").await;
    assert_eq!(response.status(), 200);
    let hour: Value = response.json().await.unwrap();
    let buckets = hour["buckets"].as_array().unwrap();
    let bucket = buckets
        .iter()
        .find(|b| {
            b["start"]
                .as_str()
                .unwrap()
                .parse::<DateTime<Utc>>()
                .unwrap()
                == at(five_ago)
        })
        .unwrap_or_else(|| panic!("no bucket five minutes ago: {hour}"));
    assert_eq!(
        (
            &bucket["reconciled"],
            &bucket["missed"],
            &bucket["missed_rate"]
        ),
        (&json!(16), &json!(3), &json!(0.1875)),
        "{bucket}"
    );
    let missed: i64 = buckets.iter().map(|b| b["missed"].as_i64().unwrap()).sum();
    assert_eq!(missed, 3, "older runs are outside the hour");

    // One source's figures.
    let response = app
        .api(&ops)
        .get("/api/ops/stats/series?window=24h&source=partner")
        .await;
    assert_eq!(response.status(), 200);
    let day: Value = response.json().await.unwrap();
    assert_eq!(day["source"], "partner", "{day}");
    let sum = |field: &str| -> i64 {
        day["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b[field].as_i64().unwrap())
            .sum()
    };
    assert_eq!((sum("reconciled"), sum("missed")), (10, 3), "{day}");
}
