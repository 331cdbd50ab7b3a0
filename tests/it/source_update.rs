//! Creating a source and changing one are different verbs: `source add` and
//! `POST /api/sources` refuse an existing name, `source update` and `PATCH
//! /api/sources/{name}` change only the fields given, and a scheme change
//! needs the secrets again.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use domain::entities::source;
use leadpipe_tests::cli::output_text;
use leadpipe_tests::client::Api;
use leadpipe_tests::webhooks::{Headers, now, standard_headers, standard_secret};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use serde_json::{Value, json};

on_both_backends!(
    source_add_on_an_existing_name_is_refused_and_changes_nothing,
    source_update_changes_only_the_flags_given,
    source_update_refuses_a_scheme_change_without_secrets,
    patch_changes_only_the_fields_given_under_if_match,
    patch_refuses_a_scheme_change_without_secrets_naming_the_field,
    post_on_an_existing_name_is_409,
);

/// A hex secret, as `openssl rand -hex 32` makes (and valid base64 too).
const HEX_SECRET: &str = "6f1c8e0b2d4a7c9e3f5b1d7a9c2e4f6a8b0d2c4e6f8a1b3d5c7e9f0a2b4c6d8e";
const OTHER_HEX_SECRET: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";

/// A source's configuration as `GET` shows it, without what a change moves
/// anyway (`updated_at`, `version`).
async fn config(app: &TestApp, name: &str) -> Value {
    let admin = app.admin_token().await;
    let mut view: Value = app
        .api(&admin)
        .get(&format!("/api/sources/{name}"))
        .await
        .json()
        .await
        .unwrap();
    let object = view.as_object_mut().unwrap();
    object.remove("updated_at");
    object.remove("version");
    view
}

/// `X-Signature: sha256=<hex>`, as the README's `openssl dgst` line signs.
fn hmac_headers(secret: &str, body: &[u8]) -> Headers {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    vec![
        (
            "X-Signature".into(),
            format!("sha256={}", hex::encode(mac.finalize().into_bytes())),
        ),
        ("content-type".into(), "application/json".into()),
    ]
}

fn lead_body(id: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"type": "lead.created",
                               "data": {"id": id, "email": "grace@example.com"},
                               "lead": {"id": id, "email": "grace@example.com"}}))
    .unwrap()
}

/// Whether a delivery signed with `secret` is accepted (`202`).
async fn hmac_verifies(app: &TestApp, name: &str, secret: &str, id: &str) -> bool {
    let body = lead_body(id);
    let response = app
        .post_webhook(name, &hmac_headers(secret, &body), &body)
        .await;
    match response.status().as_u16() {
        202 => true,
        401 => false,
        other => panic!("{other}: {}", response.text().await.unwrap()),
    }
}

/// The README's hmac-sha256 source, made by the CLI with a hex secret.
fn add_partner(app: &TestApp) {
    let added = app.run_cli(
        &[
            "source",
            "add",
            "--name",
            "partner",
            "--scheme",
            "hmac-sha256",
            "--secret-env",
            "SECRET",
            "--event-type-pointer",
            "/type",
            "--allow-event-type",
            "lead.created",
            "--allow-event-type",
            "lead.updated",
            "--tolerance-secs",
            "600",
        ],
        &[("SECRET", HEX_SECRET)],
    );
    assert!(added.status.success(), "{}", output_text(&added));
}

async fn source_add_on_an_existing_name_is_refused_and_changes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    add_partner(&app);
    let before = app.source_row("partner").await;
    let body = serde_json::to_vec(&json!({"type": "lead.created",
                                          "data": {"id": "p-0", "email": "grace@example.com"}}))
    .unwrap();
    let response = app
        .post_webhook("partner", &hmac_headers(HEX_SECRET, &body), &body)
        .await;
    assert_eq!(response.status(), 202);

    // The old repair recipe of docs/guide/webhooks.md: a hex secret is valid
    // base64, so this used to turn the source into standard-webhooks and
    // reset every field it did not name.
    let recipe = app.run_cli(
        &[
            "source",
            "add",
            "--name",
            "partner",
            "--scheme",
            "standard-webhooks",
            "--record-pointer",
            "/lead",
        ],
        &[],
    );
    assert_eq!(recipe.status.code(), Some(4), "{}", output_text(&recipe));
    let said = output_text(&recipe);
    assert!(
        said.contains("already exists") && said.contains("source update"),
        "{said}"
    );
    assert!(!said.contains(HEX_SECRET), "{said}");
    // Even with secrets given, `add` does not replace.
    let again = app.run_cli(
        &[
            "source",
            "add",
            "--name",
            "partner",
            "--scheme",
            "hmac-sha256",
            "--secret-env",
            "SECRET",
        ],
        &[("SECRET", OTHER_HEX_SECRET)],
    );
    assert_eq!(again.status.code(), Some(4), "{}", output_text(&again));

    assert_eq!(app.source_row("partner").await, before);
    let body = serde_json::to_vec(&json!({"type": "lead.updated",
                                          "data": {"id": "p-1", "email": "grace@example.com"}}))
    .unwrap();
    let response = app
        .post_webhook("partner", &hmac_headers(HEX_SECRET, &body), &body)
        .await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
}

async fn source_update_changes_only_the_flags_given(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    add_partner(&app);
    let before = config(&app, "partner").await;

    // The repair recipe as it is now.
    let updated = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "partner",
            "--record-pointer",
            "/lead",
        ],
        &[],
    );
    assert!(updated.status.success(), "{}", output_text(&updated));
    assert!(output_text(&updated).contains("updated source 'partner'"));
    let mut expected = before.clone();
    expected["record_pointer"] = json!("/lead");
    assert_eq!(config(&app, "partner").await, expected);

    // A flag given is the only thing that changes; a list replaces the list.
    let updated = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "partner",
            "--allow-event-type",
            "lead.created",
        ],
        &[],
    );
    assert!(updated.status.success(), "{}", output_text(&updated));
    expected["allowed_event_types"] = json!(["lead.created"]);
    assert_eq!(config(&app, "partner").await, expected);

    // `--reset` puts a field back to its default.
    let updated = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "partner",
            "--reset",
            "tolerance_secs",
            "--reset",
            "allowed_event_types",
        ],
        &[],
    );
    assert!(updated.status.success(), "{}", output_text(&updated));
    expected["tolerance_secs"] = json!(300);
    expected["allowed_event_types"] = json!([]);
    assert_eq!(config(&app, "partner").await, expected);

    // How often it usually delivers, for the quiet alert; reset: learned.
    let updated = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "partner",
            "--expected-interval",
            "90m",
        ],
        &[],
    );
    assert!(updated.status.success(), "{}", output_text(&updated));
    expected["expected_interval"] = json!("90m");
    assert_eq!(config(&app, "partner").await, expected);
    let updated = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "partner",
            "--reset",
            "expected_interval",
        ],
        &[],
    );
    assert!(updated.status.success(), "{}", output_text(&updated));
    expected["expected_interval"] = Value::Null;
    assert_eq!(config(&app, "partner").await, expected);

    // The secrets alone, same scheme: the new one verifies, the old no more.
    assert!(hmac_verifies(&app, "partner", HEX_SECRET, "u-1").await);
    let updated = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "partner",
            "--secret-env",
            "NEW_SECRET",
        ],
        &[("NEW_SECRET", OTHER_HEX_SECRET)],
    );
    assert!(updated.status.success(), "{}", output_text(&updated));
    assert!(!output_text(&updated).contains(OTHER_HEX_SECRET));
    assert!(hmac_verifies(&app, "partner", OTHER_HEX_SECRET, "u-2").await);
    assert!(!hmac_verifies(&app, "partner", HEX_SECRET, "u-3").await);
    assert_eq!(config(&app, "partner").await, expected);

    // An unknown name is exit code 3, and `update` creates nothing.
    let missing = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "nobody",
            "--record-pointer",
            "/x",
        ],
        &[],
    );
    assert_eq!(missing.status.code(), Some(3), "{}", output_text(&missing));
    assert!(output_text(&missing).contains("no source 'nobody'"));
}

async fn source_update_refuses_a_scheme_change_without_secrets(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    add_partner(&app);
    let before = app.source_row("partner").await;

    let refused = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "partner",
            "--scheme",
            "standard-webhooks",
        ],
        &[],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", output_text(&refused));
    let said = output_text(&refused);
    assert!(
        said.contains("secrets:") && said.contains("scheme"),
        "{said}"
    );
    assert_eq!(app.source_row("partner").await, before);
    assert!(hmac_verifies(&app, "partner", HEX_SECRET, "s-1").await);

    // With new secrets the scheme changes, and the fields that belong to
    // the scheme follow it; the others stay.
    let key = b"partner-standard-key-01";
    let changed = app.run_cli(
        &[
            "source",
            "update",
            "--name",
            "partner",
            "--scheme",
            "standard-webhooks",
            "--secret-env",
            "SECRET",
        ],
        &[("SECRET", &standard_secret(key))],
    );
    assert!(changed.status.success(), "{}", output_text(&changed));
    let view = config(&app, "partner").await;
    assert_eq!(view["scheme"], "standard-webhooks");
    assert_eq!(view["event_id_header"], "webhook-id");
    assert_eq!(view["event_type_pointer"], "/type");
    assert_eq!(view["tolerance_secs"], 600);
    assert_eq!(
        view["allowed_event_types"],
        json!(["lead.created", "lead.updated"])
    );
    let body = serde_json::to_vec(&json!({"type": "lead.created",
                                          "data": {"id": "s-2", "email": "grace@example.com"}}))
    .unwrap();
    let response = app
        .post_webhook(
            "partner",
            &standard_headers(key, "msg_s2", now(), &body),
            &body,
        )
        .await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
}

async fn etag_of(admin: &Api, name: &str) -> String {
    let response = admin.source(name).await;
    assert_eq!(response.status(), 200);
    response.headers()["etag"].to_str().unwrap().to_owned()
}

async fn create_partner_over_http(app: &TestApp, admin: &str) {
    let created = app
        .api(admin)
        .create_source(
            &json!({"name": "partner", "scheme": "hmac-sha256", "secrets": [HEX_SECRET],
                    "tolerance_secs": 600, "event_type_pointer": "/type",
                    "allowed_event_types": ["lead.created"],
                    "pull_url": "http://127.0.0.1:9/leads", "pull_auth_header": "x-api-key",
                    "pull_auth_secret": "pull-value-0001", "cron": "0 */15 * * * *"}),
        )
        .await;
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
}

async fn patch_changes_only_the_fields_given_under_if_match(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    create_partner_over_http(&app, &admin).await;
    let before = config(&app, "partner").await;
    let tag = etag_of(&app.api(&admin), "partner").await;
    assert_eq!(tag, "\"1\"");

    // Only admins change sources.
    for role in [Role::Ops, Role::Sales] {
        let token = app.token(role, None).await;
        let response = app
            .api(&token)
            .patch_source("partner", &json!({"tolerance_secs": 60}))
            .await;
        assert_problem(response, 403, "/problems/forbidden").await;
    }

    let response = app
        .api(&admin)
        .patch_source(
            "partner",
            &json!({"record_pointer": "/lead", "signature_header": "x-partner-signature"}),
        )
        .header("if-match", &tag)
        .await;
    assert_eq!(response.status(), 200);
    let new_tag = response.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(new_tag, "\"2\"");
    let shown = response.text().await.unwrap();
    assert!(!shown.contains(HEX_SECRET), "{shown}");
    assert!(!shown.contains("pull-value-0001"), "{shown}");
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["version"], 2);
    let mut expected = before.clone();
    expected["record_pointer"] = json!("/lead");
    expected["signature_header"] = json!("x-partner-signature");
    assert_eq!(config(&app, "partner").await, expected);
    assert_eq!(etag_of(&app.api(&admin), "partner").await, new_tag);

    // The stale tag is 412 and changes nothing.
    let stale = app
        .api(&admin)
        .patch_source("partner", &json!({"record_pointer": "/data"}))
        .header("if-match", &tag)
        .await;
    assert_problem(stale, 412, "/problems/precondition-failed").await;
    assert_eq!(config(&app, "partner").await, expected);

    // The webhooks still verify, now under the new signature header.
    let body = serde_json::to_vec(&json!({"type": "lead.created",
                                          "lead": {"id": "h-1", "email": "grace@example.com"}}))
    .unwrap();
    let mut headers = hmac_headers(HEX_SECRET, &body);
    headers[0].0 = "X-Partner-Signature".into();
    let response = app.post_webhook("partner", &headers, &body).await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());

    // `null` puts a field back to its default; `pull_url: null` turns
    // reconcile off with everything that belongs to it.
    let response = app
        .api(&admin)
        .patch_source(
            "partner",
            &json!({"signature_header": null, "pull_url": null}),
        )
        .header("if-match", &new_tag)
        .await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    expected["signature_header"] = Value::Null;
    expected["pull_url"] = Value::Null;
    expected["pull_auth_header"] = Value::Null;
    expected["pull_auth_configured"] = json!(false);
    expected["cron"] = Value::Null;
    assert_eq!(config(&app, "partner").await, expected);
    assert!(app.source_row("partner").await.pull_auth_secret.is_none());

    // The secrets alone, without If-Match.
    let response = app
        .api(&admin)
        .patch_source("partner", &json!({"secrets": [OTHER_HEX_SECRET]}))
        .await;
    assert_eq!(response.status(), 200);
    assert!(!response.text().await.unwrap().contains(OTHER_HEX_SECRET));
    assert_eq!(config(&app, "partner").await, expected);
    let body = serde_json::to_vec(&json!({"type": "lead.created",
                                          "lead": {"id": "h-2", "email": "grace@example.com"}}))
    .unwrap();
    for (secret, status) in [(OTHER_HEX_SECRET, 202), (HEX_SECRET, 401)] {
        let response = app
            .post_webhook("partner", &hmac_headers(secret, &body), &body)
            .await;
        assert_eq!(response.status(), status);
    }

    // An empty change changes nothing, not even the version.
    let tag = etag_of(&app.api(&admin), "partner").await;
    let response = app
        .api(&admin)
        .patch_source("partner", &json!({}))
        .header("if-match", &tag)
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["etag"].to_str().unwrap(), tag);

    // The name is the path's; unknown fields and names are refused.
    let renamed = app
        .api(&admin)
        .patch_source("partner", &json!({"name": "other"}))
        .await;
    assert_problem(renamed, 422, "/problems/validation").await;
    let unknown = app
        .api(&admin)
        .patch_source("nobody", &json!({"tolerance_secs": 60}))
        .await;
    assert_problem(unknown, 404, "/problems/not-found").await;
    assert_eq!(app.count(source::Entity).await, 1);
}

async fn patch_refuses_a_scheme_change_without_secrets_naming_the_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    create_partner_over_http(&app, &admin).await;
    let before = app.source_row("partner").await;

    let refused = app
        .api(&admin)
        .patch_source(
            "partner",
            &json!({"scheme": "standard-webhooks", "record_pointer": "/lead"}),
        )
        .await;
    let problem = assert_problem(refused, 422, "/problems/validation").await;
    assert_eq!(problem["errors"][0]["field"], "secrets", "{problem}");
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("scheme"),
        "{problem}"
    );
    assert!(!problem.to_string().contains(HEX_SECRET));
    assert_eq!(app.source_row("partner").await, before);

    // Naming the same scheme is no change of scheme.
    let same = app
        .api(&admin)
        .patch_source(
            "partner",
            &json!({"scheme": "hmac-sha256", "tolerance_secs": 60}),
        )
        .await;
    assert_eq!(same.status(), 200, "{}", same.text().await.unwrap());

    // New secrets that do not fit the new scheme name the rule, not the secret.
    let unfit = app
        .api(&admin)
        .patch_source(
            "partner",
            &json!({"scheme": "standard-webhooks", "secrets": ["whsec_%%%not-base64%%%"]}),
        )
        .await;
    let problem = assert_problem(unfit, 422, "/problems/validation").await;
    assert_eq!(problem["errors"][0]["field"], "secrets", "{problem}");
    assert!(!problem.to_string().contains("%%%not-base64%%%"));
    assert!(hmac_verifies(&app, "partner", HEX_SECRET, "r-1").await);

    // With its secrets, under If-Match, the scheme changes: the fields of
    // the scheme follow it, the others stay, and only the new scheme's
    // deliveries verify.
    let tag = etag_of(&app.api(&admin), "partner").await;
    let key = b"partner-standard-key-02";
    let changed = app
        .api(&admin)
        .patch_source(
            "partner",
            &json!({"scheme": "standard-webhooks", "secrets": [standard_secret(key)]}),
        )
        .header("if-match", &tag)
        .await;
    assert_eq!(changed.status(), 200);
    let changed: Value = changed.json().await.unwrap();
    assert_eq!(
        (
            &changed["scheme"],
            &changed["event_id_header"],
            &changed["signature_header"]
        ),
        (
            &json!("standard-webhooks"),
            &json!("webhook-id"),
            &Value::Null
        )
    );
    assert_eq!(changed["tolerance_secs"], 60, "set above, kept");
    assert_eq!(changed["record_pointer"], before.record_pointer.as_str());
    assert!(!hmac_verifies(&app, "partner", HEX_SECRET, "r-2").await);
    let body = serde_json::to_vec(&json!({"type": "lead.created",
                                          "lead": {"id": "r-3", "email": "grace@example.com"}}))
    .unwrap();
    let response = app
        .post_webhook(
            "partner",
            &standard_headers(key, "msg_r3", now(), &body),
            &body,
        )
        .await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
    // The tag it was changed under is stale now.
    let stale = app
        .api(&admin)
        .patch_source("partner", &json!({"tolerance_secs": 30}))
        .header("if-match", &tag)
        .await;
    assert_problem(stale, 412, "/problems/precondition-failed").await;
}

async fn post_on_an_existing_name_is_409(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    create_partner_over_http(&app, &admin).await;
    let before = app.source_row("partner").await;
    let replaced = app
        .api(&admin)
        .create_source(&json!({"name": "partner", "scheme": "standard-webhooks",
                    "secrets": [standard_secret(b"another-signing-key-1")]}))
        .await;
    let problem = assert_problem(replaced, 409, "/problems/conflict").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("PATCH /api/sources/partner"),
        "{problem}"
    );
    assert_eq!(app.source_row("partner").await, before);
    assert!(hmac_verifies(&app, "partner", HEX_SECRET, "c-1").await);
}
