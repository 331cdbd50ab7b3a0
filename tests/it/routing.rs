//! Who gets to which handler: every operation lets exactly the roles its
//! OpenAPI `security` names past `403`; a request no handler takes is `405`
//! with `Allow` on a known path, else `404`; all are problems.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use serde_json::Value;

on_both_backends!(
    a_wrong_method_on_a_known_path_is_405_with_allow,
    every_operation_lets_exactly_its_documented_roles_past_403,
);

/// The document's roles come from each route's `security` scopes and the
/// enforced ones from its handler's `Caller<R>`: calling every operation with
/// a token of every role shows they agree. No body is sent, so an allowed
/// caller stops at the body, a missing record or an empty result, never at
/// `403`.
async fn every_operation_lets_exactly_its_documented_roles_past_403(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut tokens = Vec::new();
    for role in [Role::Intake, Role::Sales, Role::Ops, Role::Admin] {
        let source = (role == Role::Intake).then_some("webform");
        tokens.push((role.as_str(), app.token(role, source).await));
    }
    let (_, any_token) = &tokens[0];
    let doc: Value = app
        .api(any_token)
        .get("/openapi.json")
        .await
        .json()
        .await
        .unwrap();
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for (template, item) in doc["paths"].as_object().unwrap() {
        let path: String = template
            .split('/')
            .map(|s| if s.starts_with('{') { "1" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        for (method, op) in item.as_object().unwrap() {
            let Some(documented) = op["security"][0]["bearer"].as_array() else {
                continue;
            };
            let description = op["description"].as_str().unwrap_or("");
            let line: Vec<&str> = documented.iter().map(|r| r.as_str().unwrap()).collect();
            assert!(
                description.starts_with(&format!("**Roles:** {}.", line.join(", "))),
                "{method} {template}: the description starts with its roles"
            );
            for (role, token) in &tokens {
                // An operation on oneself is called with the caller's own id.
                let path = if template == "/api/principals/{id}" {
                    let me = domain::auth::authenticate(&app.db, token).await.unwrap();
                    template.replace("{id}", &me.unwrap().id.to_string())
                } else {
                    path.clone()
                };
                let response = app
                    .client
                    .request(method.to_uppercase().parse().unwrap(), app.url(&path))
                    .bearer_auth(token)
                    .send()
                    .await
                    .unwrap();
                let passed = response.status() != 403;
                if passed != line.contains(role) {
                    mismatches.push(format!(
                        "{method} {template}: {role} got {} (documented: {line:?})",
                        response.status()
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked > 200,
        "only {checked} calls: are operations secured?"
    );
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

async fn a_wrong_method_on_a_known_path_is_405_with_allow(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    for (method, path, allow) in [
        ("PUT", "/api/leads", "GET, POST"),
        ("DELETE", "/api/ops/stats", "GET"),
        ("POST", "/api/leads/42", "GET, PATCH, DELETE"),
        // `retry` is a literal route and also an `{id}` of the one beside it.
        ("DELETE", "/api/ops/inbox/retry", "GET, POST"),
    ] {
        let response = app
            .client
            .request(method.parse().unwrap(), app.url(path))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.headers().get("allow").map(|v| v.to_str().unwrap()),
            Some(allow),
            "{method} {path}"
        );
        let body = assert_problem(response, 405, "/problems/method-not-allowed").await;
        assert_eq!(body["title"], "Method not allowed");
        assert!(
            body["detail"].as_str().unwrap().contains(allow),
            "{method} {path}: {body}"
        );
    }
    // Without a token too: which paths exist is no secret (`/openapi.json`).
    let response = app.client.put(app.url("/api/leads")).send().await.unwrap();
    assert_problem(response, 405, "/problems/method-not-allowed").await;

    for path in ["/no/such/route", "/api/leads/42/nothing", "/api/ops/"] {
        let response = app
            .client
            .put(app.url(path))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        assert!(response.headers().get("allow").is_none(), "{path}");
        assert_problem(response, 404, "/problems/not-found").await;
    }
}
