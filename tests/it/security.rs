//! Security as tests: who may call what (every endpoint × every role), body
//! limits (size and pace) on every route that takes a body, and the pace of
//! a kept-alive connection's next request head.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use domain::auth::Role;
use leadpipe_tests::raw_http::{ended, read_full_answer};
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

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
    ("GET", "/api/tasks", SALES_UP),
    ("POST", "/api/tasks", SALES_UP),
    ("GET", "/api/tasks/{id}", SALES_UP),
    ("PATCH", "/api/tasks/{id}", SALES_UP),
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
    ("POST", "/api/leads/{id}/merge", SALES_UP),
    ("GET", "/api/merges/{id}", SALES_UP),
    ("POST", "/api/merges/{id}/undo", SALES_UP),
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
    // By the session cookie of a user with the role (see BY_SESSION).
    ("GET", "/api/session", SALES_UP),
    ("GET", "/api/tokens", SALES_UP),
    ("POST", "/api/tokens", SALES_UP),
    ("POST", "/api/tokens/{id}/rotate", SALES_UP),
    ("DELETE", "/api/tokens/{id}", SALES_UP),
    // Last of the session's: it ends the session.
    ("DELETE", "/api/session", SALES_UP),
    ("GET", "/api/users", ADMIN),
    ("POST", "/api/users", ADMIN),
    ("POST", "/api/users/{id}/disable", ADMIN),
    ("PUT", "/api/users/{id}/password", ADMIN),
    ("PATCH", "/api/principals/{id}", &["sales", "admin"]),
    ("GET", "/api/routing-rules", SALES_UP),
    ("PUT", "/api/routing-rules", ADMIN),
    ("POST", "/api/routing-rules/preview", SALES_UP),
    ("GET", "/api/teams", SALES_UP),
    ("PUT", "/api/teams/{name}", ADMIN),
    ("GET", "/api/reports/speed-to-lead", SALES_UP),
    ("GET", "/api/sources", OPS_UP),
    ("POST", "/api/sources", ADMIN),
    ("GET", "/api/sources/{name}", OPS_UP),
    ("PATCH", "/api/sources/{name}", ADMIN),
    ("POST", "/api/sources/{name}/pause", OPS_UP),
    ("POST", "/api/sources/{name}/resume", OPS_UP),
    ("DELETE", "/api/sources/{name}", ADMIN),
    ("GET", "/api/subscriptions", OPS_UP),
    ("POST", "/api/subscriptions", ADMIN),
    ("DELETE", "/api/subscriptions/{id}", ADMIN),
    ("GET", "/api/subscriptions/{id}", OPS_UP),
    ("POST", "/api/subscriptions/{id}/enable", ADMIN),
    ("POST", "/api/subscriptions/{id}/recover", ADMIN),
    ("DELETE", "/api/tombstones/{key_hash}", ADMIN),
    ("PATCH", "/api/subscriptions/{id}", ADMIN),
    ("POST", "/api/subscriptions/{id}/rotate-secret", ADMIN),
    ("POST", "/api/subscriptions/{id}/test", ADMIN),
    ("GET", "/api/event-types", OPS_UP),
    // On the public listener; without a token on LEADPIPE_METRICS_BIND.
    ("GET", "/metrics", OPS_UP),
];

/// Operations a caller may call on its own record only: each role calls them
/// with its own id.
const ON_ONESELF: &[&str] = &["/api/principals/{id}"];

/// Operations authenticated by the session cookie alone: each role calls
/// them as a signed-in user of that role (with its CSRF token), and
/// `intake`, which no user has, is not asked.
const BY_SESSION: &[&str] = &[
    "/api/session",
    "/api/tokens",
    "/api/tokens/{id}/rotate",
    "/api/tokens/{id}",
];

/// A signed-in admin user's session cookie and CSRF token, so that the
/// session's own operations read their bodies too.
async fn admin_session(app: &TestApp, admin: &str) -> (String, String) {
    let password = "session password long enough";
    let added = app
        .post_json(
            admin,
            "/api/users",
            &json!({"name": "boss", "email": "boss@example.com", "role": "admin",
                    "password": password}),
        )
        .await;
    assert_eq!(added.status(), 201);
    let signed_in = app
        .client
        .post(app.url("/api/session"))
        .json(&json!({"email": "boss@example.com", "password": password}))
        .send()
        .await
        .unwrap();
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let body: Value = signed_in.json().await.unwrap();
    (cookie, body["csrf_token"].as_str().unwrap().to_owned())
}

fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
        .replace("{name}", "webform")
        .replace("{correlation_id}", "nothing-here")
        .replace("{key_hash}", "00")
}

fn body_for(method: &str, path: &str) -> Option<Value> {
    match (method, path) {
        ("POST", "/api/leads") => Some(json!({"source": "webform", "source_ref": "matrix-1"})),
        ("POST" | "PATCH" | "PUT", _) => Some(json!({})),
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
    every_body_is_bounded,
    every_body_that_trickles_is_refused_in_time,
    a_webhook_body_must_keep_coming_and_a_slow_steady_one_is_stored,
    a_chunked_body_left_unread_ends_its_connection
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
    app.api(&tokens[0].1)
        .create_lead(&json!({"source": "webform", "source_ref": "seed"}))
        .await;
    let mut own_ids = std::collections::HashMap::new();
    for (_, token) in &tokens {
        let me = domain::auth::authenticate(&app.db, token).await.unwrap();
        own_ids.insert(token.as_str(), me.unwrap().id);
    }
    // A signed-in user per role but intake: (cookie, CSRF token).
    let mut sessions = std::collections::HashMap::new();
    for role in ["sales", "ops", "admin"] {
        let email = format!("{role}@example.com");
        let password = "matrix password long enough";
        let added = app
            .post_json(
                &tokens[3].1,
                "/api/users",
                &json!({"name": role, "email": email, "role": role, "password": password}),
            )
            .await;
        assert_eq!(added.status(), 201);
        let signed_in = app
            .client
            .post(app.url("/api/session"))
            .json(&json!({"email": email, "password": password}))
            .send()
            .await
            .unwrap();
        let cookie = signed_in.headers()["set-cookie"].to_str().unwrap();
        let cookie = cookie.split(';').next().unwrap().to_owned();
        let body: Value = signed_in.json().await.unwrap();
        let csrf = body["csrf_token"].as_str().unwrap().to_owned();
        sessions.insert(role, (cookie, csrf));
    }
    let mut wrong = Vec::new();
    for (method, path, allowed) in MATRIX {
        if BY_SESSION.contains(path) {
            let url = app.url(&concrete(path));
            let request = |session: Option<&(String, String)>| {
                let mut request = app.client.request(method.parse().unwrap(), &url);
                if let Some(body) = body_for(method, path) {
                    request = request.json(&body);
                }
                if let Some((cookie, csrf)) = session {
                    request = request
                        .header("cookie", cookie)
                        .header("x-csrf-token", csrf);
                }
                request.send()
            };
            let anonymous = request(None).await.unwrap().status().as_u16();
            if anonymous != 401 {
                wrong.push(format!("{method} {path} without a session: {anonymous}"));
            }
            // A bearer token has no session.
            let bearer = app
                .client
                .request(method.parse().unwrap(), &url)
                .bearer_auth(&tokens[3].1)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            if bearer != 401 {
                wrong.push(format!("{method} {path} with a bearer token: {bearer}"));
            }
            for (role, session) in &sessions {
                let status = request(Some(session)).await.unwrap().status().as_u16();
                let served = !(status == 401 || status == 403 || status >= 500);
                if served != allowed.contains(role) {
                    wrong.push(format!("{method} {path} as a {role} user: {status}"));
                }
            }
            continue;
        }
        let send = |token: Option<&str>| {
            let url = match token {
                Some(token) if ON_ONESELF.contains(path) => {
                    app.url(&path.replace("{id}", &own_ids[token].to_string()))
                }
                _ => app.url(&concrete(path)),
            };
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
    let (cookie, csrf) = admin_session(&app, &admin).await;
    let big = format!("{{\"padding\": \"{}\"}}", "x".repeat(40 * 1024));
    let mut wrong = Vec::new();
    let mut writes: Vec<(&str, String)> = MATRIX
        .iter()
        .filter(|(m, _, _)| *m == "POST" || *m == "PATCH" || *m == "PUT")
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
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
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

/// The head of a request by hand, announcing a body of `length` bytes.
fn request_head(method: &str, path: &str, headers: &[(String, String)], length: usize) -> String {
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: leadpipe\r\nContent-Length: {length}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// A sender that announces a body and sends two bytes of it held the
/// connection (and the handler waiting on it) for as long as it liked, on
/// every route that reads a body, before any signature or role could be
/// checked on a webhook. Now each such request gets 408 within the body's
/// time, and its connection ends.
async fn every_body_that_trickles_is_refused_in_time(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.body_timeout_secs = 0.5;
    http.body_min_rate = 1_000;
    let app = TestApp::spawn_with(backend, http).await;
    let admin = app.token(Role::Admin, None).await;
    let (cookie, csrf) = admin_session(&app, &admin).await;
    let address = app.url("").trim_start_matches("http://").to_owned();
    // Every operation the document says takes a body.
    let spec: Value = serde_json::from_str(include_str!("../../api/openapi.json")).unwrap();
    let mut writes: Vec<(String, String)> = Vec::new();
    for (path, operations) in spec["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            if operation.get("requestBody").is_some() {
                let path = match concrete(path).as_str() {
                    "/api/imports" => "/api/imports?source=webform".to_owned(),
                    other => other.replace("{source}", "anything"),
                };
                writes.push((method.to_uppercase(), path));
            }
        }
    }
    assert!(writes.len() > 20, "{writes:?}");
    let started = std::time::Instant::now();
    let answers = futures::future::join_all(writes.iter().map(|(method, path)| {
        let (address, admin) = (address.clone(), admin.clone());
        let (cookie, csrf) = (cookie.clone(), csrf.clone());
        async move {
            let content_type = if path.starts_with("/api/imports") {
                "text/csv"
            } else {
                "application/json"
            };
            // The session's own operations go by the cookie.
            let headers = [
                ("Authorization".to_owned(), format!("Bearer {admin}")),
                ("Cookie".to_owned(), cookie),
                ("X-CSRF-Token".to_owned(), csrf),
                ("Content-Type".to_owned(), content_type.to_owned()),
            ];
            let mut stream = TcpStream::connect(&address).await.unwrap();
            let head = request_head(method, path, &headers, 1_000);
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(b"{\"").await.unwrap();
            let answer = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                read_full_answer(&mut stream),
            )
            .await;
            let ended = ended(&mut stream).await;
            (format!("{method} {path}"), answer, ended)
        }
    }))
    .await;
    let mut wrong = Vec::new();
    for (route, answer, ended) in answers {
        match answer {
            Ok(Some(answer))
                if answer.status == 408
                    && answer.body.contains("\"/problems/body-timeout\"")
                    && answer.closing
                    && ended => {}
            other => wrong.push(format!("{route}: {other:?}, connection ended: {ended}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "a trickling body must get 408 and its connection closed:\n{}",
        wrong.join("\n")
    );
    // All at once, each in about its half second.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

async fn a_webhook_body_must_keep_coming_and_a_slow_steady_one_is_stored(backend: Backend) {
    use domain::entities::inbox_event;
    use leadpipe_tests::webhooks::{lead_event, now, standard_headers};

    let mut http = api::config::HttpSettings::for_tests();
    http.body_timeout_secs = 0.5;
    http.body_min_rate = 200;
    let app = TestApp::spawn_with(backend, http).await;
    // Metrics are per process: a name of its own keeps the other backend's
    // count out of this one.
    let source = match backend {
        Backend::Sqlite => "slowsqlite",
        Backend::Postgres => "slowpostgres",
    };
    let key = app.standard_source(source).await;
    let address = app.url("").trim_start_matches("http://").to_owned();
    let path = format!("/webhooks/{source}");
    let signed = |msg_id: &str| {
        let body = lead_event(msg_id, "slow@example.com", "2026-11-30T10:00:00Z");
        let mut headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
        headers.extend(standard_headers(&key, msg_id, now(), &body));
        (request_head("POST", &path, &headers, body.len()), body)
    };

    // A byte every 300 ms: behind the 200 bytes a second it must keep up.
    let (head, body) = signed("msg_trickle");
    let mut stream = TcpStream::connect(&address).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let (answer, sent) = {
        let mut sent = 0usize;
        let mut answer = None;
        for byte in &body {
            if stream.write_all(std::slice::from_ref(byte)).await.is_err() {
                break;
            }
            sent += 1;
            // Waiting up to 300 ms for an answer paces the bytes.
            if let Ok(found) = tokio::time::timeout(
                std::time::Duration::from_millis(300),
                read_full_answer(&mut stream),
            )
            .await
            {
                answer = found;
                break;
            }
        }
        (answer, sent)
    };
    let answer = answer.expect("the trickling body was answered before it was sent whole");
    assert_eq!(answer.status, 408, "{answer:?}");
    assert!(answer.body.contains("/problems/body-timeout"), "{answer:?}");
    assert!(
        sent < body.len(),
        "refused after {sent} of {} bytes",
        body.len()
    );
    assert!(
        ended(&mut stream).await,
        "the connection stays open after a 408"
    );
    assert_eq!(
        app.count(inbox_event::Entity).await,
        0,
        "a refused body stored an event"
    );
    let too_slow = leadpipe_tests::prometheus::sample(
        &app.metrics().await,
        "leadpipe_webhook_deliveries_total",
        &[("source", source), ("reason", "too_slow")],
    );
    assert!(too_slow > 0.0, "no too_slow rejection counted");

    // The same size at 1,000 bytes a second, in pieces of 100: stored.
    let (head, body) = signed("msg_steady");
    let mut stream = TcpStream::connect(&address).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    for piece in body.chunks(100) {
        stream.write_all(piece).await.unwrap();
        // The steady pace is what is tested.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let answer = read_full_answer(&mut stream).await.expect("an answer");
    assert_eq!(answer.status, 202, "{answer:?}");
    assert_eq!(app.count(inbox_event::Entity).await, 1);
}

/// actix drains a chunked body its handler left unread for as long as the
/// client sends it, so a `401` (or `408`) left the connection with a client
/// that never stops sending. Now the connection ends after the answer; a
/// chunked body read whole keeps it.
async fn a_chunked_body_left_unread_ends_its_connection(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.body_timeout_secs = 0.5;
    let app = TestApp::spawn_with(backend, http).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let address = app.url("").trim_start_matches("http://").to_owned();
    let chunked = |token: Option<&str>| {
        let mut headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("Transfer-Encoding".to_owned(), "chunked".to_owned()),
        ];
        if let Some(token) = token {
            headers.push(("Authorization".to_owned(), format!("Bearer {token}")));
        }
        let mut head = String::from("POST /api/leads HTTP/1.1\r\nHost: leadpipe\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        head
    };

    // No token (401 at once), and a token with a body that stops (408):
    // the client keeps sending chunks, and the server ends the connection.
    for (token, status) in [(None, 401), (Some(intake.as_str()), 408)] {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream.write_all(chunked(token).as_bytes()).await.unwrap();
        stream.write_all(b"1\r\n{\r\n").await.unwrap();
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            read_full_answer(&mut stream),
        )
        .await
        .expect("no answer")
        .expect("closed before answering");
        assert_eq!(answer.status, status, "{answer:?}");
        let keeps_sending = async {
            loop {
                if stream.write_all(b"1\r\n \r\n").await.is_err() {
                    break;
                }
                // A chunk now and then, as a stalling client sends (tested).
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), keeps_sending)
            .await
            .unwrap_or_else(|_| panic!("{status}: the connection still takes chunks after 10 s"));
    }

    // A chunked body read whole: the connection serves the next request.
    let mut stream = TcpStream::connect(&address).await.unwrap();
    let body = br#"{"source":"webform","source_ref":"chunked-1","email":"c@example.com"}"#;
    for expected in [201, 200] {
        stream
            .write_all(chunked(Some(&intake)).as_bytes())
            .await
            .unwrap();
        let chunk = [
            format!("{:x}\r\n", body.len()).as_bytes(),
            body,
            b"\r\n0\r\n\r\n",
        ]
        .concat();
        stream.write_all(&chunk).await.unwrap();
        let answer = read_full_answer(&mut stream)
            .await
            .expect("an answer on the kept connection");
        assert_eq!(answer.status, expected, "{answer:?}");
        assert!(!answer.closing, "{answer:?}");
    }
}

/// A kept-alive connection's next request head has to come whole in time.
/// actix-web times only a connection's first head, so a client that got
/// one answer and then sent the next head a byte now and then held its
/// connection for as long as it liked, no credentials needed. A client that
/// sends its next requests promptly keeps the connection however long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_request_head_that_trickles_ends_its_connection() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let address = app.url("").trim_start_matches("http://").to_owned();
    let health = b"GET /healthz HTTP/1.1\r\nHost: leadpipe\r\n\r\n";
    let mut prompt = TcpStream::connect(&address).await.unwrap();
    let prompt_since = std::time::Instant::now();
    let mut ask_promptly = async || {
        prompt.write_all(health).await.unwrap();
        let answer = read_full_answer(&mut prompt).await.unwrap_or_else(|| {
            panic!("prompt connection ended after {:?}", prompt_since.elapsed())
        });
        assert_eq!(answer.status, 200, "{answer:?}");
        assert!(!answer.closing, "{answer:?}");
    };

    let mut trickling = TcpStream::connect(&address).await.unwrap();
    trickling.write_all(health).await.unwrap();
    let answer = read_full_answer(&mut trickling).await.expect("an answer");
    assert_eq!(answer.status, 200, "{answer:?}");
    let answered = std::time::Instant::now();
    let mut sent = 0;
    for byte in health.iter().cycle().take(60) {
        if trickling.write_all(&[*byte]).await.is_err() || ended_now(&mut trickling).await {
            break;
        }
        sent += 1;
        if sent % 4 == 0 {
            ask_promptly().await;
        }
        // The trickle's pace is what is tested.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(
        sent < 60,
        "still open {:?} after its answer, the next head trickled",
        answered.elapsed()
    );
    let cut = leadpipe_tests::prometheus::sample(
        &app.metrics().await,
        "leadpipe_http_connections_cut_total",
        &[("reason", "next_head_late")],
    );
    assert!(cut >= 1.0, "the cut connection is not counted: {cut}");
    while prompt_since.elapsed() < std::time::Duration::from_secs(14) {
        ask_promptly().await;
        // A prompt client's pace, kept up for the time tested.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

/// Whether the server has ended the connection: a read finds its end at
/// once (the server sends nothing after its answer).
async fn ended_now(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(
        std::time::Duration::from_millis(10),
        tokio::io::AsyncReadExt::read(stream, &mut buf),
    );
    matches!(read.await, Ok(Ok(0) | Err(_)))
}

/// A request in flight is never cut by the next-head deadline: on a
/// kept-alive connection, a second request whose body arrives steadily
/// (within its pace) for longer than the deadline is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_outlasts_the_next_head_deadline() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let address = app.url("").trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&address).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: leadpipe\r\n\r\n")
        .await
        .unwrap();
    let answer = read_full_answer(&mut stream).await.expect("an answer");
    assert_eq!(answer.status, 200, "{answer:?}");

    let body = [b' '; 60];
    let head = request_head("POST", "/webhooks/nosuch", &[], body.len());
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    for byte in body {
        stream.write_all(&[byte]).await.unwrap();
        // A slow body, past the next-head limit: the pace is what is tested.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(started.elapsed() > api::http::kept_alive::NEXT_HEAD);
    let answer = read_full_answer(&mut stream)
        .await
        .unwrap_or_else(|| panic!("cut after {:?} in flight", started.elapsed()));
    // Unknown and unsigned: refused, but only once the whole body is in.
    assert_eq!(answer.status, 401, "{answer:?}");
}
