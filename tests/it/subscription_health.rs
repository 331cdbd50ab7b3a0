//! A subscription whose receiver keeps failing: disabled after
//! `LEADPIPE_SUBSCRIPTION_DISABLE_AFTER` without a success, announced to the
//! subscriptions that ask for operational events, its deliveries held until
//! it is enabled; and what failed sent again from a moment (`recover`).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use domain::auth::Role;
use domain::entities::{outbox_delivery, subscription};
use leadpipe_tests::cli::output_text;
use leadpipe_tests::client::{Answer, Api};
use leadpipe_tests::publishing::{self, publish_until};
use leadpipe_tests::receiver::Receiver;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};

const DRAIN: Duration = Duration::from_secs(10);

on_both_backends!(
    a_subscription_failing_for_days_is_disabled_announced_held_and_enabled_again,
    recover_sends_again_what_failed_since_a_moment,
    one_subscription_reads_with_its_health_and_needs_ops,
    a_rate_limit_holds_across_publishers_for_its_subscription_only,
);

struct Desk {
    app: TestApp,
    admin: Api,
    intake: Api,
}

impl Desk {
    async fn new(backend: Backend) -> Self {
        let app = TestApp::spawn(backend).await;
        let admin = app.api_as(Role::Admin, None).await;
        let intake = app.api_as(Role::Intake, Some("webform")).await;
        Self { app, admin, intake }
    }

    async fn lead(&self, source_ref: &str, name: &str) {
        let body = json!({"source": "webform", "source_ref": source_ref, "name": name});
        let status = self.intake.create_lead(&body).await.status();
        assert!(status.is_success(), "{status}");
    }

    async fn subscription(&self, id: i64) -> subscription::Model {
        subscription::Entity::find_by_id(id)
            .one(&self.app.db)
            .await
            .unwrap()
            .unwrap()
    }

    async fn deliveries(&self, subscription_id: i64, state: &str) -> u64 {
        outbox_delivery::Entity::find()
            .filter(outbox_delivery::Column::SubscriptionId.eq(subscription_id))
            .filter(outbox_delivery::Column::State.eq(state))
            .count(&self.app.db)
            .await
            .unwrap()
    }
}

fn id_of(subscription: &Value) -> i64 {
    subscription["id"].as_i64().unwrap()
}

async fn a_subscription_failing_for_days_is_disabled_announced_held_and_enabled_again(
    backend: Backend,
) {
    let t = Desk::new(backend).await;
    let failing = Receiver::start().await;
    let watcher = Receiver::start().await;
    let everything = Receiver::start().await;
    let sub = id_of(&t.admin.subscribe(&failing, json!([])).await);
    let watch = id_of(
        &t.admin
            .subscribe(&watcher, json!(["subscription.disabled"]))
            .await,
    );
    t.admin.subscribe(&everything, json!([])).await;
    failing.answer(500);
    let publisher = t.app.publisher(publishing::settings_with(8, "127.0.0.1"));

    // The first failure starts the streak; the subscription stays active.
    t.lead("h-1", "Ada").await;
    publish_until(&publisher, "a failed attempt", DRAIN, async || {
        !failing.received().is_empty()
    })
    .await;
    let read: Value = t
        .admin
        .get(&format!("/api/subscriptions/{sub}"))
        .await
        .expect_json(200)
        .await;
    assert_eq!(read["state"], "active");
    assert!(read["failing_since"].is_string(), "{read}");

    // Failing for six days with no success: the next failure disables it.
    let six_days_ago = chrono::Utc::now() - chrono::Duration::days(6);
    subscription::Entity::update_many()
        .col_expr(
            subscription::Column::FailingSince,
            Expr::value(six_days_ago),
        )
        .filter(subscription::Column::Id.eq(sub))
        .exec(&t.app.db)
        .await
        .unwrap();
    publish_until(&publisher, "the subscription disabled", DRAIN, async || {
        t.subscription(sub).await.state == "disabled"
    })
    .await;
    let disabled = t.subscription(sub).await;
    let reason = disabled.disabled_reason.unwrap();
    assert!(
        reason.contains("no delivery succeeded since")
            && reason.contains("LEADPIPE_SUBSCRIPTION_DISABLE_AFTER"),
        "{reason}"
    );

    // Announced to the subscription that asked, not to one that takes
    // every CRM event.
    publish_until(&publisher, "the operational event", DRAIN, async || {
        !watcher.accepted().is_empty()
    })
    .await;
    let announced = watcher.accepted();
    assert_eq!(announced.len(), 1);
    assert_eq!(announced[0].body["type"], "subscription.disabled");
    assert_eq!(announced[0].body["data"]["subscription_id"], sub);
    assert!(
        announced[0].body["data"].get("url").is_none(),
        "another receiver's URL may hold its secret"
    );
    assert!(announced[0].signature_ok);
    assert!(
        everything
            .accepted()
            .iter()
            .all(|r| r.body["type"] != "subscription.disabled")
    );
    let scrape = t.app.metrics().await;
    assert!(
        scrape.contains("leadpipe_subscriptions_disabled_total{reason=\"failing\"}"),
        "the disabling is counted"
    );

    // While disabled: the lead's next event is held, not sent, not lost;
    // stats count it apart from what is behind.
    let tried = failing.received().len();
    t.lead("h-1", "Ada Lovelace").await;
    publish_until(&publisher, "the held delivery", DRAIN, async || {
        t.deliveries(sub, "pending").await + t.deliveries(sub, "failed").await >= 2
    })
    .await;
    for _ in 0..3 {
        publisher.run_once().await.unwrap();
    }
    assert_eq!(
        failing.received().len(),
        tried,
        "nothing sent while disabled"
    );
    let ops = t.app.api_as(Role::Ops, None).await;
    let stats: Value = ops.get("/api/ops/stats").await.expect_json(200).await;
    assert_eq!(stats["outbox"]["deliveries"]["held"], 2, "{stats}");

    // Enabled again (the receiver is back): the held deliveries go out, in
    // order, and the streak starts afresh.
    failing.answer(200);
    let enabled: Value = t
        .admin
        .post(&format!("/api/subscriptions/{sub}/enable"), &json!({}))
        .await
        .expect_json(200)
        .await;
    assert_eq!(enabled["state"], "active");
    assert_eq!(enabled["disabled_reason"], Value::Null);
    assert_eq!(enabled["failing_since"], Value::Null);
    publish_until(&publisher, "the held deliveries", DRAIN, async || {
        t.deliveries(sub, "delivered").await == 2
    })
    .await;
    let events: Vec<(Value, Value)> = failing
        .accepted()
        .iter()
        .map(|r| (r.body["type"].clone(), r.body["data"]["name"].clone()))
        .collect();
    assert_eq!(
        events,
        [
            (json!("lead.created"), json!("Ada")),
            (json!("lead.updated"), json!("Ada Lovelace"))
        ],
        "the lead's events in order"
    );
    assert_eq!(t.subscription(watch).await.state, "active");

    let missing = t
        .admin
        .post("/api/subscriptions/999999/enable", &json!({}))
        .await;
    assert_problem(missing, 404, "/problems/not-found").await;
}

async fn recover_sends_again_what_failed_since_a_moment(backend: Backend) {
    let t = Desk::new(backend).await;
    let receiver = Receiver::start().await;
    let sub = id_of(&t.admin.subscribe(&receiver, json!(["lead.created"])).await);
    receiver.answer(500);
    let before = chrono::Utc::now() - chrono::Duration::seconds(5);
    t.lead("r-1", "Ada").await;
    t.lead("r-2", "Grace").await;
    let publisher = t.app.publisher(publishing::settings_with(1, "127.0.0.1"));
    publish_until(&publisher, "two dead deliveries", DRAIN, async || {
        t.deliveries(sub, "dead").await == 2
    })
    .await;

    // Since a moment after them: nothing to send.
    let later = (chrono::Utc::now() + chrono::Duration::seconds(5)).to_rfc3339();
    let none: Value = t
        .admin
        .post(
            &format!("/api/subscriptions/{sub}/recover"),
            &json!({"since": later}),
        )
        .await
        .expect_json(200)
        .await;
    assert_eq!(none, json!({"dead": 0, "failed": 0}));

    receiver.answer(200);
    let recovered: Value = t
        .admin
        .post(
            &format!("/api/subscriptions/{sub}/recover"),
            &json!({"since": before.to_rfc3339()}),
        )
        .await
        .expect_json(200)
        .await;
    assert_eq!(recovered, json!({"dead": 2, "failed": 0}));
    publish_until(&publisher, "the recovered deliveries", DRAIN, async || {
        t.deliveries(sub, "delivered").await == 2
    })
    .await;
    let accepted = receiver.accepted();
    let mut refs: Vec<&str> = accepted
        .iter()
        .map(|r| r.body["data"]["source_ref"].as_str().unwrap())
        .collect();
    refs.sort_unstable();
    assert_eq!(refs, ["r-1", "r-2"]);
    // The same deliveries: their ids are the ones first tried.
    let ids = |status: u16| {
        let mut ids: Vec<String> = receiver
            .received()
            .iter()
            .filter(|r| r.status == status)
            .map(|r| r.webhook_id.clone())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(500), ids(200));

    let bad = t
        .admin
        .post(
            &format!("/api/subscriptions/{sub}/recover"),
            &json!({"since": "yesterday"}),
        )
        .await;
    assert_problem(bad, 422, "/problems/validation").await;
    let missing = t
        .admin
        .post(
            "/api/subscriptions/999999/recover",
            &json!({"since": before.to_rfc3339()}),
        )
        .await;
    assert_problem(missing, 404, "/problems/not-found").await;

    // The same from the command line.
    receiver.answer(500);
    t.lead("r-3", "Edsger").await;
    publish_until(&publisher, "a third dead delivery", DRAIN, async || {
        t.deliveries(sub, "dead").await == 1
    })
    .await;
    let since = before.to_rfc3339();
    let cli = t.app.run_cli(
        &[
            "subscription",
            "recover",
            &sub.to_string(),
            "--since",
            &since,
        ],
        &[],
    );
    assert!(cli.status.success(), "{}", output_text(&cli));
    assert!(
        output_text(&cli).contains("1 dead and 0 failed deliveries sent again"),
        "{}",
        output_text(&cli)
    );
    assert_eq!(t.deliveries(sub, "pending").await, 1);
}

async fn one_subscription_reads_with_its_health_and_needs_ops(backend: Backend) {
    let t = Desk::new(backend).await;
    let created = t
        .admin
        .new_subscription("https://crm.example.com/hooks", json!(["lead.created"]))
        .await;
    let sub = id_of(&created);
    let response = t.admin.get(&format!("/api/subscriptions/{sub}")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["etag"], "\"1\"");
    let read: Value = response.json().await.unwrap();
    assert_eq!(read["url"], "https://crm.example.com/hooks");
    assert_eq!(read["state"], "active");
    assert_eq!(read["failing_since"], Value::Null);
    assert!(read.get("secret").is_none(), "never the secret");

    // Enabling one that is on changes nothing, not even its version.
    let again: Value = t
        .admin
        .post(&format!("/api/subscriptions/{sub}/enable"), &json!({}))
        .await
        .expect_json(200)
        .await;
    assert_eq!(
        (again["state"].clone(), again["version"].clone()),
        (json!("active"), json!(1))
    );

    let ops = t.app.api_as(Role::Ops, None).await;
    ops.get(&format!("/api/subscriptions/{sub}"))
        .await
        .expect(200)
        .await;
    let sales = t.app.api_as(Role::Sales, None).await;
    let refused = sales.get(&format!("/api/subscriptions/{sub}")).await;
    assert_problem(refused, 403, "/problems/forbidden").await;
    let missing = t.admin.get("/api/subscriptions/999999").await;
    assert_problem(missing, 404, "/problems/not-found").await;

    // The command line shows the same, and enables as the API does.
    let shown = t.app.run_cli(
        &["subscription", "show", &sub.to_string(), "-o", "json"],
        &[],
    );
    assert!(shown.status.success(), "{}", output_text(&shown));
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["url"], "https://crm.example.com/hooks");
    assert_eq!(shown["failing_since"], Value::Null);
    t.admin
        .patch_subscription(sub, &json!({"enabled": false}))
        .await
        .expect(200)
        .await;
    let enabled = t
        .app
        .run_cli(&["subscription", "enable", &sub.to_string()], &[]);
    assert!(enabled.status.success(), "{}", output_text(&enabled));
    assert_eq!(t.subscription(sub).await.state, "active");
    let missing = t.app.run_cli(&["subscription", "show", "999999"], &[]);
    assert_eq!(missing.status.code(), Some(3), "{}", output_text(&missing));
}

async fn a_rate_limit_holds_across_publishers_for_its_subscription_only(backend: Backend) {
    let t = Desk::new(backend).await;
    let slow = Receiver::start().await;
    let fast = Receiver::start().await;
    let refused = t
        .admin
        .create_subscription(&json!({"url": slow.url, "rate_limit": 0}))
        .await;
    assert_problem(refused, 422, "/problems/validation").await;
    let capped = t
        .admin
        .create_subscription(
            &json!({"url": slow.url, "event_types": ["lead.created"], "rate_limit": 2}),
        )
        .await
        .expect(201)
        .await;
    assert_eq!(capped["rate_limit"], 2);
    slow.set_secret(capped["secret"].as_str().unwrap());
    let capped = id_of(&capped);
    let free = id_of(&t.admin.subscribe(&fast, json!(["lead.created"])).await);
    for n in 0..6 {
        t.lead(&format!("q-{n}"), "Ada").await;
    }

    // Two publishers, as two worker processes would run them.
    let started = chrono::Utc::now();
    let one = t.app.publisher(publishing::settings_with(8, "127.0.0.1"));
    let two = t.app.publisher(publishing::settings_with(8, "127.0.0.1"));
    let all_delivered = async || {
        t.deliveries(capped, "delivered").await == 6 && t.deliveries(free, "delivered").await == 6
    };
    tokio::join!(
        publish_until(&one, "every delivery (one)", DRAIN, all_delivered),
        publish_until(&two, "every delivery (two)", DRAIN, all_delivered),
    );
    assert_eq!(fast.accepted().len(), 6);
    assert_eq!(slow.accepted().len(), 6);

    // At most two a second to the capped subscription, in turns: three
    // turns of two moved its turn pointer on by three seconds from before
    // the first, and its deliveries arrived over two turns at least (the
    // others went as fast as they came).
    let next = t.subscription(capped).await.rate_next_at.unwrap();
    assert!(
        next - started >= chrono::Duration::milliseconds(2_900),
        "three turns of a second: {next} after {started}"
    );
    let arrived: Vec<std::time::Instant> = slow.accepted().iter().map(|r| r.at).collect();
    let (first, last) = (arrived.iter().min().unwrap(), arrived.iter().max().unwrap());
    assert!(
        *last - *first >= Duration::from_millis(1_500),
        "six deliveries at two a second arrived within {:?}",
        *last - *first
    );

    // Lifted: `null` clears the cap.
    let lifted: Value = t
        .admin
        .patch_subscription(capped, &json!({"rate_limit": null}))
        .await
        .expect_json(200)
        .await;
    assert_eq!(lifted["rate_limit"], Value::Null);
}
