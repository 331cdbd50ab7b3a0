//! `GET /api/ops/stats/series` (inbox traffic per bucket) and the small read
//! endpoints the front page names people with (`/api/me`, `/api/principals`).

#![allow(clippy::unwrap_used)]

use chrono::{DateTime, Duration, Utc};
use domain::auth::Role;
use domain::entities::inbox_event;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ActiveModelTrait, Set};
use serde_json::{Value, json};

on_both_backends!(
    series_counts_events_per_bucket_and_the_duplicate_rate,
    series_refuses_an_unknown_window_and_other_roles,
    me_and_principals_name_people_without_token_material,
);

/// An inbox event received at `received` (delivered `deliveries` times),
/// processed at `processed` when given.
async fn seed_event(
    app: &TestApp,
    event_id: &str,
    received: DateTime<Utc>,
    processed: Option<DateTime<Utc>>,
    deliveries: i32,
) {
    inbox_event::ActiveModel {
        source: Set("partner".into()),
        event_id: Set(event_id.into()),
        event_id_from: Set("header".into()),
        headers: Set(json!({})),
        body: Set(b"{}".to_vec()),
        state: Set(if processed.is_some() {
            "processed"
        } else {
            "received"
        }
        .into()),
        deliveries: Set(deliveries),
        attempts: Set(i32::from(processed.is_some())),
        retries: Set(0),
        received_at: Set(received),
        last_delivery_at: Set(received),
        processed_at: Set(processed),
        updated_at: Set(processed.unwrap_or(received)),
        ..Default::default()
    }
    .insert(&app.db)
    .await
    .unwrap();
}

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, 0).unwrap()
}

/// The bucket of `series` that starts at `start`.
fn bucket(series: &Value, start: DateTime<Utc>) -> &Value {
    let buckets = series["buckets"].as_array().unwrap();
    buckets
        .iter()
        .find(|b| {
            b["start"]
                .as_str()
                .unwrap()
                .parse::<DateTime<Utc>>()
                .unwrap()
                == start
        })
        .unwrap_or_else(|| panic!("no bucket starts at {start}: {series}"))
}

fn total(series: &Value, field: &str) -> i64 {
    series["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[field].as_i64().unwrap())
        .sum()
}

async fn series_counts_events_per_bucket_and_the_duplicate_rate(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.standard_source("partner").await;
    let ops = app.token(Role::Ops, None).await;
    // Whole minutes and quarter hours before now; a minute passing during the
    // test shifts the window by one bucket but keeps these buckets in it.
    let minute = Utc::now().timestamp().div_euclid(60) * 60;
    let five_ago = minute - 5 * 60;
    let three_ago = minute - 3 * 60;
    let two_hours_ago = minute - 2 * 3600;
    seed_event(&app, "a", at(five_ago + 10), Some(at(three_ago + 5)), 3).await;
    seed_event(&app, "b", at(five_ago + 50), Some(at(three_ago + 20)), 1).await;
    seed_event(&app, "c", at(five_ago + 30), None, 1).await;
    seed_event(
        &app,
        "d",
        at(two_hours_ago + 1),
        Some(at(two_hours_ago + 30)),
        2,
    )
    .await;
    seed_event(
        &app,
        "e",
        at(minute - 3 * 86_400),
        Some(at(minute - 3 * 86_400)),
        1,
    )
    .await;

    let response = app.api(&ops).get("/api/ops/stats/series?window=1h").await;
    assert_eq!(response.status(), 200);
    let hour: Value = response.json().await.unwrap();
    assert_eq!(hour["window"], "1h");
    assert_eq!(hour["bucket_seconds"], 60);
    assert_eq!(hour["buckets"].as_array().unwrap().len(), 60);
    let received = bucket(&hour, at(five_ago));
    assert_eq!(received["received"], 3, "{received}");
    assert_eq!(received["deliveries"], 5, "{received}");
    assert_eq!(received["duplicate_rate"], 0.4, "{received}");
    assert_eq!(received["processed"], 0, "{received}");
    assert_eq!(bucket(&hour, at(three_ago))["processed"], 2);
    assert_eq!(
        total(&hour, "received"),
        3,
        "older events are outside the hour"
    );
    assert_eq!(total(&hour, "processed"), 2);

    // The default window is the hour.
    let default: Value = app
        .api(&ops)
        .get("/api/ops/stats/series")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(default["window"], "1h");

    let day: Value = app
        .api(&ops)
        .get("/api/ops/stats/series?window=24h")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(day["window"], "24h");
    assert_eq!(day["bucket_seconds"], 900);
    assert_eq!(day["buckets"].as_array().unwrap().len(), 96);
    let quarter = |t: i64| at(t.div_euclid(900) * 900);
    let old = bucket(&day, quarter(two_hours_ago + 1));
    assert_eq!(old["received"], 1, "{old}");
    assert_eq!(old["processed"], 1, "{old}");
    assert_eq!(old["duplicate_rate"], 0.5, "{old}");
    assert_eq!(
        total(&day, "received"),
        4,
        "three days ago is outside the day"
    );
    assert_eq!(total(&day, "processed"), 3);
    let from: DateTime<Utc> = day["from"].as_str().unwrap().parse().unwrap();
    let to: DateTime<Utc> = day["to"].as_str().unwrap().parse().unwrap();
    assert_eq!(to - from, Duration::hours(24));
}

async fn series_refuses_an_unknown_window_and_other_roles(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ops = app.token(Role::Ops, None).await;
    let sales = app.token(Role::Sales, None).await;
    let body = assert_problem(
        app.api(&ops).get("/api/ops/stats/series?window=7d").await,
        422,
        "/problems/validation",
    )
    .await;
    assert_eq!(body["errors"][0]["field"], "window", "{body}");
    assert_problem(
        app.api(&sales).get("/api/ops/stats/series").await,
        403,
        "/problems/forbidden",
    )
    .await;
    let anonymous = app
        .client
        .get(app.url("/api/ops/stats/series"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

async fn me_and_principals_name_people_without_token_material(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let issued = domain::auth::create_principal(&app.db, "Grace Hopper", Role::Sales, None)
        .await
        .unwrap();
    let sales = issued.token;
    let intake = app.token(Role::Intake, Some("webform")).await;

    let me: Value = app.api(&sales).get("/api/me").await.json().await.unwrap();
    assert_eq!(
        me,
        json!({"id": issued.principal.id, "name": "Grace Hopper", "role": "sales", "active": true,
            "team": null, "availability": "available", "away_until": null, "capacity": null,
            "version": 1})
    );
    let response = app.api(&intake).get("/api/me").await;
    assert_eq!(response.status(), 200);
    let me: Value = response.json().await.unwrap();
    assert_eq!(
        (me["role"].as_str(), me["source"].as_str()),
        (Some("intake"), Some("webform"))
    );

    let response = app.api(&sales).get("/api/principals").await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(!text.contains("lp_") && !text.contains("token"), "{text}");
    let all: Value = serde_json::from_str(&text).unwrap();
    let grace = all
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == issued.principal.id)
        .unwrap();
    assert_eq!(grace["name"], "Grace Hopper");
    assert_eq!(all.as_array().unwrap().len(), 2);

    assert_problem(
        app.api(&intake).get("/api/principals").await,
        403,
        "/problems/forbidden",
    )
    .await;
}
