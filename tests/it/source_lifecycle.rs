//! A source's life after it is created: paused (deliveries stored and
//! answered, not processed) and resumed (processed in the order they
//! arrived), and removed (its secrets gone, its name answered as unknown,
//! its intake tokens revoked; its events and leads kept), through the API
//! and the command line, on SQLite and PostgreSQL.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use domain::entities::{inbox_event, lead};
use leadpipe_tests::cli::output_text;
use leadpipe_tests::client::Answer;
use leadpipe_tests::prometheus::series_value;
use leadpipe_tests::webhooks::{lead_event, now, standard_headers};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use reqwest::Method;
use serde_json::{Value, json};

on_both_backends!(
    a_paused_source_holds_its_events_while_others_flow_and_resume_applies_them_in_order,
    pause_and_resume_answer_the_source_and_honour_if_match,
    a_removed_source_is_unknown_its_tokens_stop_and_its_events_and_leads_stay,
    the_command_line_pauses_resumes_and_removes,
);

fn event(email: &str) -> Vec<u8> {
    lead_event("form-1", email, "2026-11-30T10:00:00Z")
}

async fn pause(app: &TestApp, token: &str, name: &str) -> reqwest::Response {
    app.api(token)
        .request(Method::POST, &format!("/api/sources/{name}/pause"))
        .await
}

async fn resume(app: &TestApp, token: &str, name: &str) -> reqwest::Response {
    app.api(token)
        .request(Method::POST, &format!("/api/sources/{name}/resume"))
        .await
}

async fn ack_id(response: reqwest::Response) -> i64 {
    response.expect(202).await["id"].as_i64().unwrap()
}

fn stats_of<'a>(stats: &'a Value, source: &str) -> &'a Value {
    stats["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == source)
        .unwrap_or_else(|| panic!("no stats for {source}: {stats}"))
}

async fn a_paused_source_holds_its_events_while_others_flow_and_resume_applies_them_in_order(
    backend: Backend,
) {
    let app = TestApp::spawn_with_workers(backend).await;
    let webform = app.standard_source("webform").await;
    let ads = app.standard_source("ads").await;
    let ops = app.token(Role::Ops, None).await;

    let paused = pause(&app, &ops, "webform").await.expect(200).await;
    assert_eq!(paused["state"], "paused");

    // Verified, stored and answered as ever: three versions of one lead.
    let mut held = Vec::new();
    for (n, email) in [
        "first@example.com",
        "second@example.com",
        "third@example.com",
    ]
    .into_iter()
    .enumerate()
    {
        let id = ack_id(
            app.post_standard("webform", &webform, &format!("msg_{n}"), &event(email))
                .await,
        )
        .await;
        held.push(id);
    }
    // Forged deliveries are still refused while paused.
    let body = event("x@example.com");
    let forged = standard_headers(b"not-the-key-at-all-000", "msg_f", now(), &body);
    assert_eq!(
        app.post_webhook("webform", &forged, &body).await.status(),
        401
    );

    // Another source's later event is processed meanwhile: the held ones
    // do not block it, and were never claimed.
    let other = ack_id(
        app.post_standard(
            "ads",
            &ads,
            "msg_ads",
            &lead_event("ad-1", "a@example.com", "2026-11-30T10:00:00Z"),
        )
        .await,
    )
    .await;
    app.wait_for_state(other, "processed").await;
    for id in &held {
        let event = app.inbox_event(*id).await;
        assert_eq!((event.state.as_str(), event.attempts), ("received", 0));
    }
    assert_eq!(app.count(lead::Entity).await, 1, "only the ads lead");
    // Nor does an attempt at one by its id take it.
    let step = app
        .processor(workers::WorkerSettings::for_tests())
        .process(held[0])
        .await
        .unwrap();
    assert_eq!(step, workers::inbox_job::Step::NothingToDo);
    assert_eq!(app.inbox_event(held[0]).await.state, "received");

    // The state shows in the list, the source and the stats.
    let admin = app.admin_token().await;
    let list = app.api(&admin).get("/api/sources").await.expect(200).await;
    let states: Vec<(&str, &str)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("ads", "active"), ("webform", "paused")]);
    let one = app.api(&ops).source("webform").await.expect(200).await;
    assert_eq!(one["state"], "paused");
    let stats = app.api(&ops).get("/api/ops/stats").await.expect(200).await;
    assert_eq!(stats_of(&stats, "webform")["state"], "paused");
    assert_eq!(stats_of(&stats, "webform")["inbox"]["received"], 3);
    assert_eq!(stats_of(&stats, "ads")["state"], "active");
    // Metrics: the pause shows, and held events are not the workers' lag.
    let scrape = app
        .metrics_until("webform paused in the gauges", |text| {
            series_value(text, "leadpipe_source_paused{source=\"webform\"}") == Some(1.0)
        })
        .await;
    assert_eq!(
        series_value(&scrape, "leadpipe_source_paused{source=\"ads\"}"),
        Some(0.0)
    );
    assert_eq!(
        series_value(
            &scrape,
            "leadpipe_inbox_oldest_unprocessed_age_seconds{source=\"webform\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        series_value(
            &scrape,
            "leadpipe_inbox_events{source=\"webform\",state=\"received\"}"
        ),
        Some(3.0)
    );

    // Resumed: applied in the order they arrived, so the last one wins.
    let resumed = resume(&app, &ops, "webform").await.expect(200).await;
    assert_eq!(resumed["state"], "active");
    let mut outcomes = Vec::new();
    for id in &held {
        let event = app.wait_for_state(*id, "processed").await;
        outcomes.push(event.outcome.unwrap());
    }
    assert_eq!(outcomes, ["created", "updated", "updated"]);
    let lead = app.lead_by_ref("form-1").await;
    assert_eq!(lead.email.as_deref(), Some("third@example.com"));
    let stats = app.api(&ops).get("/api/ops/stats").await.expect(200).await;
    assert_eq!(stats_of(&stats, "webform")["state"], "active");
    assert_eq!(stats_of(&stats, "webform")["inbox"]["processed"], 3);
}

async fn pause_and_resume_answer_the_source_and_honour_if_match(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.standard_source("webform").await;
    let admin = app.admin_token().await;
    let version = app.source_row("webform").await.version;

    // A stale ETag changes nothing.
    let stale = app
        .api(&admin)
        .request(Method::POST, "/api/sources/webform/pause")
        .if_match(version + 5)
        .await;
    assert_problem(stale, 412, "/problems/precondition-failed").await;
    assert_eq!(app.source_row("webform").await.state, "active");

    let paused = app
        .api(&admin)
        .request(Method::POST, "/api/sources/webform/pause")
        .if_match(version)
        .await;
    assert_eq!(
        paused.headers()["etag"].to_str().unwrap(),
        format!("\"{}\"", version + 1)
    );
    let paused = paused.expect(200).await;
    assert_eq!(
        (paused["state"].clone(), paused["version"].clone()),
        (json!("paused"), json!(version + 1))
    );
    // Pausing a paused source changes nothing, not even the version.
    let again = pause(&app, &admin, "webform").await.expect(200).await;
    assert_eq!(again["version"], version + 1);
    // A change of configuration keeps the state.
    let patched = app
        .api(&admin)
        .patch_source("webform", &json!({"tolerance_secs": 600}))
        .await
        .expect(200)
        .await;
    assert_eq!(patched["state"], "paused");
    let resumed = resume(&app, &admin, "webform").await.expect(200).await;
    assert_eq!(resumed["state"], "active");
    assert_eq!(app.source_row("webform").await.state, "active");

    for path in ["/api/sources/nobody/pause", "/api/sources/nobody/resume"] {
        let response = app.api(&admin).request(Method::POST, path).await;
        assert_problem(response, 404, "/problems/not-found").await;
    }
    // Sales may not.
    let sales = app.token(Role::Sales, None).await;
    assert_problem(
        pause(&app, &sales, "webform").await,
        403,
        "/problems/forbidden",
    )
    .await;
}

async fn a_removed_source_is_unknown_its_tokens_stop_and_its_events_and_leads_stay(
    backend: Backend,
) {
    // Servers that remember a token accept a revoked one for at most
    // LEADPIPE_AUTH_CACHE_SECS more, as with `token revoke`: none here.
    let mut http = api::config::HttpSettings::for_tests();
    http.auth_cache_secs = 0;
    let app = TestApp::spawn_with(backend, http).await;
    let key = app.standard_source("webform").await;
    app.standard_source("ads").await;
    let admin = app.admin_token().await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let other_intake = app.token(Role::Intake, Some("ads")).await;
    let record =
        |r: &str| json!({"source": "webform", "source_ref": r, "email": "ada@example.com"});
    app.api(&intake)
        .create_lead(&record("r-1"))
        .await
        .expect(201)
        .await;
    // Stored, not yet processed (no workers here).
    let waiting = ack_id(
        app.post_standard("webform", &key, "msg_1", &event("ada@example.com"))
            .await,
    )
    .await;

    let version = app.source_row("webform").await.version;
    let stale = app
        .api(&admin)
        .delete("/api/sources/webform")
        .if_match(version + 1)
        .await;
    assert_problem(stale, 412, "/problems/precondition-failed").await;
    let removed = app
        .api(&admin)
        .delete("/api/sources/webform")
        .if_match(version)
        .await
        .expect(200)
        .await;
    assert_eq!(
        removed,
        json!({"name": "webform", "revoked_intake_principals": 1, "abandoned_events": 1})
    );

    // Its secrets are gone; the row only holds the name its events carry.
    let row = app.source_row("webform").await;
    assert_eq!(
        (row.state.as_str(), row.secrets.clone()),
        ("removed", json!([]))
    );
    assert_problem(
        app.api(&admin).source("webform").await,
        404,
        "/problems/not-found",
    )
    .await;
    let list = app.api(&admin).get("/api/sources").await.expect(200).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    // Gone from the figures too: a removed source is not "quiet".
    let stats = app
        .api(&admin)
        .get("/api/ops/stats")
        .await
        .expect(200)
        .await;
    assert!(
        stats["sources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["source"] != "webform" || s["quiet_seconds"].is_null()),
        "{stats}"
    );
    assert!(
        !app.metrics()
            .await
            .contains("leadpipe_source_quiet_seconds{source=\"webform\"}"),
        "no quiet time for a removed source"
    );
    assert_problem(
        app.api(&admin).delete("/api/sources/webform").await,
        404,
        "/problems/not-found",
    )
    .await;
    for response in [
        app.api(&admin)
            .patch_source("webform", &json!({"tolerance_secs": 60}))
            .await,
        pause(&app, &admin, "webform").await,
    ] {
        assert_problem(response, 404, "/problems/not-found").await;
    }

    // Deliveries get the answer any unknown name gets.
    let body = event("ada@example.com");
    let removed_answer = app
        .post_webhook(
            "webform",
            &standard_headers(&key, "msg_2", now(), &body),
            &body,
        )
        .await;
    let unknown_answer = app
        .post_webhook(
            "nobody",
            &standard_headers(&key, "msg_2", now(), &body),
            &body,
        )
        .await;
    let removed_problem = assert_problem(removed_answer, 401, "/problems/invalid-signature").await;
    let unknown_problem = assert_problem(unknown_answer, 401, "/problems/invalid-signature").await;
    assert_eq!(removed_problem["detail"], unknown_problem["detail"]);

    // Its intake token stops; another source's goes on.
    assert_problem(
        app.api(&intake).create_lead(&record("r-2")).await,
        401,
        "/problems/unauthorized",
    )
    .await;
    app.api(&other_intake)
        .create_lead(&json!({"source": "ads", "source_ref": "a-1"}))
        .await
        .expect(201)
        .await;

    // Its events and leads stay; the waiting one ended dead, saying why.
    assert_eq!(app.count(inbox_event::Entity).await, 1);
    let event = app.inbox_event(waiting).await;
    assert_eq!(
        (event.state.as_str(), event.last_error.as_deref()),
        ("dead", Some("the source was removed"))
    );
    assert_eq!(app.count(lead::Entity).await, 2);

    // A source created again under the name starts afresh.
    let created = app
        .api(&admin)
        .create_source(&json!({"name": "webform", "scheme": "standard-webhooks",
            "secrets": [leadpipe_tests::webhooks::standard_secret(b"a-brand-new-signing-key")]}))
        .await
        .expect(201)
        .await;
    assert_eq!(created["state"], "active");
    assert!(created["version"].as_i64().unwrap() > version + 1);
    assert_eq!(
        app.post_standard("webform", &key, "msg_3", &body)
            .await
            .status(),
        401,
        "the old secret went with the old source"
    );
    assert_eq!(
        app.post_standard("webform", b"a-brand-new-signing-key", "msg_3", &body)
            .await
            .status(),
        202
    );
}

async fn the_command_line_pauses_resumes_and_removes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.standard_source("webform").await;

    let output = app.run_cli(&["source", "pause", "webform"], &[]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shown["state"], "paused");
    assert_eq!(app.source_row("webform").await.state, "paused");

    let output = app.run_cli(&["source", "list", "-o", "json"], &[]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let listed: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(listed["state"], "paused", "{stdout}");

    let output = app.run_cli(&["source", "resume", "webform"], &[]);
    assert!(output.status.success(), "{}", output_text(&output));
    assert_eq!(app.source_row("webform").await.state, "active");

    let output = app.run_cli(&["source", "remove", "webform"], &[]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("source 'webform' removed"), "{text}");
    assert_eq!(app.source_row("webform").await.state, "removed");

    let output = app.run_cli(&["source", "remove", "webform"], &[]);
    assert_eq!(output.status.code(), Some(3), "{}", output_text(&output));
    let output = app.run_cli(&["source", "pause", "nobody"], &[]);
    assert_eq!(output.status.code(), Some(3), "{}", output_text(&output));
}
