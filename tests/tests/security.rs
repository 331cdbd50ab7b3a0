//! Security as tests: who may call what (every endpoint × every role), body
//! limits on every route that takes a body.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use domain::auth::Role;
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use serde_json::{Value, json};

const SALES_UP: &[&str] = &["sales", "ops", "admin"];
const OPS_UP: &[&str] = &["ops", "admin"];
const ADMIN: &[&str] = &["admin"];

/// Every authenticated operation and the roles that may call it. Kept in
/// step with api/openapi.json by `the_matrix_covers_every_secured_operation`.
const MATRIX: &[(&str, &str, &[&str])] = &[
    ("GET", "/api/companies", SALES_UP),
    ("POST", "/api/companies", SALES_UP),
    ("GET", "/api/companies/{id}", SALES_UP),
    ("PATCH", "/api/companies/{id}", SALES_UP),
    ("GET", "/api/companies/{id}/activities", SALES_UP),
    ("GET", "/api/contacts", SALES_UP),
    ("POST", "/api/contacts", SALES_UP),
    ("GET", "/api/contacts/{id}", SALES_UP),
    ("PATCH", "/api/contacts/{id}", SALES_UP),
    ("GET", "/api/contacts/{id}/activities", SALES_UP),
    ("GET", "/api/deals", SALES_UP),
    ("POST", "/api/deals", SALES_UP),
    ("GET", "/api/deals/{id}", SALES_UP),
    ("PATCH", "/api/deals/{id}", SALES_UP),
    ("GET", "/api/deals/{id}/activities", SALES_UP),
    ("POST", "/api/deals/{id}/transitions", SALES_UP),
    ("GET", "/api/imports", OPS_UP),
    ("POST", "/api/imports", OPS_UP),
    ("GET", "/api/imports/{id}", OPS_UP),
    ("GET", "/api/imports/{id}/report.csv", OPS_UP),
    ("GET", "/api/leads", SALES_UP),
    // With a `webform` record: its intake token and admins (sales may post `manual` only).
    ("POST", "/api/leads", &["intake", "admin"]),
    ("GET", "/api/leads/export", SALES_UP),
    ("GET", "/api/leads/{id}", SALES_UP),
    ("DELETE", "/api/leads/{id}", ADMIN),
    ("GET", "/api/leads/{id}/export", ADMIN),
    ("PATCH", "/api/leads/{id}", SALES_UP),
    ("GET", "/api/leads/{id}/activities", SALES_UP),
    ("GET", "/api/leads/{id}/conversion", SALES_UP),
    ("POST", "/api/leads/{id}/convert", SALES_UP),
    ("POST", "/api/leads/{id}/notes", SALES_UP),
    ("POST", "/api/leads/{id}/transitions", SALES_UP),
    ("GET", "/api/me", &["intake", "sales", "ops", "admin"]),
    ("GET", "/api/ops/deliveries", OPS_UP),
    ("POST", "/api/ops/deliveries/retry", OPS_UP),
    ("POST", "/api/ops/deliveries/{id}/retry", OPS_UP),
    ("GET", "/api/ops/inbox", OPS_UP),
    ("POST", "/api/ops/inbox/retry", OPS_UP),
    ("GET", "/api/ops/inbox/{id}", OPS_UP),
    ("POST", "/api/ops/inbox/{id}/retry", OPS_UP),
    ("GET", "/api/ops/lead-processing/failures", OPS_UP),
    ("POST", "/api/ops/lead-processing/retry", OPS_UP),
    ("GET", "/api/ops/reconcile/rejected", OPS_UP),
    ("POST", "/api/ops/reconcile/rejected/retry", OPS_UP),
    ("POST", "/api/ops/reconcile/{source}", OPS_UP),
    ("GET", "/api/ops/reconcile-runs", OPS_UP),
    ("GET", "/api/ops/reconcile-runs/{id}", OPS_UP),
    ("GET", "/api/ops/stats", OPS_UP),
    ("GET", "/api/ops/stats/series", OPS_UP),
    ("GET", "/api/ops/trace/{correlation_id}", OPS_UP),
    ("GET", "/api/principals", SALES_UP),
    ("GET", "/api/sources", OPS_UP),
    ("POST", "/api/sources", ADMIN),
    ("GET", "/api/sources/{name}", OPS_UP),
    ("GET", "/api/subscriptions", OPS_UP),
    ("POST", "/api/subscriptions", ADMIN),
    ("DELETE", "/api/subscriptions/{id}", ADMIN),
    ("DELETE", "/api/tombstones/{key_hash}", ADMIN),
    ("PATCH", "/api/subscriptions/{id}", ADMIN),
    ("POST", "/api/subscriptions/{id}/rotate-secret", ADMIN),
    ("POST", "/api/subscriptions/{id}/test", ADMIN),
    ("GET", "/api/event-types", OPS_UP),
    // On the public listener; without a token on LEADPIPE_METRICS_BIND.
    ("GET", "/metrics", OPS_UP),
];

fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
        .replace("{name}", "webform")
        .replace("{correlation_id}", "nothing-here")
        .replace("{key_hash}", "00")
}

fn body_for(method: &str, path: &str) -> Option<Value> {
    match (method, path) {
        ("POST", "/api/leads") => Some(json!({"source": "webform", "source_ref": "matrix-1"})),
        ("POST" | "PATCH", _) => Some(json!({})),
        _ => None,
    }
}

#[test]
fn the_matrix_covers_every_secured_operation() {
    let spec: Value = serde_json::from_str(include_str!("../../api/openapi.json")).unwrap();
    let mut secured = BTreeSet::new();
    for (path, operations) in spec["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            if operation
                .get("security")
                .is_some_and(|s| !s.as_array().unwrap().is_empty())
            {
                secured.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let listed: BTreeSet<(String, String)> = MATRIX
        .iter()
        .map(|(m, p, _)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(
        listed, secured,
        "add the new operation to MATRIX with the roles that may call it"
    );
}

on_both_backends!(
    every_endpoint_answers_401_403_or_serves_as_its_roles_say,
    every_body_is_bounded
);

async fn every_endpoint_answers_401_403_or_serves_as_its_roles_say(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let tokens = [
        ("intake", app.token(Role::Intake, Some("webform")).await),
        ("sales", app.token(Role::Sales, None).await),
        ("ops", app.token(Role::Ops, None).await),
        ("admin", app.token(Role::Admin, None).await),
    ];
    // Something to find behind `{id}`.
    app.post_lead(
        &tokens[0].1,
        &json!({"source": "webform", "source_ref": "seed"}),
    )
    .await;
    let mut wrong = Vec::new();
    for (method, path, allowed) in MATRIX {
        let url = app.url(&concrete(path));
        let send = |token: Option<&str>| {
            let mut request = app.client.request(method.parse().unwrap(), &url);
            if let Some(body) = body_for(method, path) {
                request = request.json(&body);
            }
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            request.send()
        };
        let anonymous = send(None).await.unwrap().status().as_u16();
        if anonymous != 401 {
            wrong.push(format!("{method} {path} without a token: {anonymous}"));
        }
        for (role, token) in &tokens {
            let status = send(Some(token)).await.unwrap().status().as_u16();
            let expected_denied = !allowed.contains(role);
            if expected_denied && status != 403 {
                wrong.push(format!("{method} {path} as {role}: {status}, expected 403"));
            }
            if !expected_denied && (status == 401 || status == 403 || status >= 500) {
                wrong.push(format!(
                    "{method} {path} as {role}: {status}, expected it served"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

async fn every_body_is_bounded(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.max_body_bytes = 16 * 1024;
    http.import_max_bytes = 32 * 1024;
    let app = TestApp::spawn_with(backend, http).await;
    let admin = app.token(Role::Admin, None).await;
    let big = format!("{{\"padding\": \"{}\"}}", "x".repeat(40 * 1024));
    let mut wrong = Vec::new();
    let mut writes: Vec<(&str, String)> = MATRIX
        .iter()
        .filter(|(m, _, _)| *m == "POST" || *m == "PATCH")
        .map(|(m, p, _)| (*m, concrete(p)))
        .collect();
    writes.push(("POST", "/webhooks/anything".to_owned()));
    for (method, path) in writes {
        let content_type = if path.starts_with("/api/imports") {
            "text/csv"
        } else {
            "application/json"
        };
        let response = app
            .client
            .request(method.parse().unwrap(), app.url(&path))
            .bearer_auth(&admin)
            .header("content-type", content_type)
            .body(big.clone())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        // An unknown webhook source too: its answers match a known one's.
        let ok = status == 413;
        if !ok {
            wrong.push(format!("{method} {path}: {status}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "bodies over the limit must get 413:\n{}",
        wrong.join("\n")
    );
}
