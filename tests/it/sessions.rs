//! Users and sessions: admins add people (API and command line), people
//! sign in with an email and a password and get a session cookie, a
//! cookie's writes need the session's CSRF token, sessions end (signing
//! out, idle, lifetime, a disabled user, a new password), and a bearer
//! token is never taken from a cookie.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use domain::entities::{principal, user_session};
use leadpipe_tests::cli::output_text;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Statement};
use serde_json::{Value, json};

on_both_backends!(
    an_admin_adds_a_user_who_signs_in_and_works_by_cookie,
    a_cookie_write_needs_the_session_csrf_token,
    signing_out_ends_the_session_and_removes_the_cookie,
    disabling_a_user_ends_their_sessions_and_sign_in,
    a_new_password_ends_the_sessions_and_replaces_the_old_one,
    sessions_end_when_idle_or_past_their_lifetime,
    a_short_idle_lifetime_is_kept_alive_by_use,
    a_bearer_token_is_never_taken_from_a_cookie,
    sign_in_attempts_are_limited_per_address_before_the_password_is_checked,
    the_cookie_is_secure_only_behind_a_trusted_proxy,
    the_command_line_adds_lists_disables_and_resets_users,
    principals_from_before_users_keep_their_tokens,
);

const PASSWORD: &str = "correct horse battery staple";

/// A signed-in session as the page holds it.
struct Session {
    cookie: String,
    csrf: String,
    set_cookie: String,
    body: Value,
}

/// Adds a user over the API as `admin`; its id.
async fn add_user(app: &TestApp, admin: &str, email: &str, role: &str) -> i64 {
    let response = app
        .post_json(
            admin,
            "/api/users",
            &json!({"name": email, "email": email, "role": role, "password": PASSWORD}),
        )
        .await;
    assert_eq!(response.status(), 201, "{email}");
    response.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap()
}

async fn sign_in_response(app: &TestApp, email: &str, password: &str) -> reqwest::Response {
    app.client
        .post(app.url("/api/session"))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .unwrap()
}

async fn sign_in(app: &TestApp, email: &str) -> Session {
    let response = sign_in_response(app, email, PASSWORD).await;
    assert_eq!(response.status(), 201);
    let set_cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let body: Value = response.json().await.unwrap();
    Session {
        cookie,
        csrf: body["csrf_token"].as_str().unwrap().to_owned(),
        set_cookie,
        body,
    }
}

/// A request carrying `session`'s cookie (and no CSRF token).
fn by_cookie(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    session: &Session,
) -> reqwest::RequestBuilder {
    app.client
        .request(method, app.url(path))
        .header("cookie", &session.cookie)
}

async fn status_of_me(app: &TestApp, session: &Session) -> u16 {
    by_cookie(app, reqwest::Method::GET, "/api/me", session)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn sessions_of(app: &TestApp, principal_id: i64) -> Vec<user_session::Model> {
    user_session::Entity::find()
        .filter(user_session::Column::PrincipalId.eq(principal_id))
        .all(&app.db)
        .await
        .unwrap()
}

async fn an_admin_adds_a_user_who_signs_in_and_works_by_cookie(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let response = app
        .post_json(
            &admin,
            "/api/users",
            &json!({"name": "Alice", "email": " Alice@Example.COM ", "role": "sales",
                    "team": "east", "password": PASSWORD}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let text = response.text().await.unwrap();
    assert!(
        !text.contains(PASSWORD) && !text.contains("argon2"),
        "{text}"
    );
    let added: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(added["email"], "alice@example.com");
    assert_eq!(added["role"], "sales");
    assert_eq!(added["team"], "east");
    assert_eq!(added["active"], true);
    let id = added["id"].as_i64().unwrap();

    // A principal like any other, its password an argon2id hash.
    let row = principal::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.email.as_deref(), Some("alice@example.com"));
    assert!(
        row.password_hash
            .as_deref()
            .unwrap()
            .starts_with("$argon2id$"),
        "{:?}",
        row.password_hash
    );
    assert_eq!(row.team.as_deref(), Some("east"));

    // One user per email, whatever its case.
    let again = app
        .post_json(
            &admin,
            "/api/users",
            &json!({"name": "Alice 2", "email": "ALICE@example.com", "role": "ops",
                    "password": PASSWORD}),
        )
        .await;
    assert_problem(again, 409, "/problems/conflict").await;
    // Too short a password, an intake user: refused naming the field.
    for (body, field) in [
        (
            json!({"name": "B", "email": "b@example.com", "role": "sales", "password": "short"}),
            "password",
        ),
        (
            json!({"name": "B", "email": "b@example.com", "role": "intake", "password": PASSWORD}),
            "role",
        ),
        (
            json!({"name": "B", "email": "b@example.com", "role": "ops", "team": "east", "password": PASSWORD}),
            "team",
        ),
    ] {
        let refused = app.post_json(&admin, "/api/users", &body).await;
        let problem = assert_problem(refused, 422, "/problems/validation").await;
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    let listed: Value = app.get(&admin, "/api/users").await.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["email"], "alice@example.com");

    // Wrong password, unknown email: one answer, and no cookie.
    for (email, password) in [
        ("alice@example.com", "not the password at all"),
        ("nobody@example.com", PASSWORD),
    ] {
        let refused = sign_in_response(&app, email, password).await;
        assert!(refused.headers().get("set-cookie").is_none());
        let problem = assert_problem(refused, 401, "/problems/unauthorized").await;
        assert_eq!(problem["detail"], "wrong email or password");
    }
    assert!(sessions_of(&app, id).await.is_empty());

    // Signing in with the email in another case.
    let session = sign_in(&app, "ALICE@example.com").await;
    let attributes: Vec<&str> = session.set_cookie.split("; ").collect();
    let value = session.cookie.strip_prefix("leadpipe_session=").unwrap();
    assert!(value.starts_with("lps_") && value.len() == 47, "{value}");
    assert_eq!(
        attributes[1..],
        ["Path=/", "Max-Age=604800", "HttpOnly", "SameSite=Strict"],
        "{}",
        session.set_cookie
    );
    assert_eq!(session.body["principal_id"], id);
    assert_eq!(session.body["role"], "sales");
    // Only hashes are stored.
    let stored = sessions_of(&app, id).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].id_hash, domain::auth::hash_token(value));
    assert_eq!(stored[0].csrf_hash, domain::auth::hash_token(&session.csrf));
    assert_eq!(
        stored[0].expires_at - stored[0].created_at,
        chrono::Duration::days(7)
    );

    // The cookie authenticates as the user, with the user's role.
    let me = by_cookie(&app, reqwest::Method::GET, "/api/me", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);
    assert_eq!(me.json::<Value>().await.unwrap()["id"], id);
    let ops_only = by_cookie(&app, reqwest::Method::GET, "/api/ops/stats", &session)
        .send()
        .await
        .unwrap();
    assert_problem(ops_only, 403, "/problems/forbidden").await;
    // The page asks for its CSRF token again: the same one.
    let current = by_cookie(&app, reqwest::Method::GET, "/api/session", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(current.status(), 200);
    let current: Value = current.json().await.unwrap();
    assert_eq!(current["csrf_token"], session.csrf.as_str());
    assert_eq!(current["principal_id"], id);
}

async fn a_cookie_write_needs_the_session_csrf_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let id = add_user(&app, &admin, "rep@example.com", "sales").await;
    let session = sign_in(&app, "rep@example.com").await;
    let other = sign_in(&app, "rep@example.com").await;
    assert_ne!(session.csrf, other.csrf);
    let path = format!("/api/principals/{id}");
    let away = json!({"availability": "away"});
    for token in [None, Some("wrong"), Some(other.csrf.as_str())] {
        let mut request = by_cookie(&app, reqwest::Method::PATCH, &path, &session).json(&away);
        if let Some(token) = token {
            request = request.header("x-csrf-token", token);
        }
        let refused = request.send().await.unwrap();
        assert_problem(refused, 403, "/problems/csrf-token-invalid").await;
    }
    let row = principal::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        row.availability, "available",
        "a refused write changed the row"
    );

    let done = by_cookie(&app, reqwest::Method::PATCH, &path, &session)
        .header("x-csrf-token", &session.csrf)
        .json(&away)
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 200);
    let row = principal::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.availability, "away");
    // A bearer token's writes need no CSRF token, as before.
    let bearer = app
        .client
        .patch(app.url(&path))
        .bearer_auth(&admin)
        .json(&json!({"availability": "available"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200);
}

async fn signing_out_ends_the_session_and_removes_the_cookie(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let id = add_user(&app, &admin, "ops@example.com", "ops").await;
    let session = sign_in(&app, "ops@example.com").await;
    let kept = sign_in(&app, "ops@example.com").await;

    let without_token = by_cookie(&app, reqwest::Method::DELETE, "/api/session", &session)
        .send()
        .await
        .unwrap();
    assert_problem(without_token, 403, "/problems/csrf-token-invalid").await;
    assert_eq!(sessions_of(&app, id).await.len(), 2);

    let out = by_cookie(&app, reqwest::Method::DELETE, "/api/session", &session)
        .header("x-csrf-token", &session.csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    let cleared = out.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cleared.starts_with("leadpipe_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    assert_eq!(status_of_me(&app, &session).await, 401);
    // The other session goes on.
    assert_eq!(status_of_me(&app, &kept).await, 200);
    assert_eq!(sessions_of(&app, id).await.len(), 1);
    // A bearer token has no session to end or show.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = app
            .client
            .request(method, app.url("/api/session"))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        assert_problem(response, 401, "/problems/unauthorized").await;
    }
}

async fn disabling_a_user_ends_their_sessions_and_sign_in(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let id = add_user(&app, &admin, "leaver@example.com", "sales").await;
    let first = sign_in(&app, "leaver@example.com").await;
    let second = sign_in(&app, "leaver@example.com").await;
    assert_eq!(sessions_of(&app, id).await.len(), 2);

    let disabled = app
        .post_json(&admin, &format!("/api/users/{id}/disable"), &json!({}))
        .await;
    assert_eq!(disabled.status(), 200);
    let disabled: Value = disabled.json().await.unwrap();
    assert_eq!(disabled["active"], false);
    assert!(disabled["disabled_at"].is_string(), "{disabled}");
    assert!(sessions_of(&app, id).await.is_empty());
    for session in [&first, &second] {
        assert_eq!(status_of_me(&app, session).await, 401);
    }
    let refused = sign_in_response(&app, "leaver@example.com", PASSWORD).await;
    assert_problem(refused, 401, "/problems/unauthorized").await;
    // Still a principal: it keeps its name, and is no longer an owner.
    let row = principal::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert!(!row.active && row.disabled_at.is_some());
    let not_a_user = app
        .post_json(
            &admin,
            &format!("/api/users/{}/disable", id + 100),
            &json!({}),
        )
        .await;
    assert_problem(not_a_user, 404, "/problems/not-found").await;
}

async fn a_new_password_ends_the_sessions_and_replaces_the_old_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let id = add_user(&app, &admin, "forgetful@example.com", "sales").await;
    let session = sign_in(&app, "forgetful@example.com").await;
    let new_password = "an entirely new passphrase";
    let set = app
        .client
        .put(app.url(&format!("/api/users/{id}/password")))
        .bearer_auth(&admin)
        .json(&json!({"password": new_password}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 204);
    assert_eq!(status_of_me(&app, &session).await, 401);
    assert!(sessions_of(&app, id).await.is_empty());
    let old = sign_in_response(&app, "forgetful@example.com", PASSWORD).await;
    assert_problem(old, 401, "/problems/unauthorized").await;
    let new = sign_in_response(&app, "forgetful@example.com", new_password).await;
    assert_eq!(new.status(), 201);
    let short = app
        .client
        .put(app.url(&format!("/api/users/{id}/password")))
        .bearer_auth(&admin)
        .json(&json!({"password": "short"}))
        .send()
        .await
        .unwrap();
    assert_problem(short, 422, "/problems/validation").await;
}

async fn sessions_end_when_idle_or_past_their_lifetime(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.sessions.session_idle = std::time::Duration::from_secs(30 * 60);
    http.sessions.session_lifetime = std::time::Duration::from_secs(8 * 3600);
    let app = TestApp::spawn_with(backend, http).await;
    let admin = app.token(Role::Admin, None).await;
    let id = add_user(&app, &admin, "idle@example.com", "sales").await;

    let session = sign_in(&app, "idle@example.com").await;
    assert!(
        session.set_cookie.contains("Max-Age=28800"),
        "{}",
        session.set_cookie
    );
    let row = &sessions_of(&app, id).await[0];
    assert_eq!(row.expires_at - row.created_at, chrono::Duration::hours(8));
    assert_eq!(status_of_me(&app, &session).await, 200);
    // Last used 29 minutes ago: still on, and the use is noted.
    set_session_time(
        &app,
        row.id,
        user_session::Column::LastSeenAt,
        chrono::Duration::minutes(-29),
    )
    .await;
    assert_eq!(status_of_me(&app, &session).await, 200);
    let seen = sessions_of(&app, id).await[0].last_seen_at;
    assert!(
        chrono::Utc::now() - seen < chrono::Duration::minutes(1),
        "{seen}"
    );
    // Last used 31 minutes ago: over, and gone.
    set_session_time(
        &app,
        row.id,
        user_session::Column::LastSeenAt,
        chrono::Duration::minutes(-31),
    )
    .await;
    assert_eq!(status_of_me(&app, &session).await, 401);
    assert!(sessions_of(&app, id).await.is_empty());

    // In use all along, but past its lifetime: over.
    let session = sign_in(&app, "idle@example.com").await;
    let row = &sessions_of(&app, id).await[0];
    assert_eq!(status_of_me(&app, &session).await, 200);
    set_session_time(
        &app,
        row.id,
        user_session::Column::ExpiresAt,
        chrono::Duration::seconds(-1),
    )
    .await;
    assert_eq!(status_of_me(&app, &session).await, 401);
    assert!(sessions_of(&app, id).await.is_empty());
}

/// Use is noted at least ten times per idle lifetime: a session of 20
/// seconds idle that is used every 15 seconds goes on.
async fn a_short_idle_lifetime_is_kept_alive_by_use(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.sessions.session_idle = std::time::Duration::from_secs(20);
    let app = TestApp::spawn_with(backend, http).await;
    let admin = app.token(Role::Admin, None).await;
    let id = add_user(&app, &admin, "brisk@example.com", "sales").await;
    let session = sign_in(&app, "brisk@example.com").await;
    let row = sessions_of(&app, id).await[0].id;
    for _ in 0..3 {
        set_session_time(
            &app,
            row,
            user_session::Column::LastSeenAt,
            chrono::Duration::seconds(-15),
        )
        .await;
        assert_eq!(status_of_me(&app, &session).await, 200);
        let seen = sessions_of(&app, id).await[0].last_seen_at;
        assert!(
            chrono::Utc::now() - seen < chrono::Duration::seconds(5),
            "{seen}"
        );
    }
}

/// Sets a session's time column to now plus `offset`.
async fn set_session_time(
    app: &TestApp,
    row_id: i64,
    column: user_session::Column,
    offset: chrono::Duration,
) {
    user_session::Entity::update_many()
        .col_expr(column, Expr::value(domain::clock::now() + offset))
        .filter(user_session::Column::Id.eq(row_id))
        .exec(&app.db)
        .await
        .unwrap();
}

async fn a_bearer_token_is_never_taken_from_a_cookie(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let fake = Session {
        cookie: format!("leadpipe_session={admin}"),
        csrf: String::new(),
        set_cookie: String::new(),
        body: Value::Null,
    };
    let refused = by_cookie(&app, reqwest::Method::GET, "/api/me", &fake)
        .send()
        .await
        .unwrap();
    assert_problem(refused, 401, "/problems/unauthorized").await;
    // With an Authorization header, the header alone decides.
    let with_both = by_cookie(&app, reqwest::Method::GET, "/api/me", &fake)
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(with_both.status(), 200);
    let id = add_user(&app, &admin, "both@example.com", "sales").await;
    let session = sign_in(&app, "both@example.com").await;
    let wrong_header = by_cookie(&app, reqwest::Method::GET, "/api/me", &session)
        .header("authorization", "Bearer lp_nonsense")
        .send()
        .await
        .unwrap();
    assert_problem(wrong_header, 401, "/problems/unauthorized").await;
    assert_eq!(sessions_of(&app, id).await.len(), 1);
}

async fn sign_in_attempts_are_limited_per_address_before_the_password_is_checked(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.auth_fail_per_minute = 3;
    let app = TestApp::spawn_with(backend, http).await;
    let admin = app.token(Role::Admin, None).await;
    add_user(&app, &admin, "target@example.com", "sales").await;
    for _ in 0..3 {
        let wrong = sign_in_response(&app, "target@example.com", "a wrong guess here").await;
        assert_problem(wrong, 401, "/problems/unauthorized").await;
    }
    // Over the limit, even the right password is not checked.
    let limited = sign_in_response(&app, "target@example.com", PASSWORD).await;
    assert!(limited.headers().get("retry-after").is_some());
    assert!(limited.headers().get("set-cookie").is_none());
    assert_problem(limited, 429, "/problems/too-many-requests").await;
    assert_eq!(app.count(user_session::Entity).await, 0);
}

async fn the_cookie_is_secure_only_behind_a_trusted_proxy(backend: Backend) {
    for (trusted, forwarded, secure) in [
        (false, Some("https"), false),
        (true, Some("https"), true),
        (true, Some("HTTPS, http"), true),
        (true, Some("http"), false),
        (true, None, false),
    ] {
        let mut http = api::config::HttpSettings::for_tests();
        http.sessions.trust_forwarded_proto = trusted;
        let app = TestApp::spawn_with(backend, http).await;
        let admin = app.token(Role::Admin, None).await;
        add_user(&app, &admin, "proxy@example.com", "sales").await;
        let mut request = app
            .client
            .post(app.url("/api/session"))
            .json(&json!({"email": "proxy@example.com", "password": PASSWORD}));
        if let Some(proto) = forwarded {
            request = request.header("x-forwarded-proto", proto);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 201);
        let cookie = response.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            cookie.ends_with("; Secure"),
            secure,
            "trusted {trusted}, forwarded {forwarded:?}: {cookie}"
        );
    }
}

async fn the_command_line_adds_lists_disables_and_resets_users(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let added = app.run_cli(
        &[
            "user",
            "add",
            "--name",
            "alice",
            "--email",
            "Alice@Example.com",
            "--role",
            "sales",
            "--team",
            "east",
            "--password-env",
            "ALICE_PASSWORD",
        ],
        &[("ALICE_PASSWORD", PASSWORD)],
    );
    let text = output_text(&added);
    assert!(added.status.success(), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
    let row = principal::Entity::find()
        .filter(principal::Column::Email.eq("alice@example.com"))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.role.as_str(), row.team.as_deref()),
        ("sales", Some("east"))
    );

    // Never a password on the command line; no terminal to ask on: refused.
    let in_argv = app.run_cli(
        &[
            "user",
            "add",
            "--name",
            "b",
            "--email",
            "b@example.com",
            "--role",
            "ops",
            "--password",
            PASSWORD,
        ],
        &[],
    );
    assert_eq!(in_argv.status.code(), Some(2), "{}", output_text(&in_argv));
    let unset = app.run_cli(
        &[
            "user",
            "add",
            "--name",
            "b",
            "--email",
            "b@example.com",
            "--role",
            "ops",
            "--password-env",
            "NOT_SET_ANYWHERE",
        ],
        &[],
    );
    assert_eq!(unset.status.code(), Some(2), "{}", output_text(&unset));
    let taken = app.run_cli(
        &[
            "user",
            "add",
            "--name",
            "a2",
            "--email",
            "ALICE@example.com",
            "--role",
            "ops",
            "--password-env",
            "P",
        ],
        &[("P", PASSWORD)],
    );
    assert_eq!(taken.status.code(), Some(4), "{}", output_text(&taken));
    assert_eq!(app.scalar("SELECT COUNT(*) FROM principal").await, 1);

    let listed = app.run_cli(&["user", "list", "--output", "json"], &[]);
    let text = String::from_utf8(listed.stdout).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0]["email"], "alice@example.com");
    assert_eq!(rows[0]["state"], "active");
    assert!(!text.contains("argon2"), "{text}");

    let session = sign_in(&app, "alice@example.com").await;
    let reset = app.run_cli(
        &[
            "user",
            "reset-password",
            "alice@example.com",
            "--password-env",
            "NEW",
        ],
        &[("NEW", "the second passphrase")],
    );
    assert!(reset.status.success(), "{}", output_text(&reset));
    assert_eq!(status_of_me(&app, &session).await, 401);
    let new = sign_in_response(&app, "alice@example.com", "the second passphrase").await;
    assert_eq!(new.status(), 201);
    let new_cookie = new.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();

    let disabled = app.run_cli(&["user", "disable", &row.id.to_string()], &[]);
    assert!(disabled.status.success(), "{}", output_text(&disabled));
    let me = app
        .client
        .get(app.url("/api/me"))
        .header("cookie", new_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 401);
    let listed = app.run_cli(&["user", "list", "--output", "json"], &[]);
    let rows: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert!(
        rows["state"]
            .as_str()
            .unwrap()
            .starts_with("disabled since "),
        "{rows}"
    );
    let missing = app.run_cli(&["user", "disable", "nobody@example.com"], &[]);
    assert_eq!(missing.status.code(), Some(3), "{}", output_text(&missing));
}

async fn principals_from_before_users_keep_their_tokens(backend: Backend) {
    use migration::MigratorTrait;

    let url = match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join(format!("leadpipe-users-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).unwrap();
            format!("sqlite://{}?mode=rwc", dir.join("old.db").display())
        }
        Backend::Postgres => leadpipe_tests::fresh_postgres_database().await,
    };
    let db = sea_orm::Database::connect(&url).await.unwrap();
    let all = migration::Migrator::migrations();
    let before = all
        .iter()
        .position(|m| m.name() == "m20261207_000990_users_and_sessions")
        .unwrap();
    migration::Migrator::up(&db, Some(u32::try_from(before).unwrap()))
        .await
        .unwrap();
    let token = "lp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    db.execute_raw(Statement::from_string(
        db.get_database_backend(),
        format!(
            "INSERT INTO principal (name, role, token_hash, active, created_at) \
             VALUES ('old ops', 'ops', '{}', TRUE, '2026-12-01T00:00:00Z')",
            domain::auth::hash_token(token)
        ),
    ))
    .await
    .unwrap();
    migration::Migrator::up(&db, None).await.unwrap();
    let old = principal::Entity::find().one(&db).await.unwrap().unwrap();
    assert_eq!(
        (old.email, old.password_hash, old.disabled_at),
        (None, None, None)
    );
    // Its token moved to the token table as it was: no expiry.
    let moved = domain::entities::api_token::Entity::find()
        .all(&db)
        .await
        .unwrap();
    assert_eq!(moved.len(), 1);
    assert_eq!(
        (
            moved[0].principal_id,
            moved[0].expires_at,
            &moved[0].token_hash
        ),
        (old.id, None, &domain::auth::hash_token(token))
    );
    let found = domain::auth::authenticate(&db, token)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.name, "old ops");
    // Not a user: nothing to list, nothing to sign in as.
    assert!(domain::users::list(&db).await.unwrap().is_empty());
}
