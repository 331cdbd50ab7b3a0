//! Metrics, traces by correlation id.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use leadpipe_tests::prometheus::sample;
use leadpipe_tests::receiver::Receiver;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::EntityTrait;
use serde_json::{Value, json};

async fn scrape(app: &TestApp) -> String {
    app.metrics().await
}

on_both_backends!(
    counters_follow_requests_ingests_and_replays,
    a_trace_follows_one_request_everywhere
);

async fn counters_follow_requests_ingests_and_replays(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let before = scrape(&app).await;
    let created = |t: &str| {
        sample(
            t,
            "leadpipe_ingest_total",
            &[("origin", "api"), ("outcome", "created")],
        )
    };
    let posts = |t: &str| {
        sample(
            t,
            "leadpipe_http_requests_total",
            &[
                ("route", "/api/leads"),
                ("status", "201"),
                ("method", "POST"),
            ],
        )
    };
    let replays = |t: &str| {
        sample(
            t,
            "leadpipe_idempotency_requests_total",
            &[("result", "replayed")],
        )
    };

    let lead: Value = app
        .api(&intake)
        .create_lead(&json!({"source": "webform", "source_ref": "m-1"}))
        .await
        .json()
        .await
        .unwrap();
    let id = lead["id"].as_i64().unwrap();
    for _ in 0..2 {
        let r = app.api(&sales).add_note(id, "hi").key("m-note").await;
        assert_eq!(r.status(), 201);
    }
    let after = scrape(&app).await;
    // Other tests in this binary record too: compare at least the increments.
    assert!(created(&after) - created(&before) >= 1.0);
    assert!(posts(&after) - posts(&before) >= 1.0);
    assert!(replays(&after) - replays(&before) >= 1.0);
    assert!(after.contains("leadpipe_http_request_duration_seconds_bucket"));
    assert!(after.contains("# HELP leadpipe_ingest_total"));
}

async fn a_trace_follows_one_request_everywhere(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let ops = app.token(Role::Ops, None).await;
    let admin = app.token(Role::Admin, None).await;
    let receiver = Receiver::start().await;
    app.api(&admin).subscribe(&receiver, json!([])).await;

    let response = app
        .api(&intake)
        .create_lead(&json!({"source": "webform", "source_ref": "t-1", "name": "Traced"}))
        .header("x-request-id", "trace-me-1")
        .await;
    assert_eq!(response.status(), 201);
    workers::lead_processor::run_once(&app.db, 10)
        .await
        .unwrap();
    let publisher = app.publisher(leadpipe_tests::publishing::settings());
    while publisher.run_once().await.unwrap().attempted > 0 {}

    let trace: Value = app
        .api(&ops)
        .get("/api/ops/trace/trace-me-1")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(trace["leads"][0]["source_ref"], "t-1");
    let kinds: Vec<String> = trace["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e["kind"].as_str().unwrap() {
            "activity" => format!("activity:{}", e["activity"]["kind"].as_str().unwrap()),
            "outbox_event" => format!("event:{}", e["event"]["event_type"].as_str().unwrap()),
            other => format!("{other}:{}", e["delivery"]["state"].as_str().unwrap()),
        })
        .collect();
    for expected in [
        "activity:ingest",
        "event:lead.created",
        "activity:assigned",
        "event:lead.assigned",
        "delivery:delivered",
    ] {
        assert!(
            kinds.contains(&expected.to_owned()),
            "{expected} missing from {kinds:?}"
        );
    }
    assert_eq!(kinds[0], "activity:ingest");

    assert_problem(
        app.api(&ops).get("/api/ops/trace/nothing-here").await,
        404,
        "/problems/not-found",
    )
    .await;
    assert_problem(
        app.api(&sales).get("/api/ops/trace/trace-me-1").await,
        403,
        "/problems/forbidden",
    )
    .await;
}

/// The database gauges, refreshed in the background, follow the tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gauges_show_backlogs_from_the_database() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    for i in 0..3 {
        app.api(&intake)
            .create_lead(&json!({"source": "webform", "source_ref": format!("g-{i}")}))
            .await;
    }
    let text = app
        .metrics_until("a backlog of three", |t| {
            sample(t, "leadpipe_leads_processing_backlog", &[]) == 3.0
        })
        .await;
    assert_eq!(sample(&text, "leadpipe_outbox_events_pending", &[]), 3.0);
    assert_eq!(sample(&text, "leadpipe_leads_processing_backlog", &[]), 3.0);
    workers::lead_processor::run_once(&app.db, 10)
        .await
        .unwrap();
    let text = app
        .metrics_until("an empty backlog", |t| {
            sample(t, "leadpipe_leads_processing_backlog", &[]) == 0.0
        })
        .await;
    assert_eq!(sample(&text, "leadpipe_leads_processing_backlog", &[]), 0.0);
}

on_both_backends!(webhook_counters_stats_and_trace_follow_a_delivery);

/// One event delivered three times, one forged: counters by result and
/// reason, per-source stats with the duplicate rate, and a trace from the
/// inbox row to the lead.
async fn webhook_counters_stats_and_trace_follow_a_delivery(backend: Backend) {
    use leadpipe_tests::webhooks::{lead_event, now, standard_headers};
    let app = TestApp::spawn_with_workers(backend).await;
    let source = format!(
        "obs-{}",
        uuid::Uuid::new_v4().simple().to_string().get(..8).unwrap()
    );
    let key = app.standard_source(&source).await;
    let before = scrape(&app).await;
    let body = lead_event("obs-1", "stats@example.com", "2026-11-30T10:00:00Z");
    let mut headers = standard_headers(&key, "msg_obs_1", now(), &body);
    headers.push(("x-request-id".into(), format!("trace-{source}")));
    for expected in [202, 200, 200] {
        assert_eq!(
            app.post_webhook(&source, &headers, &body).await.status(),
            expected
        );
    }
    let forged = standard_headers(b"not-the-key-at-all-0123456789", "msg_obs_2", now(), &body);
    assert_eq!(
        app.post_webhook(&source, &forged, &body).await.status(),
        401
    );
    let id: i64 = {
        let events = domain::entities::inbox_event::Entity::find()
            .all(&app.db)
            .await
            .unwrap();
        events.iter().find(|e| e.source == source).unwrap().id
    };
    app.wait_for_state(id, "processed").await;

    let after = app
        .metrics_until("the processed event counted", |t| {
            sample(
                t,
                "leadpipe_inbox_events",
                &[("source", &source), ("state", "processed")],
            ) == 1.0
        })
        .await;
    let count = |text: &str, result: &str, reason: &str| {
        sample(
            text,
            "leadpipe_webhook_deliveries_total",
            &[("source", &source), ("result", result), ("reason", reason)],
        )
    };
    assert_eq!(
        count(&after, "accepted", "") - count(&before, "accepted", ""),
        1.0
    );
    assert_eq!(
        count(&after, "duplicate", "") - count(&before, "duplicate", ""),
        2.0
    );
    assert_eq!(count(&after, "rejected", "no_matching_signature"), 1.0);
    assert_eq!(
        sample(
            &after,
            "leadpipe_inbox_events",
            &[("source", &source), ("state", "processed")]
        ),
        1.0
    );

    let ops = app.token(Role::Ops, None).await;
    let stats: Value = app
        .api(&ops)
        .get("/api/ops/stats")
        .await
        .json()
        .await
        .unwrap();
    let mine = stats["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == source.as_str())
        .unwrap()
        .clone();
    assert_eq!(mine["all_time"]["events"], 1);
    assert_eq!(mine["all_time"]["deliveries"], 3);
    assert_eq!(mine["last_hour"]["duplicates"], 2);
    let rate = mine["last_day"]["duplicate_rate"].as_f64().unwrap();
    assert!((rate - 2.0 / 3.0).abs() < 1e-9, "{rate}");
    assert_eq!(mine["inbox"]["processed"], 1);
    assert_eq!(mine["leads"], 1);
    assert!(mine["oldest_unprocessed_age_seconds"].is_null());
    let sales = app.token(Role::Sales, None).await;
    assert_problem(
        app.api(&sales).get("/api/ops/stats").await,
        403,
        "/problems/forbidden",
    )
    .await;

    let trace: Value = app
        .api(&ops)
        .get(&format!("/api/ops/trace/trace-{source}"))
        .await
        .json()
        .await
        .unwrap();
    let entries = trace["entries"].as_array().unwrap();
    assert_eq!(entries[0]["kind"], "inbox_event", "{trace:#}");
    assert_eq!(entries[0]["event"]["deliveries"], 3);
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "activity" && e["activity"]["origin"] == "webhook")
    );
    assert_eq!(trace["leads"][0]["source_ref"], "obs-1");
}
