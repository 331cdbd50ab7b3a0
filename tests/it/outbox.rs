//! Lead processing (assignment, duplicate hints) and the outbox publisher,
//! delivering to a real receiver that checks our signatures independently.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use domain::auth::Role;
use domain::entities::{activity, lead, outbox_delivery, subscription};
use domain::lifecycle::lead_status::LeadStatus;
use leadpipe_tests::client::Api;
use leadpipe_tests::publishing::{self, publish_until};
use leadpipe_tests::receiver::Receiver;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

/// How long a test runs publisher passes for what it expects.
const DRAIN: Duration = Duration::from_secs(10);

struct Outbox {
    app: TestApp,
    admin: Api,
    intake: Api,
    receiver: Receiver,
}

impl Outbox {
    async fn new(backend: Backend) -> Self {
        let app = TestApp::spawn(backend).await;
        let admin = app.api_as(Role::Admin, None).await;
        let intake = app.api_as(Role::Intake, Some("webform")).await;
        let receiver = Receiver::start().await;
        Self {
            app,
            admin,
            intake,
            receiver,
        }
    }

    async fn lead(&self, source_ref: &str, name: &str) -> Value {
        let body = json!({"source": "webform", "source_ref": source_ref, "name": name});
        self.intake.create_lead(&body).await.json().await.unwrap()
    }

    async fn deliveries(&self, state: &str) -> u64 {
        outbox_delivery::Entity::find()
            .filter(outbox_delivery::Column::State.eq(state))
            .count(&self.app.db)
            .await
            .unwrap()
    }
}

on_both_backends!(
    every_change_arrives_signed_and_in_order,
    a_receiver_that_was_down_gets_everything_with_stable_ids,
    gone_disables_the_subscription,
    dead_deliveries_are_retried_by_ops_after_recovery,
    deliveries_page_like_every_other_list,
    internal_addresses_are_refused,
    redirects_are_failures_not_followed,
    subscriptions_show_their_secret_once_and_need_admin,
    duplicate_hints_link_leads_across_sources,
    process_lead_twice_changes_nothing_and_never_reassigns,
);

async fn every_change_arrives_signed_and_in_order(backend: Backend) {
    let t = Outbox::new(backend).await;
    t.admin.subscribe(&t.receiver, json!([])).await;
    let created = t.lead("o-1", "Ada").await;
    t.lead("o-1", "Ada Lovelace").await;
    t.lead("o-1", "Ada King").await;
    let id = created["id"].as_i64().unwrap();
    let sales = t.app.api_as(Role::Sales, None).await;
    let moved = sales.move_lead(id, LeadStatus::Contacted, None).await;
    assert_eq!(moved.status(), 200);

    let publisher = t.app.publisher(publishing::settings_with(8, "127.0.0.1"));
    publish_until(&publisher, "4 deliveries", DRAIN, async || {
        t.receiver.accepted().len() == 4
    })
    .await;
    let got = t.receiver.accepted();
    assert!(
        got.iter().all(|r| r.signature_ok),
        "every request carries a valid signature"
    );
    let types: Vec<&str> = got
        .iter()
        .map(|r| r.body["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "lead.created",
            "lead.updated",
            "lead.updated",
            "lead.status_changed"
        ]
    );
    assert_eq!(got[2].body["data"]["name"], "Ada King");
    assert!(got[0].body["timestamp"].is_string());
    let ids: Vec<&str> = got.iter().map(|r| r.webhook_id.as_str()).collect();
    assert!(ids.iter().all(|i| i.starts_with("evt_")));
    assert_eq!(t.deliveries("delivered").await, 4);

    // Nothing is sent twice.
    publisher.run_once().await.unwrap();
    assert_eq!(t.receiver.received().len(), 4);
}

async fn a_receiver_that_was_down_gets_everything_with_stable_ids(backend: Backend) {
    let t = Outbox::new(backend).await;
    t.admin
        .subscribe(&t.receiver, json!(["lead.created"]))
        .await;
    t.receiver.answer(503);
    for i in 0..3 {
        t.lead(&format!("down-{i}"), "x").await;
    }
    let publisher = t.app.publisher(publishing::settings_with(50, "127.0.0.1"));
    publish_until(&publisher, "failed attempts", DRAIN, async || {
        t.receiver.received().len() >= 6
    })
    .await;
    assert_eq!(t.deliveries("delivered").await, 0);
    t.receiver.answer(200);
    publish_until(&publisher, "recovery", DRAIN, async || {
        t.receiver.accepted().len() == 3
    })
    .await;

    let all = t.receiver.received();
    let accepted: Vec<String> = t
        .receiver
        .accepted()
        .into_iter()
        .map(|r| r.webhook_id)
        .collect();
    // Every failed attempt reused the id its success finally carried.
    for attempt in &all {
        assert!(
            accepted.contains(&attempt.webhook_id),
            "unknown id {}",
            attempt.webhook_id
        );
    }
    let deliveries = outbox_delivery::Entity::find()
        .all(&t.app.db)
        .await
        .unwrap();
    assert!(
        deliveries
            .iter()
            .all(|d| d.state == "delivered" && d.attempts >= 2)
    );
    assert!(
        deliveries
            .iter()
            .all(|d| d.last_status == Some(200) && d.last_error.is_none())
    );
}

async fn gone_disables_the_subscription(backend: Backend) {
    let t = Outbox::new(backend).await;
    let sub = t.admin.subscribe(&t.receiver, json!([])).await;
    t.receiver.answer(410);
    t.lead("g-1", "x").await;
    let publisher = t.app.publisher(publishing::settings_with(8, "127.0.0.1"));
    publish_until(&publisher, "the 410", DRAIN, async || {
        !t.receiver.received().is_empty()
    })
    .await;
    let row = subscription::Entity::find_by_id(sub["id"].as_i64().unwrap())
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.state, "disabled");
    assert_eq!(t.deliveries("dead").await, 1);

    // A disabled subscription gets nothing more.
    t.receiver.answer(200);
    t.lead("g-2", "x").await;
    for _ in 0..3 {
        publisher.run_once().await.unwrap();
    }
    assert_eq!(t.receiver.received().len(), 1);
}

async fn dead_deliveries_are_retried_by_ops_after_recovery(backend: Backend) {
    let t = Outbox::new(backend).await;
    t.admin.subscribe(&t.receiver, json!([])).await;
    t.receiver.answer(500);
    t.lead("d-1", "x").await;
    let publisher = t.app.publisher(publishing::settings_with(2, "127.0.0.1"));
    publish_until(&publisher, "a dead delivery", DRAIN, async || {
        t.deliveries("dead").await == 1
    })
    .await;
    assert_eq!(t.receiver.received().len(), 2);

    let ops = t.app.api_as(Role::Ops, None).await;
    let listed: Value = ops
        .get("/api/ops/deliveries?state=dead")
        .await
        .json()
        .await
        .unwrap();
    let dead = &listed["data"][0];
    assert_eq!(dead["attempts"], 2);
    assert_eq!(dead["last_status"], 500);
    assert!(dead["last_error"].as_str().unwrap().starts_with("HTTP 500"));

    let dry: Value = ops
        .retry_deliveries(&json!({"dry_run": true}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(dry, json!({"matched": 1, "retried": 0, "dry_run": true}));
    assert_eq!(t.deliveries("dead").await, 1);

    t.receiver.answer(200);
    let dead_id = dead["id"].as_i64().unwrap();
    let retried = ops.retry_delivery(dead_id).await;
    assert_eq!(retried.status(), 200);
    publish_until(&publisher, "the retried delivery", DRAIN, async || {
        t.receiver.accepted().len() == 1
    })
    .await;
    let ids: Vec<String> = t
        .receiver
        .received()
        .into_iter()
        .map(|r| r.webhook_id)
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] == w[1]),
        "the retry keeps the webhook-id: {ids:?}"
    );

    let again = ops.retry_delivery(dead_id).await;
    assert_problem(again, 409, "/problems/conflict").await;
    let sales = t.app.api_as(Role::Sales, None).await;
    assert_problem(
        sales.get("/api/ops/deliveries").await,
        403,
        "/problems/forbidden",
    )
    .await;
    assert_problem(
        ops.get("/api/ops/deliveries?state=lost").await,
        422,
        "/problems/validation",
    )
    .await;
}

async fn deliveries_page_like_every_other_list(backend: Backend) {
    let t = Outbox::new(backend).await;
    t.admin.subscribe(&t.receiver, json!([])).await;
    t.receiver.answer(200);
    for n in 0..3 {
        t.lead(&format!("p-{n}"), "x").await;
    }
    let publisher = t.app.publisher(publishing::settings_with(2, "127.0.0.1"));
    publish_until(&publisher, "three deliveries", DRAIN, async || {
        t.deliveries("delivered").await == 3
    })
    .await;
    let ops = t.app.api_as(Role::Ops, None).await;
    let page = async |query: &str| -> Value {
        let response = ops.get(&format!("/api/ops/deliveries{query}")).await;
        assert_eq!(response.status(), 200, "{query}");
        response.json().await.unwrap()
    };
    let ids = |page: &Value| -> Vec<i64> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_i64().unwrap())
            .collect()
    };

    let all = page("").await;
    let all_ids = ids(&all);
    assert_eq!(all_ids.len(), 3);
    assert!(all_ids.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert_eq!(all["next_cursor"], Value::Null, "one page, no cursor");
    assert!(all.get("next_before").is_none());

    let first = page("?limit=2").await;
    assert_eq!(ids(&first), all_ids[..2]);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = page(&format!("?limit=2&cursor={cursor}")).await;
    assert_eq!(ids(&second), all_ids[2..]);
    assert_eq!(second["next_cursor"], Value::Null);

    // The old `before` still continues the list, for one release.
    let old = page(&format!("?limit=2&before={}", all_ids[1])).await;
    assert_eq!(ids(&old), all_ids[2..]);

    assert_problem(
        ops.get("/api/ops/deliveries?cursor=nonsense").await,
        422,
        "/problems/validation",
    )
    .await;
}

async fn internal_addresses_are_refused(backend: Backend) {
    let t = Outbox::new(backend).await;
    for url in [
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest",
        "http://[::1]:9/x",
        "ftp://example.com/x",
    ] {
        let response = t.admin.create_subscription(&json!({"url": url})).await;
        let body = assert_problem(response, 422, "/problems/validation").await;
        assert_eq!(body["errors"][0]["field"], "url", "{url}");
    }
    // Allowed when subscribed, refused by a publisher whose policy forbids it.
    t.admin.subscribe(&t.receiver, json!([])).await;
    t.lead("i-1", "x").await;
    let strict = t.app.publisher(publishing::settings_with(8, ""));
    publish_until(&strict, "the refusal", DRAIN, async || {
        t.deliveries("dead").await == 1
    })
    .await;
    assert!(t.receiver.received().is_empty());
    let dead = outbox_delivery::Entity::find()
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap();
    assert!(dead.last_error.unwrap().starts_with("refused"));
}

async fn redirects_are_failures_not_followed(backend: Backend) {
    let t = Outbox::new(backend).await;
    t.admin.subscribe(&t.receiver, json!([])).await;
    t.receiver.answer(302);
    t.lead("r-1", "x").await;
    let publisher = t.app.publisher(publishing::settings_with(8, "127.0.0.1"));
    publish_until(&publisher, "a dead redirect", DRAIN, async || {
        t.deliveries("dead").await == 1
    })
    .await;
    // Permanent after a few attempts, and never delivered.
    assert_eq!(t.receiver.received().len(), 3);
    assert_eq!(t.deliveries("delivered").await, 0);
}

async fn subscriptions_show_their_secret_once_and_need_admin(backend: Backend) {
    let t = Outbox::new(backend).await;
    let created = t
        .admin
        .subscribe(&t.receiver, json!(["lead.created", "lead.assigned"]))
        .await;
    assert!(created["secret"].as_str().unwrap().starts_with("whsec_"));
    let ops = t.app.api_as(Role::Ops, None).await;
    let listed = ops.get("/api/subscriptions").await.text().await.unwrap();
    assert!(!listed.contains(created["secret"].as_str().unwrap()));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed["data"][0]["event_types"],
        json!(["lead.assigned", "lead.created"])
    );

    let bad = t
        .admin
        .create_subscription(&json!({"url": t.receiver.url, "event_types": ["lead.exploded"]}))
        .await;
    assert_problem(bad, 422, "/problems/validation").await;
    let by_ops = ops
        .create_subscription(&json!({"url": t.receiver.url}))
        .await;
    assert_problem(by_ops, 403, "/problems/forbidden").await;
    let sales = t.app.api_as(Role::Sales, None).await;
    assert_problem(
        sales.get("/api/subscriptions").await,
        403,
        "/problems/forbidden",
    )
    .await;

    let path = format!("/api/subscriptions/{}", created["id"]);
    let deleted = t.admin.delete(&path).await;
    assert_eq!(deleted.status(), 204);
    let again = t.admin.delete(&path).await;
    assert_problem(again, 404, "/problems/not-found").await;
    let listed: Value = ops.get("/api/subscriptions").await.json().await.unwrap();
    assert_eq!(listed["data"], json!([]));
}

async fn duplicate_hints_link_leads_across_sources(backend: Backend) {
    let t = Outbox::new(backend).await;
    let partner = t.app.api_as(Role::Intake, Some("partner")).await;
    let a: Value = t
        .intake
        .create_lead(&json!({"source": "webform", "source_ref": "a", "email": "Grace@Example.com"}))
        .await
        .json()
        .await
        .unwrap();
    let b: Value = partner
        .create_lead(
            &json!({"source": "partner", "source_ref": "b", "email": "grace@example.com "}),
        )
        .await
        .json()
        .await
        .unwrap();
    let c: Value = t
        .intake
        .create_lead(&json!({"source": "webform", "source_ref": "c", "email": "grace@example.com"}))
        .await
        .json()
        .await
        .unwrap();
    let d: Value = partner
        .create_lead(&json!({"source": "partner", "source_ref": "d", "phone": "+1 555 0100"}))
        .await
        .json()
        .await
        .unwrap();
    let e: Value = t
        .intake
        .create_lead(&json!({"source": "webform", "source_ref": "e", "phone": "+1-555-0100"}))
        .await
        .json()
        .await
        .unwrap();
    while workers::lead_processor::run_once(&t.app.db, 100)
        .await
        .unwrap()
        > 0
    {}

    let sales = t.app.api_as(Role::Sales, None).await;
    let show = async |id: &Value| sales.lead(id.as_i64().unwrap()).await;
    let b_view: Value = show(&b["id"]).await.json().await.unwrap();
    let mut b_dupes: Vec<i64> = b_view["possible_duplicates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["lead_id"].as_i64().unwrap())
        .collect();
    b_dupes.sort_unstable();
    assert_eq!(
        b_dupes,
        [a["id"].as_i64().unwrap(), c["id"].as_i64().unwrap()]
    );
    // Same source is not a duplicate hint: a and c are both webform.
    let a_view: Value = show(&a["id"]).await.json().await.unwrap();
    // Each hint offers the merge that folds it into the lead shown.
    assert_eq!(
        a_view["possible_duplicates"],
        json!([{"lead_id": b["id"], "reason": "email", "merge": {
            "method": "POST", "href": format!("/api/leads/{}/merge", a["id"]),
            "body": {"lead_ids": [b["id"]], "fields": {}}}}])
    );
    let e_view: Value = show(&e["id"]).await.json().await.unwrap();
    assert_eq!(
        e_view["possible_duplicates"],
        json!([{"lead_id": d["id"], "reason": "phone", "merge": {
            "method": "POST", "href": format!("/api/leads/{}/merge", e["id"]),
            "body": {"lead_ids": [d["id"]], "fields": {}}}}])
    );
    let hints = activity::Entity::find()
        .filter(activity::Column::Kind.eq("duplicate_hint"))
        .count(&t.app.db)
        .await
        .unwrap();
    assert_eq!(hints, 6);
    assert_eq!(t.app.count(lead::Entity).await, 5, "never merged");
}

async fn process_lead_twice_changes_nothing_and_never_reassigns(backend: Backend) {
    let t = Outbox::new(backend).await;
    let alice = t.app.token(Role::Sales, None).await;
    let alice_id = domain::auth::authenticate(&t.app.db, &alice)
        .await
        .unwrap()
        .unwrap()
        .id;
    let created = t.lead("p-1", "x").await;
    let id = created["id"].as_i64().unwrap();

    let first = domain::lead::processing::process_lead(&t.app.db, id, None)
        .await
        .unwrap();
    assert_eq!(first.assigned_to, Some(alice_id));
    let after_first = lead::Entity::find_by_id(id)
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap();
    let activities = t.app.count(activity::Entity).await;
    let second = domain::lead::processing::process_lead(&t.app.db, id, None)
        .await
        .unwrap();
    assert!(second.skipped);
    assert_eq!(
        lead::Entity::find_by_id(id)
            .one(&t.app.db)
            .await
            .unwrap()
            .unwrap(),
        after_first
    );
    assert_eq!(t.app.count(activity::Entity).await, activities);

    // A new version is processed again, but an owned lead keeps its owner.
    let bob = t.app.token(Role::Sales, None).await;
    drop(bob);
    t.lead("p-1", "changed").await;
    let third = domain::lead::processing::process_lead(&t.app.db, id, None)
        .await
        .unwrap();
    assert!(!third.skipped);
    assert_eq!(third.assigned_to, None);
    let owner = lead::Entity::find_by_id(id)
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap()
        .owner_id;
    assert_eq!(owner, Some(alice_id));
    let kinds: Vec<String> = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(id))
        .order_by_asc(activity::Column::Id)
        .all(&t.app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.kind)
        .collect();
    assert_eq!(kinds, ["ingest", "assigned", "ingest"]);
}

/// 100 leads, three sales staff of whom one is inactive, processed by four
/// concurrent workers: exactly 50 each to the two active ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn round_robin_is_fair_under_concurrency_on_postgres() {
    let t = Outbox::new(Backend::Postgres).await;
    let mut staff = Vec::new();
    for _ in 0..3 {
        let token = t.app.token(Role::Sales, None).await;
        staff.push(
            domain::auth::authenticate(&t.app.db, &token)
                .await
                .unwrap()
                .unwrap()
                .id,
        );
    }
    t.app
        .exec(&format!(
            "UPDATE principal SET active = false WHERE id = {}",
            staff[1]
        ))
        .await;
    for i in 0..100 {
        t.lead(&format!("rr-{i}"), "x").await;
    }
    let ids = domain::lead::processing::backlog(&t.app.db, 1_000)
        .await
        .unwrap();
    assert_eq!(ids.len(), 100);
    let chunks: Vec<Vec<i64>> = ids.chunks(25).map(<[i64]>::to_vec).collect();
    let workers = chunks.into_iter().map(|chunk| {
        let db = t.app.db.clone();
        tokio::spawn(async move {
            for id in chunk {
                domain::lead::processing::process_lead(&db, id, None)
                    .await
                    .unwrap();
            }
        })
    });
    for worker in futures::future::join_all(workers).await {
        worker.unwrap();
    }
    let leads = lead::Entity::find().all(&t.app.db).await.unwrap();
    let count = |owner: i64| leads.iter().filter(|l| l.owner_id == Some(owner)).count();
    assert_eq!(
        (count(staff[0]), count(staff[1]), count(staff[2])),
        (50, 0, 50)
    );
    assert!(
        domain::lead::processing::backlog(&t.app.db, 10)
            .await
            .unwrap()
            .is_empty()
    );
}
