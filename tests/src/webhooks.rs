//! Webhook test helpers: senders that sign like the real ones — computed here
//! with `hmac` directly, not with leadpipe's signing code, so a shared bug
//! cannot make both sides agree — plus source set-up, the worker runtime, and
//! waiting for an inbox event to reach a state.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use domain::auth::Role;
use domain::entities::inbox_event;
use domain::store::Store;
use hmac::{Hmac, KeyInit, Mac};
use sea_orm::EntityTrait;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use workers::WorkerSettings;
use workers::inbox_job::InboxProcessor;

use crate::TestApp;

/// How long a test waits for the workers before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The worker runtime of a `TestApp`, running in-process.
pub struct RunningWorkers {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl RunningWorkers {
    pub fn start(db: Store, settings: WorkerSettings) -> Self {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            workers::runtime::run(db, settings, shutdown).await.unwrap();
        });
        Self { stop, task }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

/// Test settings under which only a wake-up finds new work in time: the
/// poll is minutes.
pub fn woken_only_settings() -> WorkerSettings {
    let mut settings = WorkerSettings::for_tests();
    settings.poll_interval = Duration::from_secs(600);
    settings
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

pub type Headers = Vec<(String, String)>;

/// `whsec_` + base64 of the raw key, as Standard Webhooks senders show it.
pub fn standard_secret(key: &[u8]) -> String {
    format!("whsec_{}", STANDARD.encode(key))
}

/// Standard Webhooks: `v1,` base64 HMAC over `{id}.{timestamp}.{body}`.
pub fn standard_headers(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> Headers {
    let signed = [format!("{msg_id}.{timestamp}.").as_bytes(), body].concat();
    let signature = format!("v1,{}", STANDARD.encode(hmac_sha256(key, &signed)));
    vec![
        ("webhook-id".into(), msg_id.into()),
        ("webhook-timestamp".into(), timestamp.to_string()),
        ("webhook-signature".into(), signature),
        ("content-type".into(), "application/json".into()),
    ]
}

/// GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body.
pub fn github_headers(secret: &str, delivery: &str, event: &str, body: &[u8]) -> Headers {
    vec![
        (
            "X-Hub-Signature-256".into(),
            format!(
                "sha256={}",
                hex::encode(hmac_sha256(secret.as_bytes(), body))
            ),
        ),
        ("X-GitHub-Delivery".into(), delivery.into()),
        ("X-GitHub-Event".into(), event.into()),
        ("content-type".into(), "application/json".into()),
    ]
}

/// Stripe: `Stripe-Signature: t=<t>,v1=<hex>` over `{t}.{body}`.
pub fn stripe_headers(secret: &str, timestamp: i64, body: &[u8]) -> Headers {
    let signed = [format!("{timestamp}.").as_bytes(), body].concat();
    vec![
        (
            "Stripe-Signature".into(),
            format!(
                "t={timestamp},v1={}",
                hex::encode(hmac_sha256(secret.as_bytes(), &signed))
            ),
        ),
        ("content-type".into(), "application/json".into()),
    ]
}

/// Generic HMAC-SHA256 of the body in `header`, base64-encoded.
pub fn hmac_base64_headers(secret: &str, header: &str, body: &[u8]) -> Headers {
    vec![
        (
            header.into(),
            STANDARD.encode(hmac_sha256(secret.as_bytes(), body)),
        ),
        ("content-type".into(), "application/json".into()),
    ]
}

/// The inbox id of a `202` webhook answer (a new event).
pub async fn ack_id(response: reqwest::Response) -> i64 {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 202, "{body}");
    body["id"].as_i64().unwrap()
}

/// A Standard Webhooks-shaped lead event: `{type, data: {id, email, name, ...}}`.
pub fn lead_event(source_ref: &str, email: &str, updated_at: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "lead.created",
        "timestamp": updated_at,
        "data": {
            "id": source_ref,
            "email": email,
            "name": "Ada Lovelace",
            "company": "Analytical Engines",
            "updated_at": updated_at,
        }
    }))
    .unwrap()
}

impl TestApp {
    pub async fn admin_token(&self) -> String {
        self.token(Role::Admin, None).await
    }

    /// The stored row of source `name`; panics if there is none.
    pub async fn source_row(&self, name: &str) -> domain::entities::source::Model {
        domain::entities::source::Entity::find_by_id(name.to_owned())
            .one(&self.db)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no source {name}"))
    }

    /// Creates a standard-webhooks source with the default mapping; returns
    /// its raw signing key.
    pub async fn standard_source(&self, name: &str) -> Vec<u8> {
        let key = format!("{name}-signing-key-0123456789").into_bytes();
        let response = self
            .api(&self.admin_token().await)
            .create_source(&json!({"name": name, "scheme": "standard-webhooks",
                        "secrets": [standard_secret(&key)]}))
            .await;
        assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
        key
    }

    /// Reconciles source `crm` from a fake sender of three records, the
    /// second changed by `break_it` so that it cannot become a lead: the run
    /// must end `done` with the other two written and that one kept. Returns
    /// the kept row and the record as the sender holds it.
    pub async fn reconcile_one_bad_record(
        &self,
        break_it: impl FnOnce(&mut Value),
    ) -> (domain::entities::reconcile_rejected::Model, Value) {
        use api::cli::demo::fake_source::FakeSource;
        use domain::entities::{lead, reconcile_rejected};
        use sea_orm::EntityTrait;

        let admin = self.admin_token().await;
        let ops = self.token(Role::Ops, None).await;
        let fake = FakeSource::start(3).await.unwrap();
        fake.update(1, break_it);
        self.standard_source("crm").await;
        let pull = json!({"pull_url": fake.pull_url});
        assert_eq!(
            self.api(&admin).patch_source("crm", &pull).await.status(),
            200
        );

        let run = self.reconcile(&ops, "crm", json!({})).await;
        assert_eq!(
            (run.state.as_str(), run.created, run.rejected),
            ("done", 2, 1),
            "{run:?}"
        );
        assert_eq!(self.count(lead::Entity).await, 2);
        let mut kept = reconcile_rejected::Entity::find()
            .all(&self.db)
            .await
            .unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        (kept.remove(0), fake.record(1))
    }

    pub async fn post_webhook(
        &self,
        source: &str,
        headers: &Headers,
        body: &[u8],
    ) -> reqwest::Response {
        let mut request = self
            .client
            .post(self.url(&format!("/webhooks/{source}")))
            .body(body.to_vec());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send().await.unwrap()
    }

    /// Posts a Standard Webhooks delivery signed now with `key`.
    pub async fn post_standard(
        &self,
        source: &str,
        key: &[u8],
        msg_id: &str,
        body: &[u8],
    ) -> reqwest::Response {
        self.post_webhook(source, &standard_headers(key, msg_id, now(), body), body)
            .await
    }

    /// Delivers lead event `n` to source `webform` (`form-{n}`, message id
    /// `msg_{n}`, signed with `key`); it must be acknowledged. Returns its
    /// inbox id.
    pub async fn post_numbered_lead_event(&self, key: &[u8], n: usize) -> i64 {
        let body = lead_event(
            &format!("form-{n}"),
            "ada@example.com",
            "2026-11-30T10:00:00Z",
        );
        ack_id(
            self.post_standard("webform", key, &format!("msg_{n}"), &body)
                .await,
        )
        .await
    }

    pub async fn inbox_event(&self, id: i64) -> inbox_event::Model {
        inbox_event::Entity::find_by_id(id)
            .one(&self.db)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no inbox event {id}"))
    }

    /// Polls the inbox row until `done` holds (at most `WAIT`).
    pub async fn wait_for_event(
        &self,
        id: i64,
        what: &str,
        done: impl Fn(&inbox_event::Model) -> bool,
    ) -> inbox_event::Model {
        crate::eventually(
            &format!("inbox event {id} to become {what}"),
            WAIT,
            async || {
                let event = self.inbox_event(id).await;
                if done(&event) {
                    Ok(event)
                } else {
                    Err(format!(
                        "state {} attempts {} error {:?}",
                        event.state, event.attempts, event.last_error
                    ))
                }
            },
        )
        .await
    }

    pub async fn wait_for_state(&self, id: i64, state: &str) -> inbox_event::Model {
        self.wait_for_event(id, state, |e| e.state == state).await
    }

    /// Processes events synchronously, one attempt per call, as the job does.
    pub fn processor(&self, settings: WorkerSettings) -> InboxProcessor {
        InboxProcessor::new(self.db.clone(), settings, "test-processor".into())
    }
}
