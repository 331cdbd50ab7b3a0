//! Tokens have a lifecycle: an expiry (by default for personal tokens, not
//! for a source's), their last use listed, rotation, `401
//! /problems/token-expired` once expired, and a user's personal tokens for
//! its own REST clients.

#![allow(clippy::unwrap_used)]

use domain::auth::{Expiry, Role};
use domain::entities::api_token;
use leadpipe_tests::cli::output_text;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};

on_both_backends!(
    personal_tokens_expire_by_default_and_a_source_token_only_when_asked,
    an_expired_token_answers_token_expired,
    token_list_shows_expiry_and_last_use,
    token_rotate_replaces_the_secret_and_keeps_the_lifetime,
    a_user_creates_rotates_and_deletes_personal_tokens,
);

/// The token rows of the principal named `name`.
async fn token_of(app: &TestApp, name: &str) -> api_token::Model {
    api_token::Entity::find()
        .filter(api_token::Column::Name.eq(name))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no token named {name}"))
}

fn create(app: &TestApp, args: &[&str]) -> (String, String) {
    let mut all = vec!["token", "create"];
    all.extend_from_slice(args);
    let output = app.run_cli(&all, &[]);
    assert!(output.status.success(), "{}", output_text(&output));
    (
        String::from_utf8(output.stdout).unwrap().trim().to_owned(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

async fn me(app: &TestApp, token: &str) -> reqwest::Response {
    app.client
        .get(app.url("/api/me"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

async fn personal_tokens_expire_by_default_and_a_source_token_only_when_asked(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for (args, lifetime) in [
        (
            &["--name", "ops-default", "--role", "ops"][..],
            Some(chrono::Duration::days(90)),
        ),
        (
            &["--name", "web", "--role", "intake", "--source", "webform"][..],
            None,
        ),
        (
            &[
                "--name",
                "sales-1h",
                "--role",
                "sales",
                "--expires-in",
                "1h",
            ][..],
            Some(chrono::Duration::hours(1)),
        ),
        (
            &[
                "--name",
                "web-30d",
                "--role",
                "intake",
                "--source",
                "webform",
                "--expires-in",
                "30d",
            ][..],
            Some(chrono::Duration::days(30)),
        ),
        (
            &[
                "--name",
                "admin-never",
                "--role",
                "admin",
                "--expires-in",
                "never",
            ][..],
            None,
        ),
    ] {
        let (token, said) = create(&app, args);
        let row = token_of(&app, args[1]).await;
        assert_eq!(
            row.expires_at.map(|at| at - row.created_at),
            lifetime,
            "{args:?}"
        );
        assert_eq!(
            said.contains("it does not expire"),
            lifetime.is_none(),
            "{args:?}: {said}"
        );
        assert_eq!(me(&app, &token).await.status(), 200, "{args:?}");
    }
    let zero = app.run_cli(
        &[
            "token",
            "create",
            "--name",
            "z",
            "--role",
            "ops",
            "--expires-in",
            "0s",
        ],
        &[],
    );
    assert_eq!(zero.status.code(), Some(2), "{}", output_text(&zero));
}

async fn an_expired_token_answers_token_expired(backend: Backend) {
    // Remembered tokens too: the cache knows the expiry.
    let mut http = api::config::HttpSettings::for_tests();
    http.auth_cache_secs = 60;
    let app = TestApp::spawn_with(backend, http).await;
    let issued = domain::auth::create_principal_with(
        &app.db,
        "brief",
        Role::Ops,
        None,
        Expiry::After(chrono::Duration::seconds(1)),
    )
    .await
    .unwrap();
    assert_eq!(me(&app, &issued.token).await.status(), 200);
    // The token's lifetime is what is tested.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let expired = me(&app, &issued.token).await;
    assert_eq!(expired.headers()["www-authenticate"], "Bearer");
    assert_problem(expired, 401, "/problems/token-expired").await;

    // Found expired in the database as well.
    let issued = domain::auth::create_principal_with(
        &app.db,
        "stale",
        Role::Sales,
        None,
        Expiry::After(chrono::Duration::hours(1)),
    )
    .await
    .unwrap();
    api_token::Entity::update_many()
        .col_expr(
            api_token::Column::ExpiresAt,
            sea_orm::sea_query::Expr::value(domain::clock::now() - chrono::Duration::seconds(1)),
        )
        .filter(api_token::Column::Id.eq(issued.record.id))
        .exec(&app.db)
        .await
        .unwrap();
    assert_problem(
        me(&app, &issued.token).await,
        401,
        "/problems/token-expired",
    )
    .await;
    // An unknown token is still just unauthorized.
    let unknown = me(&app, "lp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").await;
    assert_problem(unknown, 401, "/problems/unauthorized").await;
}

async fn token_list_shows_expiry_and_last_use(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (token, _) = create(
        &app,
        &["--name", "lister", "--role", "ops", "--expires-in", "2d"],
    );
    let list = |app: &TestApp| {
        let output = app.run_cli(&["token", "list", "--output", "json"], &[]);
        assert!(output.status.success(), "{}", output_text(&output));
        let row: Value = serde_json::from_slice(&output.stdout).unwrap();
        row
    };
    let before = list(&app);
    let row = token_of(&app, "lister").await;
    let expires = row
        .expires_at
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert_eq!(before["expires_at"], expires.as_str(), "{before}");
    assert_eq!(before["last_used_at"], "never", "{before}");
    assert_eq!(me(&app, &token).await.status(), 200);
    let after = list(&app);
    let used = token_of(&app, "lister").await.last_used_at.unwrap();
    assert!(chrono::Utc::now() - used < chrono::Duration::minutes(1));
    assert_eq!(
        after["last_used_at"],
        used.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            .as_str(),
        "{after}"
    );
    assert!(!after.to_string().contains(&token));
}

async fn token_rotate_replaces_the_secret_and_keeps_the_lifetime(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.auth_cache_secs = 0;
    let app = TestApp::spawn_with(backend, http).await;
    let (old, _) = create(
        &app,
        &["--name", "rotor", "--role", "sales", "--expires-in", "1h"],
    );
    assert_eq!(me(&app, &old).await.status(), 200);
    let id = token_of(&app, "rotor").await.principal_id;
    let rotated = app.run_cli(&["token", "rotate", "--id", &id.to_string()], &[]);
    assert!(rotated.status.success(), "{}", output_text(&rotated));
    let new = String::from_utf8(rotated.stdout).unwrap().trim().to_owned();
    assert!(new.starts_with("lp_") && new != old);
    assert_problem(me(&app, &old).await, 401, "/problems/unauthorized").await;
    let answer: Value = me(&app, &new).await.json().await.unwrap();
    assert_eq!(answer["id"], id);
    let row = token_of(&app, "rotor").await;
    assert_eq!(
        row.expires_at.unwrap() - row.created_at,
        chrono::Duration::hours(1)
    );
    assert_eq!(row.token_hash, domain::auth::hash_token(&new));

    // A user's personal tokens are the user's to rotate; no such principal.
    let admin = app.token(Role::Admin, None).await;
    let user = app
        .post_json(
            &admin,
            "/api/users",
            &json!({"name": "u", "email": "u@example.com", "role": "sales",
                    "password": "long enough password"}),
        )
        .await;
    let user_id = user.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let refused = app.run_cli(&["token", "rotate", "--id", &user_id.to_string()], &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", output_text(&refused));
    let missing = app.run_cli(&["token", "rotate", "--id", "9999"], &[]);
    assert_eq!(missing.status.code(), Some(3), "{}", output_text(&missing));
}

async fn a_user_creates_rotates_and_deletes_personal_tokens(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.auth_cache_secs = 0;
    let app = TestApp::spawn_with(backend, http).await;
    let admin = app.token(Role::Admin, None).await;
    let password = "long enough password";
    let mut ids = Vec::new();
    for email in ["me@example.com", "other@example.com"] {
        let added = app
            .post_json(
                &admin,
                "/api/users",
                &json!({"name": email, "email": email, "role": "sales", "password": password}),
            )
            .await;
        ids.push(added.json::<Value>().await.unwrap()["id"].as_i64().unwrap());
    }
    let sign_in = async |email: &str| {
        let response = app
            .client
            .post(app.url("/api/session"))
            .json(&json!({"email": email, "password": password}))
            .send()
            .await
            .unwrap();
        let cookie = response.headers()["set-cookie"].to_str().unwrap();
        let cookie = cookie.split(';').next().unwrap().to_owned();
        let body: Value = response.json().await.unwrap();
        (cookie, body["csrf_token"].as_str().unwrap().to_owned())
    };
    let (cookie, csrf) = sign_in("me@example.com").await;
    let by_session = |method: reqwest::Method, path: &str| {
        app.client
            .request(method, app.url(path))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
    };

    let created = by_session(reqwest::Method::POST, "/api/tokens")
        .json(&json!({"name": "my script", "expires_in_days": 30}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let token = created["token"].as_str().unwrap().to_owned();
    let token_id = created["id"].as_i64().unwrap();
    let row = api_token::Entity::find_by_id(token_id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.principal_id, ids[0]);
    assert_eq!(
        row.expires_at.unwrap() - row.created_at,
        chrono::Duration::days(30)
    );
    // It acts as the user, with the user's role.
    let answer: Value = me(&app, &token).await.json().await.unwrap();
    assert_eq!(answer["id"], ids[0]);
    let listed: Value = by_session(reqwest::Method::GET, "/api/tokens")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["name"], "my script");
    assert!(listed[0]["last_used_at"].is_string(), "{listed}");
    assert!(listed[0].get("token").is_none(), "{listed}");

    // A bearer token makes no tokens; a cookie write needs its CSRF token;
    // a token lives at most a year.
    let by_bearer = app
        .client
        .post(app.url("/api/tokens"))
        .bearer_auth(&token)
        .json(&json!({"name": "more"}))
        .send()
        .await
        .unwrap();
    assert_problem(by_bearer, 401, "/problems/unauthorized").await;
    let without_csrf = app
        .client
        .post(app.url("/api/tokens"))
        .header("cookie", &cookie)
        .json(&json!({"name": "more"}))
        .send()
        .await
        .unwrap();
    assert_problem(without_csrf, 403, "/problems/csrf-token-invalid").await;
    let too_long = by_session(reqwest::Method::POST, "/api/tokens")
        .json(&json!({"name": "more", "expires_in_days": 400}))
        .send()
        .await
        .unwrap();
    assert_problem(too_long, 422, "/problems/validation").await;
    assert_eq!(
        api_token::Entity::find()
            .filter(api_token::Column::PrincipalId.eq(ids[0]))
            .all(&app.db)
            .await
            .unwrap()
            .len(),
        1
    );

    // Another user cannot see, rotate or delete it.
    let (other_cookie, other_csrf) = sign_in("other@example.com").await;
    for method in [reqwest::Method::POST, reqwest::Method::DELETE] {
        let path = if method == reqwest::Method::POST {
            format!("/api/tokens/{token_id}/rotate")
        } else {
            format!("/api/tokens/{token_id}")
        };
        let refused = app
            .client
            .request(method, app.url(&path))
            .header("cookie", &other_cookie)
            .header("x-csrf-token", &other_csrf)
            .send()
            .await
            .unwrap();
        assert_problem(refused, 404, "/problems/not-found").await;
    }
    assert_eq!(me(&app, &token).await.status(), 200);

    let rotated = by_session(
        reqwest::Method::POST,
        &format!("/api/tokens/{token_id}/rotate"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(rotated.status(), 200);
    let rotated: Value = rotated.json().await.unwrap();
    let new = rotated["token"].as_str().unwrap().to_owned();
    assert_eq!(rotated["id"], token_id);
    assert_problem(me(&app, &token).await, 401, "/problems/unauthorized").await;
    assert_eq!(me(&app, &new).await.status(), 200);

    let deleted = by_session(reqwest::Method::DELETE, &format!("/api/tokens/{token_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_problem(me(&app, &new).await, 401, "/problems/unauthorized").await;

    // Disabling the user refuses its personal tokens.
    let created: Value = by_session(reqwest::Method::POST, "/api/tokens")
        .json(&json!({"name": "second"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let second = created["token"].as_str().unwrap().to_owned();
    let row = api_token::Entity::find_by_id(created["id"].as_i64().unwrap())
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        row.expires_at.unwrap() - row.created_at,
        chrono::Duration::days(90)
    );
    assert_eq!(me(&app, &second).await.status(), 200);
    let disabled = app
        .post_json(
            &admin,
            &format!("/api/users/{}/disable", ids[0]),
            &json!({}),
        )
        .await;
    assert_eq!(disabled.status(), 200);
    assert_problem(me(&app, &second).await, 401, "/problems/unauthorized").await;
}
