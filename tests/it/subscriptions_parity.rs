//! Outgoing webhooks on a par with Svix: secret rotation with an overlap
//! window, PATCH, a test ping, the event-type catalogue. Every delivery is
//! checked by a receiver built on the public `standardwebhooks` library.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use domain::auth::Role;
use domain::entities::{idempotency_key, outbox_delivery};
use leadpipe_tests::client::{Answer, Api};
use leadpipe_tests::publishing::{self, publish_until};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};
use standardwebhooks::Webhook;
use workers::publisher::{Publisher, PublisherSettings};

/// One delivery as received: which of the known secrets verify it.
#[derive(Debug, Clone)]
struct Delivery {
    id: String,
    body: Value,
    signatures: usize,
    /// `verified[i]`: the library accepted it under the i-th secret given.
    verified: Vec<bool>,
}

#[derive(Clone, Default)]
struct LibraryReceiver {
    secrets: Arc<Mutex<Vec<String>>>,
    got: Arc<Mutex<Vec<Delivery>>>,
    /// Answer 500 to this many requests first (they are not recorded).
    failures_left: Arc<Mutex<usize>>,
}

async fn hook(req: HttpRequest, body: web::Bytes, r: web::Data<LibraryReceiver>) -> HttpResponse {
    {
        let mut left = r.failures_left.lock().unwrap();
        if *left > 0 {
            *left -= 1;
            return HttpResponse::InternalServerError().finish();
        }
    }
    let mut headers = http::HeaderMap::new();
    for (name, value) in req.headers() {
        headers.insert(
            http::HeaderName::from_bytes(name.as_str().as_bytes()).unwrap(),
            http::HeaderValue::from_bytes(value.as_bytes()).unwrap(),
        );
    }
    let secrets = r.secrets.lock().unwrap().clone();
    let verified = secrets
        .iter()
        .map(|s| Webhook::new(s).unwrap().verify(&body, &headers).is_ok())
        .collect();
    let header = |name: &str| headers[name].to_str().unwrap().to_owned();
    r.got.lock().unwrap().push(Delivery {
        id: header("webhook-id"),
        body: serde_json::from_slice(&body).unwrap(),
        signatures: header("webhook-signature").split(' ').count(),
        verified,
    });
    HttpResponse::NoContent().finish()
}

impl LibraryReceiver {
    async fn start() -> (Self, String) {
        let receiver = Self::default();
        let data = web::Data::new(receiver.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .default_service(web::to(hook))
        })
        .workers(1)
        .bind("127.0.0.1:0")
        .unwrap();
        let url = format!("http://{}/hook", server.addrs()[0]);
        tokio::spawn(server.run());
        (receiver, url)
    }

    fn know(&self, secret: &str) {
        self.secrets.lock().unwrap().push(secret.to_owned());
    }

    fn deliveries(&self) -> Vec<Delivery> {
        self.got.lock().unwrap().clone()
    }
}

struct Parity {
    app: TestApp,
    admin: Api,
    receiver: LibraryReceiver,
    url: String,
    publisher: Publisher,
}

impl Parity {
    async fn new(backend: Backend) -> Self {
        let app = TestApp::spawn(backend).await;
        let admin = app.api_as(Role::Admin, None).await;
        let (receiver, url) = LibraryReceiver::start().await;
        let publisher = app.publisher(publishing::settings());
        Self {
            app,
            admin,
            receiver,
            url,
            publisher,
        }
    }

    /// Subscribes the receiver; returns the id, the receiver knows the secret.
    async fn subscribe(&self, event_types: Value) -> i64 {
        let created = self.admin.new_subscription(&self.url, event_types).await;
        self.receiver.know(created["secret"].as_str().unwrap());
        created["id"].as_i64().unwrap()
    }

    async fn rotate(&self, id: i64, body: Value) -> Value {
        let body = self.admin.rotate_secret(id, &body).await.expect(200).await;
        let secret = body["secret"].as_str().unwrap();
        assert!(secret.starts_with("whsec_"), "{body}");
        self.receiver.know(secret);
        body
    }

    /// A lead change, so one `lead.created` event goes out.
    async fn event(&self, source_ref: &str) {
        let intake = self.app.api_as(Role::Intake, Some("webform")).await;
        intake.webform_lead(source_ref, "x").await;
    }

    /// Publishes until the receiver holds `n` deliveries; returns the last.
    async fn delivered(&self, n: usize) -> Delivery {
        publish_until(
            &self.publisher,
            &format!("delivery {n}"),
            Duration::from_secs(10),
            async || self.receiver.deliveries().len() >= n,
        )
        .await;
        let all = self.receiver.deliveries();
        assert_eq!(all.len(), n, "no more deliveries than expected");
        all[n - 1].clone()
    }
}

on_both_backends!(
    rotation_signs_with_both_secrets_during_the_overlap_only,
    rotated_secret_is_sealed_in_the_idempotent_replay,
    patch_checks_the_url_and_event_types_and_toggles_delivery,
    test_ping_reaches_only_that_subscription_signed,
    event_types_list_schemas_and_every_one_can_be_subscribed,
    stats_and_metrics_show_success_rate_and_latency_per_subscription,
    concurrent_rotations_never_lose_a_secret_they_returned,
    a_new_sealing_key_reseals_the_previous_secret_too,
    patch_honours_if_match,
);

async fn patch_honours_if_match(backend: Backend) {
    let t = Parity::new(backend).await;
    let id = t.subscribe(json!([])).await;
    let patch = |version: i64, description: &'static str| {
        t.admin
            .patch_subscription(id, &json!({"description": description}))
            .if_match(version)
    };
    let first = patch(1, "one").await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["etag"], "\"2\"");
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["version"], 2);
    let stale = patch(1, "two").await;
    let problem = assert_problem(stale, 412, "/problems/precondition-failed").await;
    assert_eq!(problem["current_version"], 2);
    let list: Value = t
        .admin
        .get("/api/subscriptions")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        list["data"][0]["description"], "one",
        "the stale write changed nothing"
    );
}

async fn a_new_sealing_key_reseals_the_previous_secret_too(backend: Backend) {
    use base64::Engine;
    let mut t = Parity::new(backend).await;
    let id = t.subscribe(json!([])).await;
    t.rotate(id, json!({})).await;
    let key = |id: &str, byte: u8| {
        format!(
            "{id}:{}",
            base64::engine::general_purpose::STANDARD.encode([byte; 32])
        )
    };
    // `Keyring::for_tests()` is `test:` with 32 bytes of 7.
    let both =
        domain::sealed::Keyring::parse(&format!("{},{}", key("new", 2), key("test", 7)), false)
            .unwrap();
    domain::secret_rotation::rotate(&t.app.db, &both)
        .await
        .unwrap();
    let new_only = domain::sealed::Keyring::parse(&key("new", 2), false).unwrap();
    t.publisher = t.app.publisher(PublisherSettings {
        keyring: new_only,
        ..publishing::settings()
    });
    t.event("k-1").await;
    let delivery = t.delivered(1).await;
    assert_eq!(delivery.signatures, 2);
    assert_eq!(
        delivery.verified,
        [true, true],
        "both secrets open under the new key alone"
    );
}

async fn concurrent_rotations_never_lose_a_secret_they_returned(backend: Backend) {
    let t = Parity::new(backend).await;
    let id = t.subscribe(json!(["lead.created"])).await;
    let rotate = || t.admin.rotate_secret(id, &json!({}));
    let (a, b) = tokio::join!(rotate(), rotate());
    let mut issued = Vec::new();
    for response in [a, b] {
        match response.status().as_u16() {
            200 => {
                let body: Value = response.json().await.unwrap();
                issued.push(body["secret"].as_str().unwrap().to_owned());
            }
            409 => {
                assert_problem(response, 409, "/problems/conflict").await;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(!issued.is_empty(), "at least one rotation wins");
    for secret in &issued {
        t.receiver.know(secret);
    }
    t.event("c-1").await;
    let delivery = t.delivered(1).await;
    // The first secret (from the create) and each issued one, in order.
    assert!(
        delivery.verified[1..].iter().all(|ok| *ok),
        "every secret a rotation answered still verifies: {:?}",
        delivery.verified
    );
}

async fn stats_and_metrics_show_success_rate_and_latency_per_subscription(backend: Backend) {
    let t = Parity::new(backend).await;
    let id = t.subscribe(json!(["lead.created"])).await;
    *t.receiver.failures_left.lock().unwrap() = 1;
    t.event("s-1").await;
    t.delivered(1).await;

    let ops = t.app.api_as(Role::Ops, None).await;
    let stats: Value = ops.get("/api/ops/stats").await.json().await.unwrap();
    let mine = stats["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["subscription_id"] == id)
        .unwrap_or_else(|| panic!("subscription {id} in {stats}"))
        .clone();
    assert_eq!(mine["delivered"], 1);
    assert_eq!(mine["attempts"], 2, "one 500, then a 204");
    assert_eq!(mine["success_rate"], 0.5);
    assert!(mine["avg_latency_ms"].as_f64().unwrap() >= 0.0, "{mine}");

    let scrape = t.app.metrics().await;
    for series in [
        format!(
            "leadpipe_subscription_attempts_total{{subscription_id=\"{id}\",outcome=\"success\"}}"
        ),
        format!(
            "leadpipe_subscription_attempts_total{{subscription_id=\"{id}\",outcome=\"failure\"}}"
        ),
        format!("leadpipe_subscription_attempt_duration_seconds_count{{subscription_id=\"{id}\"}}"),
    ] {
        assert!(
            scrape.contains(&series),
            "{series} in the scrape: {}",
            scrape
                .lines()
                .filter(|l| l.contains("subscription_"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

async fn rotation_signs_with_both_secrets_during_the_overlap_only(backend: Backend) {
    let t = Parity::new(backend).await;
    let id = t.subscribe(json!(["lead.created"])).await;

    t.event("r-1").await;
    let first = t.delivered(1).await;
    assert_eq!(
        first.verified,
        [true],
        "the library verifies with the secret"
    );
    assert_eq!(first.signatures, 1);

    let rotated = t.rotate(id, json!({})).await;
    let until: chrono::DateTime<chrono::Utc> = rotated["previous_secret_valid_until"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let overlap = until - chrono::Utc::now();
    assert!(
        overlap > chrono::Duration::hours(23) && overlap <= chrono::Duration::hours(24),
        "default overlap is 24 h: {overlap}"
    );
    t.event("r-2").await;
    let during = t.delivered(2).await;
    assert_eq!(during.signatures, 2, "one signature per secret");
    assert_eq!(
        during.verified,
        [true, true],
        "old and new secret both verify"
    );

    // A short overlap, then its end: only the newest secret signs.
    t.rotate(id, json!({"overlap_seconds": 1})).await;
    t.event("r-3").await;
    assert_eq!(t.delivered(3).await.verified, [false, true, true]);
    // The one-second overlap runs out: the passing time is what is tested.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    t.event("r-4").await;
    let after = t.delivered(4).await;
    assert_eq!(after.signatures, 1);
    assert_eq!(
        after.verified,
        [false, false, true],
        "only the new secret after the window"
    );

    let bad = t
        .admin
        .rotate_secret(id, &json!({"overlap_seconds": 864_000}))
        .await;
    assert_problem(bad, 422, "/problems/validation").await;
    let missing = t.admin.rotate_secret(999_999, &json!({})).await;
    assert_problem(missing, 404, "/problems/not-found").await;
}

async fn rotated_secret_is_sealed_in_the_idempotent_replay(backend: Backend) {
    let t = Parity::new(backend).await;
    let id = t.subscribe(json!([])).await;
    let rotate = || t.admin.rotate_secret(id, &json!({})).key("rotate-once");
    let first: Value = rotate().await.json().await.unwrap();
    let replay: Value = rotate().await.json().await.unwrap();
    assert_eq!(
        first["secret"], replay["secret"],
        "a replay answers the same secret"
    );
    let stored = idempotency_key::Entity::find()
        .filter(idempotency_key::Column::Path.contains("rotate-secret"))
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap();
    let stored = format!("{:?}", stored.response_body);
    assert!(
        !stored.contains(first["secret"].as_str().unwrap()),
        "the stored reply is sealed"
    );
    let list = t.admin.get("/api/subscriptions").await;
    let list = list.text().await.unwrap();
    assert!(
        !list.contains("whsec_") && !list.contains("secret"),
        "{list}"
    );
}

async fn patch_checks_the_url_and_event_types_and_toggles_delivery(backend: Backend) {
    let t = Parity::new(backend).await;
    let id = t.subscribe(json!(["lead.created"])).await;

    for url in [
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest",
        "http://[::1]:9/x",
    ] {
        let response = t.admin.patch_subscription(id, &json!({"url": url})).await;
        let body = assert_problem(response, 422, "/problems/validation").await;
        assert_eq!(body["errors"][0]["field"], "url", "{url}");
    }
    let unknown = t
        .admin
        .patch_subscription(id, &json!({"event_types": ["lead.exploded"]}))
        .await;
    assert_problem(unknown, 422, "/problems/validation").await;

    let changed = t
        .admin
        .patch_subscription(
            id,
            &json!({"event_types": ["deal.stage_changed"], "description": "deals", "enabled": false}),
        )
        .await;
    assert_eq!(changed.status(), 200);
    let changed: Value = changed.json().await.unwrap();
    assert_eq!(changed["event_types"], json!(["deal.stage_changed"]));
    assert_eq!(changed["description"], "deals");
    assert_eq!(changed["state"], "disabled");
    assert_eq!(changed["url"], t.url, "left alone");

    // Disabled: nothing goes out; a test ping is refused.
    let ping = t.admin.ping_subscription(id).await;
    assert_problem(ping, 409, "/problems/conflict").await;

    let enabled = t
        .admin
        .patch_subscription(id, &json!({"event_types": [], "enabled": true}))
        .await;
    let enabled: Value = enabled.json().await.unwrap();
    assert_eq!(enabled["state"], "active");
    t.event("p-1").await;
    assert_eq!(t.delivered(1).await.verified, [true]);

    let missing = t
        .admin
        .patch_subscription(999_999, &json!({"enabled": true}))
        .await;
    assert_problem(missing, 404, "/problems/not-found").await;
    let sales = t.app.api_as(Role::Sales, None).await;
    let forbidden = sales
        .patch_subscription(id, &json!({"enabled": false}))
        .await;
    assert_eq!(forbidden.status(), 403);
}

async fn test_ping_reaches_only_that_subscription_signed(backend: Backend) {
    let t = Parity::new(backend).await;
    let id = t.subscribe(json!(["lead.created"])).await;
    let other = t.subscribe(json!([])).await;

    let response = t.admin.ping_subscription(id).await;
    assert_eq!(response.status(), 202);
    let queued: Value = response.json().await.unwrap();
    let ping = t.delivered(1).await;
    assert_eq!(ping.id, queued["event_id"].as_str().unwrap());
    assert_eq!(ping.body["type"], "ping");
    assert_eq!(ping.body["data"]["subscription_id"], id);
    assert_eq!(
        ping.verified,
        [true, false],
        "signed with its own secret only"
    );

    // Recorded like any delivery, and only to the subscription named.
    let recorded = outbox_delivery::Entity::find()
        .filter(outbox_delivery::Column::State.eq("delivered"))
        .count(&t.app.db)
        .await
        .unwrap();
    assert_eq!(recorded, 1);
    let to_other = outbox_delivery::Entity::find()
        .filter(outbox_delivery::Column::SubscriptionId.eq(other))
        .count(&t.app.db)
        .await
        .unwrap();
    assert_eq!(to_other, 0);
}

async fn event_types_list_schemas_and_every_one_can_be_subscribed(backend: Backend) {
    let t = Parity::new(backend).await;
    let response = t.admin.get("/api/event-types").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let types = body["data"].as_array().unwrap();
    let names: Vec<&str> = types.iter().map(|e| e["name"].as_str().unwrap()).collect();
    for expected in [
        "lead.created",
        "lead.status_changed",
        "lead.converted",
        "deal.stage_changed",
        "ping",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let deal = types
        .iter()
        .find(|e| e["name"] == "deal.stage_changed")
        .unwrap();
    let schema = &deal["schema"];
    assert_eq!(schema["type"], "object");
    for field in ["deal_id", "from", "to", "version"] {
        assert!(
            schema["properties"][field].is_object(),
            "{field} in {schema}"
        );
    }
    let lead = types.iter().find(|e| e["name"] == "lead.created").unwrap();
    assert!(lead["schema"]["properties"]["email"].is_object());

    let id = t.subscribe(json!(["deal.stage_changed"])).await;
    let all = t
        .admin
        .patch_subscription(id, &json!({"event_types": names}))
        .await;
    assert_eq!(all.status(), 200, "every listed type can be named");
}
