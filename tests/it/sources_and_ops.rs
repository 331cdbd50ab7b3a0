//! `/api/sources` and `/api/ops/inbox`: who may do what, validation, listing
//! and bulk retry — and no secret in any response.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use domain::entities::inbox_event;
use leadpipe_tests::webhooks::{lead_event, standard_secret};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use serde_json::{Value, json};

on_both_backends!(
    roles_decide_who_may_manage_sources_and_the_inbox,
    secrets_never_appear_in_any_response,
    invalid_source_configuration_is_422_with_fields,
    inbox_list_filters_and_pages,
    bulk_retry_counts_on_dry_run_and_retries_the_same_events,
);

const SECRET_KEY: &[u8] = b"never-show-this-key-0001";

fn source_body(name: &str) -> Value {
    json!({"name": name, "scheme": "standard-webhooks", "secrets": [standard_secret(SECRET_KEY)]})
}

async fn roles_decide_who_may_manage_sources_and_the_inbox(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let sales = app.token(Role::Sales, None).await;
    let ops = app.token(Role::Ops, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let admin = app.admin_token().await;

    // Only admins create sources.
    for token in [&sales, &ops, &intake] {
        let response = app.api(token).create_source(&source_body("webform")).await;
        assert_problem(response, 403, "/problems/forbidden").await;
    }
    assert_eq!(
        app.api(&admin)
            .create_source(&source_body("webform"))
            .await
            .status(),
        201
    );

    // Ops and admins read sources and the inbox; sales and intake may not.
    for path in [
        "/api/sources",
        "/api/sources/webform",
        "/api/ops/inbox",
        "/api/ops/inbox/1",
    ] {
        for token in [&sales, &intake] {
            assert_problem(app.api(token).get(path).await, 403, "/problems/forbidden").await;
        }
    }
    for token in [&ops, &admin] {
        assert_eq!(app.api(token).get("/api/sources").await.status(), 200);
        assert_eq!(
            app.api(token).get("/api/sources/webform").await.status(),
            200
        );
        assert_eq!(app.api(token).get("/api/ops/inbox").await.status(), 200);
    }
    for (path, body) in [
        ("/api/ops/inbox/1/retry", json!({})),
        (
            "/api/ops/inbox/retry",
            json!({"state": "dead", "dry_run": true}),
        ),
    ] {
        assert_problem(
            app.api(&sales).post(path, &body).await,
            403,
            "/problems/forbidden",
        )
        .await;
    }
    // No token at all.
    let anonymous = app
        .client
        .get(app.url("/api/ops/inbox"))
        .send()
        .await
        .unwrap();
    assert_problem(anonymous, 401, "/problems/unauthorized").await;
    assert_problem(
        app.api(&ops).get("/api/sources/nope").await,
        404,
        "/problems/not-found",
    )
    .await;
    assert_problem(
        app.api(&ops).get("/api/ops/inbox/999").await,
        404,
        "/problems/not-found",
    )
    .await;
}

async fn secrets_never_appear_in_any_response(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let secret = standard_secret(SECRET_KEY);
    let secret_b64 = secret.trim_start_matches("whsec_").to_owned();
    let mut seen = Vec::new();

    let created = app.api(&admin).create_source(&source_body("webform")).await;
    assert_eq!(created.status(), 201);
    assert_eq!(created.headers()["location"], "/api/sources/webform");
    seen.push(created.text().await.unwrap());
    let updated = app
        .api(&admin)
        .patch_source(
            "webform",
            &json!({"secrets": [secret.clone(), standard_secret(b"second-key-0000002")]}),
        )
        .await;
    assert_eq!(updated.status(), 200);
    seen.push(updated.text().await.unwrap());
    seen.push(
        app.api(&admin)
            .get("/api/sources")
            .await
            .text()
            .await
            .unwrap(),
    );
    seen.push(
        app.api(&admin)
            .get("/api/sources/webform")
            .await
            .text()
            .await
            .unwrap(),
    );

    let body = lead_event("form-1", "ada@example.com", "2026-11-30T10:00:00Z");
    let ack: Value = app
        .post_standard("webform", SECRET_KEY, "msg_1", &body)
        .await
        .json()
        .await
        .unwrap();
    seen.push(ack.to_string());
    let path = format!("/api/ops/inbox/{}", ack["id"]);
    let detail = app.api(&admin).get(&path).await.text().await.unwrap();
    assert!(
        detail.contains("webhook-timestamp"),
        "headers are shown: {detail}"
    );
    assert!(!detail.contains("webhook-signature"), "{detail}");
    seen.push(detail);
    seen.push(
        app.api(&admin)
            .get("/api/ops/inbox")
            .await
            .text()
            .await
            .unwrap(),
    );
    // A validation error must not echo the secret it rejects.
    let rejected = app
        .api(&admin).create_source(
            &json!({"name": "other", "scheme": "standard-webhooks", "secrets": ["whsec_%%%secret%%%"]}),
        )
        .await;
    assert_eq!(rejected.status(), 422);
    seen.push(rejected.text().await.unwrap());

    for text in &seen {
        assert!(!text.contains(&secret_b64), "secret leaked: {text}");
        assert!(!text.contains("%%%secret%%%"), "secret leaked: {text}");
    }
    let view: Value = serde_json::from_str(&seen[1]).unwrap();
    assert_eq!(view["secret_count"], 2);
    assert!(view.get("secrets").is_none());
}

async fn invalid_source_configuration_is_422_with_fields(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let cases = [
        (
            json!({"name": "Bad Name", "scheme": "svix", "secrets": ["x"]}),
            vec!["name", "scheme"],
        ),
        (
            json!({"name": "ok", "scheme": "standard-webhooks", "secrets": ["not-base64!"],
                   "record_pointer": "data", "tolerance_secs": 0}),
            vec!["record_pointer", "secrets", "tolerance_secs"],
        ),
        (
            json!({"name": "ok", "scheme": "github", "secrets": []}),
            vec!["secrets"],
        ),
        (
            json!({"name": "ok", "scheme": "hmac-sha256", "secrets": ["sixteen-byte-key"],
                   "event_id_header": "x-id", "event_id_pointer": "/id"}),
            vec!["event_id_pointer"],
        ),
        // A new source needs its secrets.
        (json!({"name": "ok", "scheme": "github"}), vec!["secrets"]),
    ];
    for (body, fields) in cases {
        let problem = assert_problem(
            app.api(&admin).create_source(&body).await,
            422,
            "/problems/validation",
        )
        .await;
        let mut got: Vec<&str> = problem["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, fields, "{body}");
    }
    let unknown = app
        .api(&admin).create_source(
            &json!({"name": "ok", "scheme": "github", "secrets": ["sixteen-byte-key"], "record_ponter": "/x"}),
        )
        .await;
    assert_problem(unknown, 422, "/problems/validation").await;
    assert_eq!(
        app.api(&admin)
            .get("/api/sources")
            .await
            .json::<Value>()
            .await
            .unwrap()["data"],
        json!([])
    );
}

/// Three events for `webform` (one dead) and one for `ads`.
async fn seed_inbox(app: &TestApp) -> Vec<i64> {
    let admin = app.admin_token().await;
    for name in ["webform", "ads"] {
        assert_eq!(
            app.api(&admin)
                .create_source(&source_body(name))
                .await
                .status(),
            201
        );
    }
    let mut ids = Vec::new();
    for (source, msg) in [
        ("webform", "m1"),
        ("webform", "m2"),
        ("ads", "m3"),
        ("webform", "m4"),
    ] {
        let body = lead_event(msg, "ada@example.com", "2026-11-30T10:00:00Z");
        let ack: Value = app
            .post_standard(source, SECRET_KEY, msg, &body)
            .await
            .json()
            .await
            .unwrap();
        ids.push(ack["id"].as_i64().unwrap());
    }
    app.exec(&format!(
        "UPDATE inbox_event SET state = 'dead', last_error = 'x' WHERE id = {}",
        ids[1]
    ))
    .await;
    ids
}

async fn inbox_list_filters_and_pages(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ids = seed_inbox(&app).await;
    let ops = app.token(Role::Ops, None).await;
    let list = |query: String| {
        let app = &app;
        let ops = ops.clone();
        async move {
            let response = app.api(&ops).get(&format!("/api/ops/inbox{query}")).await;
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.unwrap()
        }
    };
    let ids_of = |page: &Value| -> Vec<i64> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_i64().unwrap())
            .collect()
    };

    // Newest first.
    let all = list(String::new()).await;
    assert_eq!(ids_of(&all), [ids[3], ids[2], ids[1], ids[0]]);
    assert!(
        all["data"][0].get("body").is_none(),
        "bodies only in the detail"
    );
    assert_eq!(ids_of(&list("?source=ads".into()).await), [ids[2]]);
    assert_eq!(ids_of(&list("?state=dead".into()).await), [ids[1]]);
    assert_eq!(
        ids_of(&list("?state=received&source=webform".into()).await),
        [ids[3], ids[0]]
    );
    let future = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let since = list(format!("?received_since={}", urlencode(&future))).await;
    assert_eq!(ids_of(&since), Vec::<i64>::new());
    let until = list(format!("?received_until={}", urlencode(&future))).await;
    assert_eq!(ids_of(&until).len(), 4);

    // Pages of two, following next_cursor.
    let first = list("?limit=2".into()).await;
    assert_eq!(ids_of(&first), [ids[3], ids[2]]);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = list(format!("?limit=2&cursor={cursor}")).await;
    assert_eq!(ids_of(&second), [ids[1], ids[0]]);
    assert!(second["next_cursor"].is_null(), "the last page says so");
    // The page size is clamped to 1–200, as in every list.
    assert_eq!(ids_of(&list("?limit=500".into()).await).len(), 4);
    assert_eq!(ids_of(&list("?limit=0".into()).await), [ids[3]]);

    for bad in ["?state=lost", "?limit=x", "?cursor=abc"] {
        assert_problem(
            app.api(&ops).get(&format!("/api/ops/inbox{bad}")).await,
            422,
            "/problems/validation",
        )
        .await;
    }

    let detail: Value = app
        .api(&ops)
        .get(&format!("/api/ops/inbox/{}", ids[0]))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(detail["event_id"], "m1");
    assert_eq!(detail["body"]["data"]["id"], "m1");
    assert_eq!(detail["headers"]["webhook-id"], "m1");
    assert_eq!(detail["deliveries"], 1);
}

async fn bulk_retry_counts_on_dry_run_and_retries_the_same_events(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ids = seed_inbox(&app).await;
    let ops = app.token(Role::Ops, None).await;

    let dry = app
        .api(&ops)
        .retry_inbox_events(&json!({"state": "dead", "dry_run": true}))
        .await;
    assert_eq!(dry.status(), 200);
    assert_eq!(
        dry.json::<Value>().await.unwrap(),
        json!({"dry_run": true, "matched": 1, "skipped_erased": 0, "by_state": {"dead": 1}, "retried": 0, "results": {}})
    );
    assert_eq!(
        app.inbox_event(ids[1]).await.state,
        "dead",
        "a dry run changes nothing"
    );

    // A state must be one that can be retried; processed events only when
    // asked explicitly.
    for body in [
        json!({"state": "received"}),
        json!({"state": "nope"}),
        json!({"state": "processed"}),
    ] {
        let response = app.api(&ops).retry_inbox_events(&body).await;
        assert_problem(response, 422, "/problems/validation").await;
    }
    // An event already waiting cannot be retried on its own either.
    let response = app.api(&ops).retry_inbox_event(ids[0]).await;
    assert_problem(response, 409, "/problems/conflict").await;
    let response = app.api(&ops).retry_inbox_event(999).await;
    assert_problem(response, 404, "/problems/not-found").await;

    let real = app
        .api(&ops)
        .retry_inbox_events(&json!({"state": "dead", "source": "webform"}))
        .await;
    assert_eq!(
        real.json::<Value>().await.unwrap(),
        json!({"dry_run": false, "matched": 1, "skipped_erased": 0, "by_state": {"dead": 1}, "retried": 1, "results": {"processed": 1}})
    );
    // Re-applied at once, as a job would have: one attempt of a fresh budget.
    let event = app.inbox_event(ids[1]).await;
    assert_eq!(
        (event.state.as_str(), event.retries, event.attempts),
        ("processed", 1, 1)
    );
    assert_eq!(
        app.count(inbox_event::Entity).await,
        4,
        "a retry never adds a row"
    );
}

fn urlencode(text: &str) -> String {
    text.replace('+', "%2B").replace(':', "%3A")
}
