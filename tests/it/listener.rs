//! The listener under attack: who may read `/metrics` and what a scrape
//! costs, rate limits on failed authentication and webhook floods, security
//! headers, CSV formula injection, `If-Match` that names no version (or
//! names it in another spelling), and
//! `converted` without a conversion.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use api::config::HttpSettings;
use domain::auth::Role;
use domain::entities::{inbox_event, lead, lead_conversion};
use leadpipe_tests::prometheus::sample;
use leadpipe_tests::webhooks::lead_event;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};

on_both_backends!(
    metrics_on_the_public_listener_need_an_ops_token,
    metrics_on_their_own_bind_need_no_token_and_leave_the_public_listener,
    a_scrape_answers_from_memory_while_the_database_is_down,
    failed_authentications_from_one_address_get_429_while_valid_tokens_work,
    a_webhook_flood_on_one_source_gets_429_and_other_sources_are_unaffected,
    an_unsigned_flood_cannot_throttle_a_real_sender,
    every_response_carries_the_security_headers,
    import_report_cells_that_start_a_formula_are_neutralised,
    if_match_that_names_no_current_version_is_412,
    if_match_compares_entity_tags_strongly,
    a_transition_cannot_convert_a_lead_only_the_conversion_can,
);

fn with_metrics_bind() -> HttpSettings {
    let mut settings = HttpSettings::for_tests();
    settings.metrics.bind = Some("127.0.0.1:0".into());
    settings
}

/// A token of our shape that no principal holds.
fn unknown_token(i: usize) -> String {
    format!("lp_{:0>43}", format!("guess{i}"))
}

async fn metrics_on_the_public_listener_need_an_ops_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let anonymous = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_problem(anonymous, 401, "/problems/unauthorized").await;
    let sales = app.token(Role::Sales, None).await;
    assert_problem(
        app.api(&sales).get("/metrics").await,
        403,
        "/problems/forbidden",
    )
    .await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    assert_problem(
        app.api(&intake).get("/metrics").await,
        403,
        "/problems/forbidden",
    )
    .await;
    for role in [Role::Ops, Role::Admin] {
        let token = app.token(role, None).await;
        let response = app.api(&token).get("/metrics").await;
        assert_eq!(response.status(), 200, "{role}");
        let text = response.text().await.unwrap();
        assert!(
            text.contains("leadpipe_metrics_gauges_age_seconds"),
            "{text}"
        );
    }
}

async fn metrics_on_their_own_bind_need_no_token_and_leave_the_public_listener(backend: Backend) {
    let app = TestApp::spawn_with(backend, with_metrics_bind()).await;
    let metrics = app.metrics_address.clone().unwrap();
    assert_ne!(metrics, app.address);

    let response = app
        .client
        .get(format!("{metrics}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("leadpipe_metrics_gauges_age_seconds")
    );
    // Nothing else is served there.
    let other = app
        .client
        .get(format!("{metrics}/api/leads"))
        .send()
        .await
        .unwrap();
    assert_problem(other, 404, "/problems/not-found").await;

    // And the public listener no longer knows the route, token or not.
    let ops = app.token(Role::Ops, None).await;
    assert_problem(
        app.api(&ops).get("/metrics").await,
        404,
        "/problems/not-found",
    )
    .await;
    let anonymous = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_problem(anonymous, 404, "/problems/not-found").await;
}

/// The database goes away: scrapes still answer 200 from memory, with the
/// last figures, the refresh failures counted and the figures' age growing.
/// With the pool closed, any query a scrape made would fail it.
async fn a_scrape_answers_from_memory_while_the_database_is_down(backend: Backend) {
    let app = TestApp::spawn_with(backend, with_metrics_bind()).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    for i in 0..2 {
        let lead = json!({"source": "webform", "source_ref": format!("m-{i}")});
        assert_eq!(app.api(&intake).create_lead(&lead).await.status(), 201);
    }
    let leads = |t: &str| sample(t, "leadpipe_leads", &[("source", "webform")]);
    app.metrics_until("two webform leads counted", |t| leads(t) == 2.0)
        .await;

    app.db.close_by_ref().await.unwrap();
    let down = app
        .metrics_until("a failed refresh counted", |t| {
            sample(t, "leadpipe_metrics_gauges_refresh_failures_total", &[]) >= 1.0
        })
        .await;
    assert_eq!(leads(&down), 2.0, "the last figures stay");
    assert_eq!(sample(&down, "leadpipe_leads_processing_backlog", &[]), 2.0);
    let age = sample(&down, "leadpipe_metrics_gauges_age_seconds", &[]);
    assert!(age.is_finite() && age > 0.0, "{age}");
    for _ in 0..5 {
        assert_eq!(leads(&app.metrics().await), 2.0);
    }
}

async fn failed_authentications_from_one_address_get_429_while_valid_tokens_work(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        HttpSettings {
            auth_fail_per_minute: 3,
            ..HttpSettings::for_tests()
        },
    )
    .await;
    let sales = app.token(Role::Sales, None).await;
    assert_eq!(app.api(&sales).get("/api/leads").await.status(), 200);
    let known_unknown = |t: &str| {
        sample(
            t,
            "leadpipe_auth_cache_total",
            &[("result", "known_unknown")],
        )
    };
    let before = known_unknown(&app.metrics().await);

    // A guesser: the first three wrong tokens are told 401 ...
    for i in 0..3 {
        let response = app.get(&unknown_token(i), "/api/leads").await;
        assert_problem(response, 401, "/problems/unauthorized").await;
    }
    // ... then to wait, whatever it tries next.
    for token in [
        unknown_token(3),
        unknown_token(0),
        "not-even-a-token".into(),
    ] {
        let response = app.api(&token).get("/api/leads").await;
        let retry_after: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&retry_after), "{retry_after}");
        let problem = assert_problem(response, 429, "/problems/too-many-requests").await;
        assert!(
            !problem.to_string().contains("guess"),
            "the token is not echoed: {problem}"
        );
    }

    // Valid tokens from the same address are not limited: one in use, and
    // one this server has never seen.
    assert_eq!(app.api(&sales).get("/api/leads").await.status(), 200);
    let fresh = app.token(Role::Ops, None).await;
    assert_eq!(app.api(&fresh).get("/api/leads").await.status(), 200);
    let text = app.metrics().await;
    assert!(
        sample(
            &text,
            "leadpipe_rate_limited_total",
            &[("limit", "auth_failures")]
        ) >= 3.0,
        "{text}"
    );
    // The repeated wrong token was answered from memory, not the database.
    assert!(known_unknown(&text) > before, "{text}");
}

async fn a_webhook_flood_on_one_source_gets_429_and_other_sources_are_unaffected(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        HttpSettings {
            webhook_rate: 1,
            webhook_burst: 3,
            auth_fail_per_minute: 3,
            ..HttpSettings::for_tests()
        },
    )
    .await;
    let flooded = app.standard_source("flooded").await;
    let calm = app.standard_source("calm").await;
    let body = |i: usize| lead_event(&format!("f-{i}"), "f@example.com", "2026-11-30T10:00:00Z");

    for i in 0..3 {
        let response = app
            .post_standard("flooded", &flooded, &format!("msg_{i}"), &body(i))
            .await;
        assert_eq!(response.status(), 202, "delivery {i}");
    }
    // The flood goes on: it is refused (at once, unless the machine is so
    // slow that a second's allowance came back in between).
    let mut accepted = 3;
    let limited = loop {
        let response = app
            .post_standard(
                "flooded",
                &flooded,
                &format!("msg_{accepted}"),
                &body(accepted),
            )
            .await;
        if response.status() != 202 {
            break response;
        }
        accepted += 1;
        assert!(accepted < 10, "a flood of 10 in a row was never limited");
    };
    assert!(limited.headers().contains_key("retry-after"));
    assert_problem(limited, 429, "/problems/too-many-requests").await;

    let response = app.post_standard("calm", &calm, "msg_c", &body(9)).await;
    assert_eq!(response.status(), 202);

    // Unverified attempts (here to a name nobody configured, signed with
    // another source's key) are limited per client address, as failed
    // logins are, so the limit tells nothing about which names exist.
    let mut answered = Vec::new();
    for i in 0..10 {
        let response = app
            .post_standard("nobody", &calm, &format!("msg_n{i}"), &body(i))
            .await;
        let status = response.status().as_u16();
        answered.push(status);
        if status == 429 {
            assert_problem(response, 429, "/problems/too-many-requests").await;
            break;
        }
        assert_problem(response, 401, "/problems/invalid-signature").await;
    }
    assert_eq!(answered[..3], [401, 401, 401]);
    assert_eq!(answered.last(), Some(&429), "{answered:?}");

    let stored = inbox_event::Entity::find()
        .filter(inbox_event::Column::Source.eq("flooded"))
        .count(&app.db)
        .await
        .unwrap();
    assert_eq!(stored, accepted as u64);
    assert_eq!(app.count(inbox_event::Entity).await, accepted as u64 + 1);
}

async fn an_unsigned_flood_cannot_throttle_a_real_sender(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        HttpSettings {
            webhook_rate: 1,
            webhook_burst: 5,
            auth_fail_per_minute: 10,
            ..HttpSettings::for_tests()
        },
    )
    .await;
    let key = app.standard_source("partner").await;
    let body = |i: usize| lead_event(&format!("p-{i}"), "p@example.com", "2026-11-30T10:00:00Z");
    // A stranger posts junk to the source's address far faster than its
    // allowance while the sender delivers its five signed events.
    let junk = (0..60).map(|i| {
        let app = &app;
        async move {
            let forged = leadpipe_tests::webhooks::standard_headers(
                b"not-the-partner-key-0123456789",
                &format!("junk_{i}"),
                leadpipe_tests::webhooks::now(),
                b"{}",
            );
            let headers = if i % 2 == 0 { forged } else { Vec::new() };
            app.post_webhook("partner", &headers, b"{}")
                .await
                .status()
                .as_u16()
        }
    });
    let signed = (0..5).map(|i| {
        let (app, key, body) = (&app, &key, body(i));
        async move {
            // Staggered senders, as real ones arrive.
            tokio::time::sleep(Duration::from_millis(20 * i as u64)).await;
            app.post_standard("partner", key, &format!("msg_{i}"), &body)
                .await
                .status()
                .as_u16()
        }
    });
    let (junk, signed) = tokio::join!(
        futures::future::join_all(junk),
        futures::future::join_all(signed)
    );
    assert_eq!(signed, [202; 5], "every signed delivery is accepted");
    assert!(junk.iter().all(|s| [401, 429].contains(s)), "{junk:?}");
    assert!(junk.contains(&429), "the stranger is limited: {junk:?}");
    assert_eq!(app.count(inbox_event::Entity).await, 5);
    let text = app.metrics().await;
    // The source's own allowance was never touched (the limit counters are
    // shared by the tests in this binary; this series is the source's).
    let source_limited = &[("source", "partner"), ("reason", "rate_limited")];
    assert_eq!(
        sample(&text, "leadpipe_webhook_deliveries_total", source_limited),
        0.0,
        "{text}"
    );
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

async fn every_response_carries_the_security_headers(backend: Backend) {
    let mut http = HttpSettings::for_tests();
    http.max_body_bytes = 1024;
    let app = TestApp::spawn_with(backend, http).await;

    // The page: its own script and style sheet only, nothing inline, no framing.
    let page = app.client.get(app.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = header(&page, "content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(header(&page, "referrer-policy"), "no-referrer");
    assert_eq!(header(&page, "x-content-type-options"), "nosniff");
    let html = page.text().await.unwrap();
    for script in html.split("<script").skip(1) {
        let tag = script.split('>').next().unwrap();
        assert!(tag.contains("src="), "inline script: <script{tag}>");
    }
    let lower = html.to_lowercase();
    for inline in [
        " onclick=",
        " onload=",
        " onsubmit=",
        " style=",
        "javascript:",
    ] {
        assert!(!lower.contains(inline), "{inline} in the page");
    }

    // Every other response, errors included.
    let ops = app.token(Role::Ops, None).await;
    let responses = vec![
        app.client.get(app.url("/app.js")).send().await.unwrap(),
        app.client.get(app.url("/healthz")).send().await.unwrap(),
        app.client
            .get(app.url("/openapi.json"))
            .send()
            .await
            .unwrap(),
        app.api(&ops).get("/api/leads").await,
        app.api(&ops).get("/metrics").await,
        app.client.get(app.url("/api/leads")).send().await.unwrap(),
        app.client
            .get(app.url("/no/such/route"))
            .send()
            .await
            .unwrap(),
        app.client
            .post(app.url("/webhooks/nope"))
            .body(vec![b'x'; 4096])
            .send()
            .await
            .unwrap(),
        app.client
            .post(app.url("/webhooks/nope"))
            .body("{}")
            .send()
            .await
            .unwrap(),
    ];
    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 401, 404, 413, 401]);
    for response in &responses {
        let url = response.url().path().to_owned();
        assert_eq!(
            header(response, "x-content-type-options"),
            "nosniff",
            "{url}"
        );
        assert_eq!(header(response, "referrer-policy"), "no-referrer", "{url}");
        assert!(
            header(response, "content-security-policy").contains("frame-ancestors 'none'"),
            "{url}"
        );
    }
}

async fn import_report_cells_that_start_a_formula_are_neutralised(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    // What an attacker puts in a file ops will import and whose report ops
    // will open in a spreadsheet.
    let refs = [
        "=HYPERLINK(\"http://evil.example\",\"x\")",
        "+1+1",
        "-1+1",
        "@SUM(1,1)",
        "\u{FF1D}1+1",
        // Invisible in a spreadsheet, so the formula behind them still runs.
        "\u{FEFF}=1+1",
        "\u{200B}\u{202E}@SUM(1,1)",
        "plain-1",
    ];
    let mut file = String::from("ref,email\n");
    for (i, r) in refs.iter().enumerate() {
        file.push_str(&format!(
            "\"{}\",x{i}@example.com\n",
            r.replace('"', "\"\"")
        ));
    }
    let run = app
        .import_over_api(&admin, "source=fair&map=source_ref=ref,email=email", file)
        .await;
    let report = app
        .api(&admin)
        .get(run["report_url"].as_str().unwrap())
        .await
        .text()
        .await
        .unwrap();
    let mut reader = csv::ReaderBuilder::new().from_reader(report.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), refs.len(), "{report}");
    for row in &rows {
        for cell in row {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r', '\u{FF1D}']),
                "a live formula in the report: {cell:?}\n{report}"
            );
        }
    }
    let source_refs: Vec<&str> = rows.iter().map(|r| r.get(2).unwrap()).collect();
    let expected: Vec<String> = refs
        .iter()
        .map(|r| {
            if *r == "plain-1" {
                (*r).to_owned()
            } else {
                format!("'{r}")
            }
        })
        .collect();
    assert_eq!(source_refs, expected);
    // The leads themselves keep the sender's values.
    let stored = lead::Entity::find()
        .filter(lead::Column::SourceRef.eq("+1+1"))
        .count(&app.db)
        .await
        .unwrap();
    assert_eq!(stored, 1);
}

async fn if_match_that_names_no_current_version_is_412(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let created: Value = app
        .api(&intake)
        .create_lead(&json!({"source": "webform", "source_ref": "im-1"}))
        .await
        .json()
        .await
        .unwrap();
    let id = created["id"].as_i64().unwrap();
    let sales = app.api(&sales);
    let transition = |if_match: &'static str| {
        sales
            .move_lead(id, "contacted", None)
            .header("if-match", if_match)
    };
    for opaque in ["\"stale-etag\"", "W/\"1\"", "1", "\"\"", "garbage, \"x\""] {
        let body = assert_problem(
            transition(opaque).await,
            412,
            "/problems/precondition-failed",
        )
        .await;
        assert_eq!(body["current_version"], 1, "{opaque}");
    }
    let stored = lead::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((stored.status.as_str(), stored.version), ("new", 1));
    // A list that holds the current tag matches (RFC 9110).
    let ok = transition("\"7\", \"1\"").await;
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["etag"], "\"2\"");

    // A CRM record answers the same.
    let contact: Value = sales
        .create_crm(
            "contacts",
            &json!({"email": "im@example.com", "name": "Im"}),
        )
        .await
        .json()
        .await
        .unwrap();
    let contact_id = contact["id"].as_i64().unwrap();
    let patch = |if_match: &'static str| {
        sales
            .patch_crm("contacts", contact_id, &json!({"name": "Renamed"}))
            .header("if-match", if_match)
    };
    let body = assert_problem(
        patch("\"stale-etag\"").await,
        412,
        "/problems/precondition-failed",
    )
    .await;
    assert_eq!(body["current_version"], 1);
    assert_eq!(patch("\"1\"").await.status(), 200);
}

/// RFC 9110's strong comparison: a tag matches when its text is the
/// version's tag, character for character. `"05"` once passed as version 5.
async fn if_match_compares_entity_tags_strongly(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let sales = app.token(Role::Sales, None).await;
    let sales = app.api(&sales);
    let contact: Value = sales
        .create_crm(
            "contacts",
            &json!({"email": "etag@example.com", "name": "Version 1"}),
        )
        .await
        .json()
        .await
        .unwrap();
    let id = contact["id"].as_i64().unwrap();
    let patch = |if_match: &'static str, name: &'static str| {
        sales
            .patch_crm("contacts", id, &json!({ "name": name }))
            .header("if-match", if_match)
    };
    for (tag, name) in [
        ("\"1\"", "Version 2"),
        ("\"2\"", "Version 3"),
        ("\"3\"", "Version 4"),
        ("\"4\"", "Version 5"),
    ] {
        assert_eq!(patch(tag, name).await.status(), 200, "{tag}");
    }
    for spelling in ["\"05\"", "\"+5\"", "W/\"5\"", "\"005\", \"6\""] {
        let body = assert_problem(
            patch(spelling, "Overwritten").await,
            412,
            "/problems/precondition-failed",
        )
        .await;
        assert_eq!(body["current_version"], 5, "{spelling}");
    }
    let stored: Value = sales
        .get(&format!("/api/contacts/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&stored["name"], &stored["version"]),
        (&json!("Version 5"), &json!(5))
    );
    let changed = patch("\"5\"", "Version 6").await;
    assert_eq!(changed.status(), 200);
    assert_eq!(changed.headers()["etag"], "\"6\"");
}

async fn a_transition_cannot_convert_a_lead_only_the_conversion_can(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let created: Value = app
        .api(&intake)
        .create_lead(
            &json!({"source": "webform", "source_ref": "cv-1", "email": "cv@acme.example"}),
        )
        .await
        .json()
        .await
        .unwrap();
    let id = created["id"].as_i64().unwrap();
    let sales = app.api(&sales);
    for to in ["contacted", "qualified"] {
        let response = sales.move_lead(id, to, None).await;
        assert_eq!(response.status(), 200, "{to}");
    }

    // The shortcut: a qualified lead marked converted with no contact,
    // company or conversion record behind it.
    let body = assert_problem(
        sales.move_lead(id, "converted", None).await,
        422,
        "/problems/validation",
    )
    .await;
    assert_eq!(body["errors"][0]["field"], "to");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("/convert"),
        "{body}"
    );
    let stored = lead::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, "qualified");
    assert_eq!(app.count(lead_conversion::Entity).await, 0);

    // The conversion endpoint still converts, and records what it made.
    let converted = sales.convert_lead(id, &json!({})).key("cv-key").await;
    assert_eq!(converted.status(), 201);
    let stored = lead::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, "converted");
    assert_eq!(app.count(lead_conversion::Entity).await, 1);
}
