//! What a request that no handler takes is answered: a wrong method on a
//! known path is `405` with `Allow`, an unknown path `404`; both are
//! problems.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};

on_both_backends!(a_wrong_method_on_a_known_path_is_405_with_allow);

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
