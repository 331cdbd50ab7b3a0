//! Secrets: validated against their scheme, sealed at rest, never copied
//! readable into stored replies, never re-routed to a new pull host, kept out
//! of `--help`, argv and world-readable files.

#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use api::cli::demo::fake_source::FakeSource;
use api::config::HttpSettings;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use domain::auth::Role;
use domain::entities::{idempotency_key, source, subscription};
use domain::sealed::{self, Keyring};
use leadpipe_tests::cli::{self, output_text};
use leadpipe_tests::receiver::Receiver;
use leadpipe_tests::webhooks::{
    github_headers, lead_event, now, standard_headers, standard_secret,
};
use leadpipe_tests::{Backend, TestApp, assert_problem, eventually, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};

on_both_backends!(
    a_public_key_source_cannot_turn_github_without_new_secrets,
    hmac_schemes_refuse_ed25519_keys_and_short_secrets_naming_the_rule,
    stored_secrets_are_sealed_and_still_verify_sign_and_authenticate,
    a_sealed_secret_copied_to_another_source_does_not_open,
    without_a_key_secrets_are_refused_with_503,
    a_replayed_subscription_answer_is_stored_sealed,
    a_pull_url_on_a_new_origin_needs_the_auth_value_again,
    rotate_reseals_everything_under_the_new_key,
    a_source_created_with_a_secret_file_stdin_or_env_verifies_webhooks,
    stale_upload_spools_are_removed_and_uploads_leave_none,
    a_wrong_key_is_refused_before_traffic_and_by_rotate,
);

fn cli(database_url: &str, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    let mut command = cli::command(database_url);
    command
        .args(args)
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

async fn a_public_key_source_cannot_turn_github_without_new_secrets(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let public = "whpk_6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw=";
    let saved = app
        .api(&admin)
        .create_source(
            &json!({"name": "partner", "scheme": "standard-webhooks", "secrets": [public]}),
        )
        .await;
    assert_eq!(saved.status(), 201);

    // The attack: switch the scheme, keep the stored (public!) key.
    let switched = app
        .api(&admin)
        .patch_source("partner", &json!({"scheme": "github"}))
        .await;
    let problem = assert_problem(switched, 422, "/problems/validation").await;
    assert_eq!(problem["errors"][0]["field"], "secrets", "{problem}");
    let message = problem["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("must be given again")
            && message.contains("from standard-webhooks to github"),
        "{message}"
    );
    assert!(!message.contains(public), "{message}");
    // Given again, the public key is refused for an HMAC scheme, by its rule.
    let given = app
        .api(&admin)
        .patch_source("partner", &json!({"scheme": "github", "secrets": [public]}))
        .await;
    let problem = assert_problem(given, 422, "/problems/validation").await;
    let message = problem["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("ed25519"), "{message}");
    assert!(!message.contains(public), "{message}");
    let view: Value = app
        .api(&admin)
        .get("/api/sources/partner")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(view["scheme"], "standard-webhooks");

    // A body "signed" with the public key as HMAC key gets nowhere.
    let body = lead_event("pk-1", "ada@example.com", "2026-11-30T10:00:00Z");
    let forged = app
        .post_webhook(
            "partner",
            &github_headers(public, "d-1", "push", &body),
            &body,
        )
        .await;
    assert_problem(forged, 401, "/problems/invalid-signature").await;

    // With new secrets that fit, the switch is fine.
    let fixed = app
        .api(&admin)
        .patch_source(
            "partner",
            &json!({"scheme": "github", "secrets": ["a-real-github-secret"]}),
        )
        .await;
    assert_eq!(fixed.status(), 200);
}

async fn hmac_schemes_refuse_ed25519_keys_and_short_secrets_naming_the_rule(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    for scheme in ["github", "stripe", "hmac-sha256"] {
        for (secret, rule) in [
            (
                "whpk_6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw=",
                "ed25519",
            ),
            ("whsk_c2lnbmluZy1rZXk=", "ed25519"),
            ("s", "at least 16 bytes"),
        ] {
            let response = app
                .api(&admin)
                .create_source(&json!({"name": "hmac", "scheme": scheme, "secrets": [secret]}))
                .await;
            let problem = assert_problem(response, 422, "/problems/validation").await;
            assert_eq!(problem["errors"][0]["field"], "secrets");
            let message = problem["errors"][0]["message"].as_str().unwrap();
            assert!(message.contains(rule), "{scheme} {secret}: {message}");
        }
    }
    assert_eq!(app.count(source::Entity).await, 0);
}

async fn stored_secrets_are_sealed_and_still_verify_sign_and_authenticate(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    app.start_workers(workers::WorkerSettings::for_tests());
    let admin = app.admin_token().await;
    let key = b"sealed-signing-key-0001";
    let secret = standard_secret(key);
    let fake = FakeSource::start(2).await.unwrap();
    fake.require_auth("authorization", "Bearer pull-value-4711");
    let saved = app
        .api(&admin)
        .create_source(
            &json!({"name": "sealed", "scheme": "standard-webhooks", "secrets": [secret],
                    "pull_url": fake.pull_url, "pull_auth_header": "authorization",
                    "pull_auth_secret": "Bearer pull-value-4711"}),
        )
        .await;
    assert_eq!(saved.status(), 201);
    let receiver = Receiver::start().await;
    let created: Value = app
        .api(&admin)
        .create_subscription(&json!({"url": &receiver.url, "event_types": ["lead.created"]}))
        .await
        .json()
        .await
        .unwrap();
    let sub_secret = created["secret"].as_str().unwrap().to_owned();
    receiver.set_secret(&sub_secret);

    // Read straight from the tables: nothing readable.
    let row = app.source_row("sealed").await;
    let stored = row.secrets.to_string();
    assert!(
        !stored.contains(secret.trim_start_matches("whsec_")),
        "{stored}"
    );
    assert!(stored.contains("lpsec:v1:test:"), "{stored}");
    let pull = row.pull_auth_secret.unwrap();
    assert!(!pull.contains("pull-value-4711") && sealed::is_sealed(&pull));
    let sub = subscription::Entity::find()
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert!(sealed::is_sealed(&sub.secret) && !sub.secret.contains(&sub_secret[6..]));

    // Webhooks still verify; the lead's events go out signed.
    let body = lead_event("s-1", "ada@example.com", "2026-11-30T10:00:00Z");
    let response = app
        .post_webhook(
            "sealed",
            &standard_headers(key, "msg_1", now(), &body),
            &body,
        )
        .await;
    assert_eq!(response.status(), 202);
    eventually("a delivery", Duration::from_secs(20), async || {
        !receiver.accepted().is_empty()
    })
    .await;
    assert!(receiver.accepted().iter().all(|r| r.signature_ok));

    // The pull still sends its auth value.
    let ops = app.token(Role::Ops, None).await;
    let run = app.reconcile_over_api(&ops, "sealed", None).await;
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(
        fake.requests()[0].auth.as_deref(),
        Some("Bearer pull-value-4711")
    );
}

async fn a_sealed_secret_copied_to_another_source_does_not_open(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key_a = app.standard_source("alpha").await;
    app.standard_source("beta").await;
    // Someone with write access to the table copies alpha's sealed secret.
    app.exec("UPDATE source SET secrets = (SELECT secrets FROM source WHERE name = 'alpha') WHERE name = 'beta'")
        .await;
    let body = lead_event("c-1", "ada@example.com", "2026-11-30T10:00:00Z");
    let response = app
        .post_webhook(
            "beta",
            &standard_headers(&key_a, "msg_c", now(), &body),
            &body,
        )
        .await;
    let problem = assert_problem(response, 500, "/problems/internal").await;
    assert!(!problem.to_string().contains("lpsec"), "{problem}");
    // alpha's own deliveries are untouched.
    let response = app
        .post_webhook(
            "alpha",
            &standard_headers(&key_a, "msg_a", now(), &body),
            &body,
        )
        .await;
    assert_eq!(response.status(), 202);
}

async fn without_a_key_secrets_are_refused_with_503(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        HttpSettings {
            keyring: Keyring::none(),
            ..HttpSettings::for_tests()
        },
    )
    .await;
    let admin = app.admin_token().await;
    let saved = app
        .api(&admin)
        .create_source(&json!({"name": "nokey", "scheme": "standard-webhooks",
                    "secrets": [standard_secret(b"no-key-signing-key-01")]}))
        .await;
    let problem = assert_problem(saved, 503, "/problems/secret-key-missing").await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("LEADPIPE_SECRET_KEY") && detail.contains("LEADPIPE_INSECURE_DEV_SECRETS"),
        "{detail}"
    );
    let subscribed = app
        .api(&admin)
        .create_subscription(
            &json!({"url": "http://127.0.0.1:9/hook", "event_types": ["lead.created"]}),
        )
        .key("k-1")
        .await;
    assert_problem(subscribed, 503, "/problems/secret-key-missing").await;
    assert_eq!(app.count(source::Entity).await, 0);
    assert_eq!(app.count(subscription::Entity).await, 0);
    // The key was released: the same request may be retried once a key is set.
    assert_eq!(app.count(idempotency_key::Entity).await, 0);
}

async fn a_replayed_subscription_answer_is_stored_sealed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let first = app
        .api(&admin)
        .create_subscription(
            &json!({"url": "http://127.0.0.1:9/hook", "event_types": ["lead.created"]}),
        )
        .key("sub-once")
        .await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let secret = first["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"));

    let row = idempotency_key::Entity::find()
        .filter(idempotency_key::Column::Key.eq("sub-once"))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    let body = row.response_body.unwrap();
    assert!(!body.contains(&secret[6..]), "{body}");
    assert!(sealed::is_sealed(&body), "{body}");

    // A replay answers exactly as the first time.
    let replay = app
        .api(&admin)
        .create_subscription(
            &json!({"url": "http://127.0.0.1:9/hook", "event_types": ["lead.created"]}),
        )
        .key("sub-once")
        .await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay, first);
    assert_eq!(app.count(subscription::Entity).await, 1);
}

async fn a_pull_url_on_a_new_origin_needs_the_auth_value_again(backend: Backend) {
    // A key of this server's own: runs started over HTTP must open with it.
    let keyring = Keyring::parse(&format!("srv:{}", STANDARD.encode([3u8; 32])), false).unwrap();
    let app = TestApp::spawn_with(
        backend,
        HttpSettings {
            keyring,
            ..HttpSettings::for_tests()
        },
    )
    .await;
    let admin = app.admin_token().await;
    let ops = app.token(Role::Ops, None).await;
    let old_host = FakeSource::start(2).await.unwrap();
    let new_host = FakeSource::start(2).await.unwrap();
    let config = |url: &str| {
        json!({"name": "moving", "scheme": "hmac-sha256", "secrets": ["sixteen-byte-key"],
               "pull_url": url, "pull_auth_header": "authorization"})
    };
    // Each host answers 401 to any other value (and records what it got).
    old_host.require_auth("authorization", "Bearer old-host-only");
    new_host.require_auth("authorization", "Bearer new-host-value");
    let mut first = config(&old_host.pull_url);
    first["pull_auth_secret"] = json!("Bearer old-host-only");
    assert_eq!(app.api(&admin).create_source(&first).await.status(), 201);

    // The careless change: a new host, no new value.
    let moved = app
        .api(&admin)
        .patch_source("moving", &json!({"pull_url": new_host.pull_url}))
        .await;
    let problem = assert_problem(moved, 422, "/problems/validation").await;
    assert_eq!(
        problem["errors"][0]["field"], "pull_auth_secret",
        "{problem}"
    );
    let view: Value = app
        .api(&admin)
        .get("/api/sources/moving")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(view["pull_url"], old_host.pull_url.as_str());
    assert_eq!(
        app.reconcile_over_api(&ops, "moving", None).await["state"],
        "done"
    );

    // Moving with a value of its own is fine, and only that value goes there.
    let with_value = json!({"pull_url": new_host.pull_url,
                            "pull_auth_secret": "Bearer new-host-value"});
    assert_eq!(
        app.api(&admin)
            .patch_source("moving", &with_value)
            .await
            .status(),
        200
    );
    assert_eq!(
        app.reconcile_over_api(&ops, "moving", None).await["state"],
        "done"
    );
    let sent: Vec<Option<String>> = new_host.requests().into_iter().map(|r| r.auth).collect();
    assert!(!sent.is_empty());
    assert!(
        sent.iter()
            .all(|a| a.as_deref() == Some("Bearer new-host-value")),
        "{sent:?}"
    );
}

async fn rotate_reseals_everything_under_the_new_key(backend: Backend) {
    let old = format!("old:{}", STANDARD.encode([1u8; 32]));
    let new = format!("new:{}", STANDARD.encode([2u8; 32]));
    let old_ring = Keyring::parse(&old, false).unwrap();
    let app = TestApp::spawn_with(
        backend,
        HttpSettings {
            keyring: old_ring.clone(),
            ..HttpSettings::for_tests()
        },
    )
    .await;
    let admin = app.admin_token().await;
    let secret = standard_secret(b"rotating-signing-key-1");
    let saved = app
        .api(&admin)
        .create_source(
            &json!({"name": "rot", "scheme": "standard-webhooks", "secrets": [secret],
                    "pull_url": "http://127.0.0.1:9/leads", "pull_auth_header": "x-api-key",
                    "pull_auth_secret": "pull-rotating-value"}),
        )
        .await;
    assert_eq!(saved.status(), 201);
    // A Meta source's handshake token is sealed as its secret is.
    let meta = app
        .api(&admin)
        .create_source(
            &json!({"name": "meta", "scheme": "meta-lead-ads",
                    "secrets": ["meta-app-secret-rotating"], "verify_token": "rotating-verify-token"}),
        )
        .await;
    assert_eq!(meta.status(), 201);
    let created: Value = app
        .api(&admin)
        .create_subscription(
            &json!({"url": "http://127.0.0.1:9/hook", "event_types": ["lead.created"]}),
        )
        .key("rot-sub")
        .await
        .json()
        .await
        .unwrap();
    let sub_secret = created["secret"].as_str().unwrap().to_owned();
    // A row from before sealing existed: plaintext.
    let legacy = standard_secret(b"legacy-plain-secret-01");
    app.exec(&format!(
        "INSERT INTO subscription (url, event_types, secret, state, created_at, updated_at) \
         VALUES ('http://127.0.0.1:9/legacy', '[]', '{legacy}', 'active', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')"
    ))
    .await;

    // And a reply stored for replay before sealing existed: plaintext.
    let sealed_reply = idempotency_key::Entity::find()
        .filter(idempotency_key::Column::Key.eq("rot-sub"))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    let plain_body = old_ring
        .open(
            sealed_reply.response_body.as_deref().unwrap(),
            &sealed::Place::idempotent_response(sealed_reply.principal_id, "rot-sub"),
        )
        .unwrap();
    let legacy_reply = idempotency_key::Model {
        key: "legacy-sub".into(),
        response_body: Some(plain_body.clone()),
        ..sealed_reply.clone()
    };
    idempotency_key::Entity::insert(idempotency_key::ActiveModel::from(legacy_reply))
        .exec(&app.db)
        .await
        .unwrap();

    let both = format!("{new},{old}");
    let rotated = cli(
        &app.database_url,
        &["secrets", "rotate"],
        &[("LEADPIPE_SECRET_KEY", &both)],
        None,
    );
    assert!(rotated.status.success(), "{}", output_text(&rotated));
    let report = String::from_utf8_lossy(&rotated.stdout).into_owned();
    assert!(
        report.contains(
            "3 source secrets, 1 pull auth values, 2 subscription secrets, 2 stored replies"
        ),
        "{report}"
    );

    // Everything opens with the new key alone.
    let new_only = Keyring::parse(&new, false).unwrap();
    let source = domain::inbound::source::find(&app.db, "rot", &new_only)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(source.scheme.secrets, [secret]);
    assert_eq!(
        source.pull.unwrap().auth.unwrap().value,
        "pull-rotating-value"
    );
    let meta = domain::inbound::source::find(&app.db, "meta", &new_only)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        meta.verify_token.map(|token| token.0).as_deref(),
        Some("rotating-verify-token")
    );
    let meta_row = app.source_row("meta").await;
    assert_eq!(
        sealed::sealed_key_id(meta_row.verify_token.as_deref().unwrap()),
        Some("new")
    );
    let row = app.source_row("rot").await;
    assert!(row.secrets.to_string().contains("lpsec:v1:new:"));
    let mut opened = Vec::new();
    for sub in subscription::Entity::find().all(&app.db).await.unwrap() {
        assert_eq!(sealed::sealed_key_id(&sub.secret), Some("new"));
        opened.push(domain::outbound::subscription::signing_secret(&new_only, &sub).unwrap());
    }
    opened.sort();
    let mut expected = vec![sub_secret, legacy];
    expected.sort();
    assert_eq!(opened, expected);
    let reply = idempotency_key::Entity::find()
        .filter(idempotency_key::Column::Key.eq("rot-sub"))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        sealed::sealed_key_id(reply.response_body.as_deref().unwrap()),
        Some("new")
    );
    let legacy = idempotency_key::Entity::find()
        .filter(idempotency_key::Column::Key.eq("legacy-sub"))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    let legacy_body = legacy.response_body.unwrap();
    assert_eq!(sealed::sealed_key_id(&legacy_body), Some("new"));
    assert_eq!(
        new_only
            .open(
                &legacy_body,
                &sealed::Place::idempotent_response(legacy.principal_id, "legacy-sub")
            )
            .unwrap(),
        plain_body
    );
    // The old key alone no longer opens them.
    assert!(
        domain::inbound::source::find(&app.db, "rot", &old_ring)
            .await
            .is_err()
    );

    // Safe to re-run: nothing left to do.
    let again = cli(
        &app.database_url,
        &["secrets", "rotate"],
        &[("LEADPIPE_SECRET_KEY", &new)],
        None,
    );
    assert!(again.status.success(), "{}", output_text(&again));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains(
            "0 source secrets, 0 pull auth values, 0 subscription secrets, 0 stored replies"
        ),
        "{}",
        output_text(&again)
    );
    // Without any key, rotate refuses and says what to set.
    let refused = cli(&app.database_url, &["secrets", "rotate"], &[], None);
    assert!(!refused.status.success());
    assert!(
        output_text(&refused).contains("LEADPIPE_SECRET_KEY"),
        "{}",
        output_text(&refused)
    );
}

async fn a_source_created_with_a_secret_file_stdin_or_env_verifies_webhooks(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let dir = std::env::temp_dir().join(format!("lp-secret-file-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("secret");
    let key = b"file-signing-key-000001";
    std::fs::write(&file, format!("{}\n", standard_secret(key))).unwrap();
    let key_env = cli::server_key();
    let env = [("LEADPIPE_SECRET_KEY", key_env.as_str())];

    let added = cli(
        &app.database_url,
        &[
            "source",
            "add",
            "--name",
            "from-file",
            "--scheme",
            "standard-webhooks",
            "--secret-file",
            file.to_str().unwrap(),
        ],
        &env,
        None,
    );
    assert!(added.status.success(), "{}", output_text(&added));
    let stdin_key = b"stdin-signing-key-00001";
    let added = cli(
        &app.database_url,
        &[
            "source",
            "add",
            "--name",
            "from-stdin",
            "--scheme",
            "standard-webhooks",
            "--secret-file",
            "-",
        ],
        &env,
        Some(&standard_secret(stdin_key)),
    );
    assert!(added.status.success(), "{}", output_text(&added));

    let env_key = b"env-signing-key-0000001";
    let env_secret = standard_secret(env_key);
    let added = cli(
        &app.database_url,
        &[
            "source",
            "add",
            "--name",
            "from-env",
            "--scheme",
            "standard-webhooks",
            "--secret-env",
            "PARTNER_SECRET",
        ],
        &[env[0], ("PARTNER_SECRET", env_secret.as_str())],
        None,
    );
    assert!(added.status.success(), "{}", output_text(&added));

    for (name, key) in [
        ("from-file", key.as_slice()),
        ("from-stdin", stdin_key),
        ("from-env", env_key),
    ] {
        let body = lead_event("f-1", "ada@example.com", "2026-11-30T10:00:00Z");
        let response = app
            .post_webhook(name, &standard_headers(key, "msg_f", now(), &body), &body)
            .await;
        assert_eq!(response.status(), 202, "{name}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

async fn stale_upload_spools_are_removed_and_uploads_leave_none(backend: Backend) {
    let dir = std::env::temp_dir().join(format!("lp-spool-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let stale = dir.join(format!("{}crashed-run", api::http::spool::PREFIX));
    std::fs::write(&stale, "source_ref,email\n1,ada@example.com\n").unwrap();
    let app = TestApp::spawn_with(
        backend,
        HttpSettings {
            spool_dir: Some(dir.clone()),
            ..HttpSettings::for_tests()
        },
    )
    .await;
    assert!(!stale.exists(), "a crashed run's spool is removed at start");

    let ops = app.token(Role::Ops, None).await;
    // Ops import for configured sources; an intake token configures `fair`.
    app.token(Role::Intake, Some("fair")).await;
    let response = app
        .api(&ops)
        .upload_import(
            "source=fair",
            "text/csv",
            "source_ref,email\n1,ada@example.com\n",
        )
        .await;
    assert_eq!(response.status(), 202);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    app.run_ended(&ops, &location).await;
    eventually(
        "the upload's spool to go",
        Duration::from_secs(5),
        async || std::fs::read_dir(&dir).unwrap().count() == 0,
    )
    .await;
    std::fs::remove_dir_all(dir).unwrap();
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn sqlite_path(database_url: &str) -> PathBuf {
    let rest = database_url.strip_prefix("sqlite://").unwrap();
    PathBuf::from(rest.split('?').next().unwrap())
}

// File modes are a property of the SQLite file; PostgreSQL keeps its own files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_database_and_its_wal_are_only_readable_by_their_owner() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let created = app
        .api(&intake)
        .create_lead(&json!({"source": "webform", "source_ref": "m-1", "email": "ada@example.com"}))
        .await;
    assert_eq!(created.status(), 201);
    let db = sqlite_path(&app.database_url);
    assert_eq!(mode(&db), 0o600);
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    assert!(wal.exists());
    assert_eq!(mode(&wal), 0o600);
    // No file beside it: the work rows are the only queue.
    assert!(!PathBuf::from(format!("{}-jobs", db.display())).exists());

    // A database created before this rule (0644) is tightened when opened.
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("lp-mode-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let old = dir.join("old.db");
    std::fs::write(&old, b"").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    let url = format!("sqlite://{}?mode=rwc", old.display());
    let conn = api::storage::open(&url, 1, true, &domain::sealed::Keyring::for_tests())
        .await
        .unwrap();
    assert_eq!(mode(&old), 0o600);
    drop(conn);
    std::fs::remove_dir_all(dir).unwrap();
}

/// `serve` with `env`: its output once it exits by itself, or `None` if it
/// was still running (serving) after `patience`.
fn serve_exit(database_url: &str, env: &[(&str, &str)], patience: Duration) -> Option<Output> {
    let mut child = cli::command(database_url)
        .args(["serve", "--bind", "127.0.0.1:0", "--no-workers"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Not an `eventually`: still running after `patience` is an outcome
    // (it serves), so the wait runs out instead of failing.
    let deadline = std::time::Instant::now() + patience;
    while std::time::Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

async fn a_wrong_key_is_refused_before_traffic_and_by_rotate(backend: Backend) {
    // The test app seals under `Keyring::for_tests()` (id `test`).
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let secret = standard_secret(b"keycheck-signing-key-1");
    let saved = app
        .api(&admin)
        .create_source(&json!({"name": "kc", "scheme": "standard-webhooks", "secrets": [secret]}))
        .await;
    assert_eq!(saved.status(), 201);
    let sealed_before = app.source_row("kc").await.secrets;
    let right = cli::server_key();
    let wrong = format!("test:{}", STANDARD.encode([8u8; 32]));

    // The right key: rotate has nothing to do and records the key-check value.
    let rotated = cli(
        &app.database_url,
        &["secrets", "rotate"],
        &[("LEADPIPE_SECRET_KEY", &right)],
        None,
    );
    assert!(rotated.status.success(), "{}", output_text(&rotated));
    assert!(
        output_text(&rotated).contains("1 already current"),
        "{}",
        output_text(&rotated)
    );
    let checks = domain::entities::sealing_key_check::Entity::find()
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0].key_id, "test");

    // Other key material under the same id: refused, naming the id, and
    // nothing rewritten.
    let refused = cli(
        &app.database_url,
        &["secrets", "rotate"],
        &[("LEADPIPE_SECRET_KEY", &wrong)],
        None,
    );
    assert!(!refused.status.success(), "{}", output_text(&refused));
    assert!(
        output_text(&refused).contains("'test'"),
        "{}",
        output_text(&refused)
    );
    assert!(
        !output_text(&refused).contains("already current"),
        "{}",
        output_text(&refused)
    );
    assert_eq!(app.source_row("kc").await.secrets, sealed_before);
    // So does a command that would seal a secret under it.
    let refused = cli(
        &app.database_url,
        &[
            "source",
            "add",
            "--name",
            "kc-new",
            "--scheme",
            "github",
            "--secret-env",
            "S",
        ],
        &[
            ("LEADPIPE_SECRET_KEY", &wrong),
            ("S", "a-github-secret-0123456789"),
        ],
        None,
    );
    assert!(!refused.status.success(), "{}", output_text(&refused));
    assert!(
        output_text(&refused).contains("'test'"),
        "{}",
        output_text(&refused)
    );
    assert!(
        source::Entity::find_by_id("kc-new".to_owned())
            .one(&app.db)
            .await
            .unwrap()
            .is_none()
    );

    // `serve` refuses to start with it, naming the id; with the right key it serves.
    let output = serve_exit(
        &app.database_url,
        &[("LEADPIPE_SECRET_KEY", &wrong)],
        Duration::from_secs(30),
    )
    .expect("serve started with a wrong key");
    assert!(!output.status.success());
    assert!(
        output_text(&output).contains("'test'"),
        "{}",
        output_text(&output)
    );
    assert!(
        serve_exit(
            &app.database_url,
            &[("LEADPIPE_SECRET_KEY", &right)],
            Duration::from_secs(3)
        )
        .is_none(),
        "serve did not stay up with the right key"
    );
    // A key id that is not configured at all opens nothing either.
    let other = format!("other:{}", STANDARD.encode([9u8; 32]));
    let output = serve_exit(
        &app.database_url,
        &[("LEADPIPE_SECRET_KEY", &other)],
        Duration::from_secs(30),
    )
    .expect("serve started without the key that sealed the secrets");
    assert!(
        output_text(&output).contains("'test'"),
        "{}",
        output_text(&output)
    );

    // A running server is not ready while a stored secret does not open.
    assert_eq!(
        app.client
            .get(app.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let foreign = Keyring::parse(&other, false)
        .unwrap()
        .seal(&secret, &sealed::Place::source_secrets("kc2"))
        .unwrap();
    let mut row = app.source_row("kc").await;
    row.name = "kc2".into();
    row.secrets = json!([foreign]);
    source::Entity::insert(source::ActiveModel::from(row))
        .exec(&app.db)
        .await
        .unwrap();
    eventually("readyz to fail", Duration::from_secs(20), || async {
        let status = app
            .client
            .get(app.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status();
        (status == 503).then_some(())
    })
    .await;
}
