//! Per-lead delivery order with several publishers: a receiver sees each
//! lead's events in outbox order, even when publishers fan events out under
//! `SKIP LOCKED` and their fan-outs commit out of order, and with many
//! requests in flight under a per-subscription limit.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Duration;

use domain::auth::Role;
use domain::entities::{outbox_delivery, outbox_event};
use domain::outbound::delivery;
use domain::retry::RetryPolicy;
use leadpipe_tests::publishing::{self, publish_until};
use leadpipe_tests::receiver::Receiver;
use leadpipe_tests::{Backend, TestApp, eventually, on_both_backends};
use sea_orm::{EntityTrait, QueryOrder};
use serde_json::json;
use workers::publisher::PublisherSettings;

on_both_backends!(
    a_later_event_waits_while_an_earlier_one_is_held_by_another_publisher,
    concurrent_publishers_deliver_each_lead_in_outbox_order,
    parallel_delivery_keeps_each_leads_order,
    the_per_subscription_limit_holds,
    a_claim_queued_past_its_lease_is_not_sent,
    stopping_hands_back_what_was_claimed_but_not_sent,
);

/// Publisher A has claimed a lead's `lead.created` for fan-out (its row is
/// locked, still `pending` to everyone else) when publisher B fans out the
/// same lead's `lead.updated` and commits first. B's delivery must wait; and
/// once A's fan-out lands, the created event goes first although its
/// delivery row is the younger one.
async fn a_later_event_waits_while_an_earlier_one_is_held_by_another_publisher(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let receiver = Receiver::start().await;
    app.api(&admin).subscribe(&receiver, json!([])).await;
    app.api(&intake).webform_lead("held-1", "Old").await;
    app.api(&intake).webform_lead("held-1", "New").await;
    let events = outbox_event::Entity::find()
        .order_by_asc(outbox_event::Column::Id)
        .all(&app.db)
        .await
        .unwrap();
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(types, ["lead.created", "lead.updated"]);
    let created = events[0].id;

    // B's fan-out skips the row A holds, and commits.
    app.exec(&format!(
        "UPDATE outbox_event SET state = 'held' WHERE id = {created}"
    ))
    .await;
    assert_eq!(delivery::fan_out(&app.db, 500).await.unwrap(), 1);
    app.exec(&format!(
        "UPDATE outbox_event SET state = 'pending' WHERE id = {created}"
    ))
    .await;

    // The update's delivery exists, but its lead has an earlier event not
    // yet fanned out: nothing is due.
    let claimed = delivery::claim_due(&app.db, 10, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        claimed.is_empty(),
        "claimed {:?} ahead of lead.created",
        claimed
            .iter()
            .map(|c| c.event.event_type.as_str())
            .collect::<Vec<_>>()
    );

    // A's fan-out lands (its delivery row has the higher id); the receiver
    // still gets created, then updated.
    let publisher = app.publisher(settings());
    publish_until(
        &publisher,
        "both events accepted",
        Duration::from_secs(10),
        async || receiver.accepted().len() >= 2,
    )
    .await;
    let got: Vec<String> = receiver
        .accepted()
        .iter()
        .map(|r| r.body["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(got, ["lead.created", "lead.updated"]);
}

/// Two publishers run flat out while leads are created and updated from
/// several clients at once; per lead, the receiver sees events in outbox
/// order and each exactly once.
async fn concurrent_publishers_deliver_each_lead_in_outbox_order(backend: Backend) {
    const LEADS: usize = 24;
    const VERSIONS: usize = 4;
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let receiver = Receiver::start().await;
    app.api(&admin).subscribe(&receiver, json!([])).await;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let publishers: Vec<_> = (0..2)
        .map(|_| {
            let publisher = app.publisher(settings());
            let stop = stop_rx.clone();
            tokio::spawn(publisher.run(Duration::from_millis(5), stop))
        })
        .collect();
    write_versions(&app, &intake, LEADS, VERSIONS).await;
    let events = outbox_event::Entity::find().all(&app.db).await.unwrap();
    assert_eq!(events.len(), LEADS * VERSIONS);
    wait_accepted(&receiver, events.len()).await;
    stop_tx.send(true).unwrap();
    for publisher in publishers {
        publisher.await.unwrap();
    }
    assert_each_lead_in_outbox_order(&events, &receiver, LEADS);
}

/// One publisher with many requests in flight, to a receiver slow enough
/// that they overlap: different leads go in parallel, yet each lead's events
/// arrive one after another in outbox order, each exactly once.
async fn parallel_delivery_keeps_each_leads_order(backend: Backend) {
    const LEADS: usize = 12;
    const VERSIONS: usize = 5;
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let receiver = Receiver::start().await;
    receiver.delay(Duration::from_millis(20));
    app.api(&admin).subscribe(&receiver, json!([])).await;
    write_versions(&app, &intake, LEADS, VERSIONS).await;
    let events = outbox_event::Entity::find().all(&app.db).await.unwrap();
    assert_eq!(events.len(), LEADS * VERSIONS);

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(
        app.publisher(limited(32, 8))
            .run(Duration::from_millis(5), stop_rx),
    );
    wait_accepted(&receiver, events.len()).await;
    stop_tx.send(true).unwrap();
    running.await.unwrap();

    assert_each_lead_in_outbox_order(&events, &receiver, LEADS);
    let most = receiver.max_in_flight();
    assert!(most > 1, "requests went one at a time ({most} at most)");
    assert!(most <= 8, "{most} requests in flight, limit 8");
}

/// A publisher allowed 32 requests in flight but 3 per subscription never
/// has more than 3 at one receiver, however much is due; a second
/// subscription gets its own 3 alongside.
async fn the_per_subscription_limit_holds(backend: Backend) {
    const LEADS: usize = 30;
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let first = Receiver::start().await;
    let second = Receiver::start().await;
    for receiver in [&first, &second] {
        receiver.delay(Duration::from_millis(30));
        app.api(&admin).subscribe(receiver, json!([])).await;
    }
    write_versions(&app, &intake, LEADS, 1).await;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(
        app.publisher(limited(32, 3))
            .run(Duration::from_millis(5), stop_rx),
    );
    wait_accepted(&first, LEADS).await;
    wait_accepted(&second, LEADS).await;
    stop_tx.send(true).unwrap();
    running.await.unwrap();
    for receiver in [&first, &second] {
        assert_eq!(
            receiver.max_in_flight(),
            3,
            "the limit is reached, never passed"
        );
        assert_eq!(receiver.received().len(), LEADS, "nothing is sent twice");
    }
}

/// A publisher claims ahead of its requests. With one request at a time to
/// a slow receiver, claims wait in its queue past their lease (7 s here);
/// such a claim is not sent, because once its lease lapsed it is claimed
/// again and sent under the new lease: each event still arrives exactly
/// once, in order, one at a time.
async fn a_claim_queued_past_its_lease_is_not_sent(backend: Backend) {
    const LEADS: usize = 24;
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let receiver = Receiver::start().await;
    receiver.delay(Duration::from_millis(400));
    app.api(&admin).subscribe(&receiver, json!([])).await;
    write_versions(&app, &intake, LEADS, 1).await;
    let events = outbox_event::Entity::find().all(&app.db).await.unwrap();

    let mut settings = limited(1, 1);
    settings.request_timeout = Duration::from_secs(1);
    let publisher = app.publisher(settings);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(publisher.run(Duration::from_millis(5), stop_rx));
    wait_accepted(&receiver, LEADS).await;
    stop_tx.send(true).unwrap();
    running.await.unwrap();

    assert_each_lead_in_outbox_order(&events, &receiver, LEADS);
    assert_eq!(receiver.max_in_flight(), 1);
}

/// Stopped while most of what it claimed is still queued, a publisher
/// sends none of it and hands it back: the rows are pending again (not
/// held under a lease nobody will use), and the next publisher delivers
/// them at once, well before that lease would have run out.
async fn stopping_hands_back_what_was_claimed_but_not_sent(backend: Backend) {
    const LEADS: usize = 10;
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let receiver = Receiver::start().await;
    receiver.delay(Duration::from_millis(300));
    app.api(&admin).subscribe(&receiver, json!([])).await;
    write_versions(&app, &intake, LEADS, 1).await;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(
        app.publisher(limited(1, 1))
            .run(Duration::from_millis(5), stop_rx),
    );
    eventually("something sent", Duration::from_secs(10), async || {
        !receiver.received().is_empty()
    })
    .await;
    stop_tx.send(true).unwrap();
    running.await.unwrap();

    let sent = receiver.received().len();
    assert!(sent < LEADS, "all {sent} were sent before the stop");
    let rows = outbox_delivery::Entity::find().all(&app.db).await.unwrap();
    assert_eq!(rows.len(), LEADS);
    let delivered = rows
        .iter()
        .filter(|r| r.state == delivery::DELIVERED)
        .count();
    assert_eq!(delivered, sent, "what was sent is settled");
    for row in rows.iter().filter(|r| r.state != delivery::DELIVERED) {
        assert_eq!(row.state, delivery::PENDING, "delivery {}", row.id);
        assert_eq!(row.locked_until, None, "delivery {}", row.id);
        assert_eq!(row.attempts, 0, "delivery {}", row.id);
    }

    // Lease here: 5 s × 2 + 5 s. The rest goes out well before that.
    receiver.delay(Duration::ZERO);
    // Well within the lease: handed-back deliveries do not wait for it.
    let next = app.publisher(settings());
    publish_until(
        &next,
        "the handed-back deliveries",
        Duration::from_secs(5),
        async || receiver.accepted().len() >= LEADS,
    )
    .await;
    assert_eq!(receiver.received().len(), LEADS, "nothing is sent twice");
}

/// The tests' publisher with the default retry policy.
fn settings() -> PublisherSettings {
    PublisherSettings {
        retry: RetryPolicy::default().into(),
        ..publishing::settings()
    }
}

/// `settings()` with at most `concurrency` requests in flight, and
/// `per_subscription` of them to one subscription.
fn limited(concurrency: usize, per_subscription: usize) -> PublisherSettings {
    PublisherSettings {
        concurrency,
        per_subscription,
        ..settings()
    }
}

/// `versions` events for each of `leads` leads (one create, then updates),
/// written from four clients at once.
async fn write_versions(app: &TestApp, intake: &str, leads: usize, versions: usize) {
    let writers = (0..4).map(|w| {
        let intake = app.api(intake);
        tokio::spawn(async move {
            for version in 0..versions {
                for lead in (w..leads).step_by(4) {
                    intake
                        .webform_lead(&format!("conc-{lead}"), &format!("v{version}"))
                        .await;
                }
            }
        })
    });
    for writer in futures::future::join_all(writers).await {
        writer.unwrap();
    }
}

async fn wait_accepted(receiver: &Receiver, count: usize) {
    eventually(
        &format!("{count} deliveries accepted"),
        Duration::from_secs(30),
        async || receiver.accepted().len() >= count,
    )
    .await;
}

/// Every event arrived once, and each lead's in outbox order.
fn assert_each_lead_in_outbox_order(
    events: &[outbox_event::Model],
    receiver: &Receiver,
    leads: usize,
) {
    let by_event_id: HashMap<&str, (i64, Option<i64>)> = events
        .iter()
        .map(|e| (e.event_id.as_str(), (e.id, e.lead_id)))
        .collect();
    let mut seen: HashMap<i64, Vec<i64>> = HashMap::new();
    let received = receiver.received();
    assert_eq!(received.len(), events.len(), "nothing is sent twice");
    for r in &received {
        let (id, lead) = by_event_id[r.webhook_id.as_str()];
        seen.entry(lead.unwrap()).or_default().push(id);
    }
    assert_eq!(seen.len(), leads);
    for (lead, ids) in seen {
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(ids, sorted, "lead {lead} delivered out of outbox order");
    }
}
