//! Group commit: batched upserts give every record the outcome it would have
//! had alone, in arrival order, with the same activity and outbox rows.

#![allow(clippy::unwrap_used)]

use domain::actor::Actor;
use std::collections::HashMap;

use domain::auth::Role;
use domain::entities::{activity, lead, outbox_event};
use domain::erasure::{EraseRequest, erase};
use domain::lead::ingest::{IngestItem, Origin, Outcome, ingest_counted_in, ingest_many_in};
use domain::lead::record::LeadRecord;
use domain::outbound::events::LeadSnapshot;
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, TransactionTrait};
use serde_json::{Value, json};

fn item(source_ref: &str, name: &str, updated_at: &str) -> IngestItem {
    let record = LeadRecord {
        source: "webform".into(),
        source_ref: Some(source_ref.into()),
        name: Some(name.into()),
        source_updated_at: Some(updated_at.parse().unwrap()),
        ..Default::default()
    };
    IngestItem {
        new: record.normalise().unwrap(),
        origin: Origin::Reconcile,
        ctx: Actor {
            correlation_id: Some("batch-1".into()),
            principal_id: None,
        },
    }
}

on_both_backends!(
    a_batch_resolves_repeated_keys_in_arrival_order,
    concurrent_intake_through_group_commit_matches_one_by_one,
    every_record_of_a_batch_gets_its_own_payload_back,
    an_ingest_event_carries_the_snapshot_of_the_lead_it_wrote,
    a_counted_batch_writes_what_a_whole_batch_writes
);

async fn a_batch_resolves_repeated_keys_in_arrival_order(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let items = [
        item("a", "First", "2026-11-01T10:00:00Z"),
        item("a", "Second", "2026-11-01T11:00:00Z"),
        item("b", "Bee", "2026-11-01T10:00:00Z"),
        item("a", "Older", "2026-11-01T09:00:00Z"),
        item("b", "Bee", "2026-11-01T10:00:00Z"),
    ];
    let txn = app.db.begin().await.unwrap();
    let results = ingest_many_in(&txn, app.db.hasher(), &items).await.unwrap();
    txn.commit().await.unwrap();

    let outcomes: Vec<Outcome> = results.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Created,
            Outcome::Updated,
            Outcome::Created,
            Outcome::Stale,
            Outcome::Unchanged
        ]
    );
    assert_eq!(results[1].lead.as_ref().unwrap().version, 2);
    assert_eq!(
        results[3].lead.as_ref().unwrap().name.as_deref(),
        Some("Second")
    );

    let leads = lead::Entity::find()
        .order_by_asc(lead::Column::Id)
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(leads.len(), 2);
    assert_eq!(leads[0].name.as_deref(), Some("Second"));
    let activities = activity::Entity::find()
        .order_by_asc(activity::Column::Id)
        .all(&app.db)
        .await
        .unwrap();
    // Each lead's timeline in the order its records came (rows of different
    // leads in one batch may interleave otherwise: on PostgreSQL the upsert
    // writes its own rows' entries).
    let timeline = |lead_id: i64| -> Vec<&str> {
        activities
            .iter()
            .filter(|a| a.lead_id == lead_id)
            .map(|a| a.outcome.as_deref().unwrap())
            .collect()
    };
    assert_eq!(timeline(leads[0].id), ["created", "updated", "stale"]);
    assert_eq!(timeline(leads[1].id), ["created", "unchanged"]);
    assert_eq!(activities.len(), 5);
    assert!(
        activities
            .iter()
            .all(|a| a.correlation_id.as_deref() == Some("batch-1")
                && a.origin.as_deref() == Some("reconcile"))
    );
    let events = outbox_event::Entity::find()
        .order_by_asc(outbox_event::Column::Id)
        .all(&app.db)
        .await
        .unwrap();
    let events_of = |lead_id: i64| -> Vec<&str> {
        events
            .iter()
            .filter(|e| e.lead_id == Some(lead_id))
            .map(|e| e.event_type.as_str())
            .collect()
    };
    assert_eq!(events_of(leads[0].id), ["lead.created", "lead.updated"]);
    assert_eq!(events_of(leads[1].id), ["lead.created"]);
    assert_eq!(events.len(), 3);
}

/// 50 keys, each posted four times (two identical pairs of two versions) at
/// once: with group commit on and off the table ends the same, and every
/// answer is consistent with its key's history.
async fn concurrent_intake_through_group_commit_matches_one_by_one(backend: Backend) {
    let mut end_states = Vec::new();
    for group_commit in [true, false] {
        let mut http = api::config::HttpSettings::for_tests();
        http.group_commit = group_commit;
        let app = TestApp::spawn_with(backend, http).await;
        let token = app.token(Role::Intake, Some("webform")).await;
        let bodies: Vec<Value> = (0..50)
            .flat_map(|k| {
                let v1 = json!({"source": "webform", "source_ref": format!("k{k}"), "name": "v1", "source_updated_at": "2026-11-01T10:00:00Z"});
                let v2 = json!({"source": "webform", "source_ref": format!("k{k}"), "name": "v2", "source_updated_at": "2026-11-01T11:00:00Z"});
                [v1.clone(), v2.clone(), v1, v2]
            })
            .collect();
        let responses =
            futures::future::join_all(bodies.iter().map(|b| app.api(&token).create_lead(b))).await;
        let mut per_key: HashMap<String, Vec<String>> = HashMap::new();
        for response in responses {
            assert!(
                response.status().is_success(),
                "status {}",
                response.status()
            );
            let body: Value = response.json().await.unwrap();
            per_key
                .entry(body["source_ref"].as_str().unwrap().to_owned())
                .or_default()
                .push(body["outcome"].as_str().unwrap().to_owned());
        }
        for (key, outcomes) in &per_key {
            assert_eq!(
                outcomes.iter().filter(|o| *o == "created").count(),
                1,
                "{key}: {outcomes:?}"
            );
        }
        let leads = lead::Entity::find()
            .order_by_asc(lead::Column::SourceRef)
            .all(&app.db)
            .await
            .unwrap();
        assert_eq!(leads.len(), 50);
        assert!(
            leads.iter().all(|l| l.name.as_deref() == Some("v2")),
            "the newest version wins whatever the order"
        );
        let writes: usize = per_key
            .values()
            .flatten()
            .filter(|o| *o == "created" || *o == "updated")
            .count();
        assert_eq!(app.count(outbox_event::Entity).await as usize, writes);
        assert_eq!(app.count(activity::Entity).await, 200);
        let versions: i64 = leads.iter().map(|l| l.version).sum();
        assert_eq!(
            versions as usize, writes,
            "every write bumped exactly one version"
        );
        end_states.push(
            leads
                .into_iter()
                .map(|l| (l.source_ref, l.name))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(end_states[0], end_states[1]);
}

/// The upsert does not return payloads (the written row's is the record's):
/// each record of a batch, in either wave, must still get back its own, in
/// its answer, its stored row and its outbox event.
async fn every_record_of_a_batch_gets_its_own_payload_back(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let with_payload = |source_ref: &str, payload: Value| {
        let mut item = item(source_ref, "Same Name", "2026-11-01T10:00:00Z");
        item.new.payload = payload;
        item
    };
    let items: Vec<IngestItem> = (0..6)
        .map(|k| {
            with_payload(
                &format!("p{k}"),
                json!({"n": k, "nested": {"tag": format!("t{k}")}}),
            )
        })
        // A second wave: p2 again with another payload, an update.
        .chain([with_payload("p2", json!({"n": 2, "changed": true}))])
        .collect();
    let txn = app.db.begin().await.unwrap();
    let results = ingest_many_in(&txn, app.db.hasher(), &items).await.unwrap();
    txn.commit().await.unwrap();
    for (item, result) in items.iter().zip(&results) {
        assert_eq!(
            result.lead.as_ref().unwrap().payload,
            item.new.payload,
            "{}",
            item.new.source_ref
        );
    }
    assert_eq!(results[6].outcome, Outcome::Updated);

    let stored: HashMap<i64, Value> = lead::Entity::find()
        .all(&app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.id, l.payload))
        .collect();
    assert_eq!(
        app.lead_by_ref("p2").await.payload,
        json!({"n": 2, "changed": true})
    );
    let events = outbox_event::Entity::find()
        .order_by_asc(outbox_event::Column::Id)
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(events.len(), 7);
    for (event, item) in events.iter().zip(&items) {
        assert_eq!(event.payload["payload"], item.new.payload);
        assert_eq!(event.payload["source_ref"], item.new.source_ref.as_str());
    }
    // The last event of p2 carries what is stored now.
    let p2 = app.lead_by_ref("p2").await;
    assert_eq!(events[6].payload["payload"], stored[&p2.id]);

    // Through the API, concurrent posts share batches: each answer carries
    // its own record's payload.
    let token = app.token(Role::Intake, Some("webform")).await;
    let bodies: Vec<Value> = (0..40)
        .map(|k| json!({"source": "webform", "source_ref": format!("h{k}"), "payload": {"k": k}}))
        .collect();
    let responses =
        futures::future::join_all(bodies.iter().map(|b| app.api(&token).create_lead(b))).await;
    for (body, response) in bodies.iter().zip(responses) {
        assert_eq!(response.status(), 201);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["source_ref"], body["source_ref"]);
        assert_eq!(answer["payload"], body["payload"]);
    }
}

/// On PostgreSQL the upsert builds each event's lead snapshot itself: it
/// must be the JSON the Rust snapshot serialises to (what the API shows),
/// for every shape a timestamp takes (whole seconds, milliseconds,
/// microseconds, none, years before the common era).
async fn an_ingest_event_carries_the_snapshot_of_the_lead_it_wrote(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let at = |y: i32, mo: u32, d: u32, micros: u32| {
        chrono::NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_micro_opt(10, 0, 0, micros)
            .unwrap()
            .and_utc()
    };
    let times = [
        Some(at(2026, 11, 1, 0)),
        Some(at(2026, 11, 1, 500_000)),
        Some(at(2026, 11, 1, 10_000)),
        Some(at(2026, 11, 1, 123_456)),
        Some(at(2026, 11, 1, 1)),
        Some(at(1, 1, 1, 0)),
        Some(at(999, 12, 31, 999_999)),
        None,
    ];
    // Creation times (set below) as varied, and on PostgreSQL 1 BC (chrono's
    // year 0) and 44 BC, which SQLite's text dates do not reach.
    let mut created_at: Vec<_> = times
        .iter()
        .map(|t| t.unwrap_or(at(2000, 2, 29, 0)))
        .collect();
    let mut times = times.to_vec();
    if backend == Backend::Postgres {
        for t in [at(0, 6, 1, 0), at(-44, 3, 15, 250_000)] {
            times.push(None);
            created_at.push(t);
        }
    }
    let record = |k: usize, name: &str, t: Option<chrono::DateTime<chrono::Utc>>| {
        let mut item = item(&format!("t{k}"), name, "2026-11-01T10:00:00Z");
        item.new.source_updated_at = t;
        item.new.email = Some(format!("t{k}@example.com"));
        item.new.payload = json!({"text": "café ☕ \"quoted\"", "big": 12345678901234_i64, "f": 1.5, "list": [1, "two", null]});
        item
    };
    // Every record of `times`, under `name`, in one committed batch.
    let batch = |name: &'static str| {
        let items: Vec<IngestItem> = times
            .iter()
            .enumerate()
            .map(|(k, t)| record(k, name, *t))
            .collect();
        let db = app.db.clone();
        async move {
            let txn = db.begin().await.unwrap();
            let results = ingest_many_in(&txn, db.hasher(), &items).await.unwrap();
            txn.commit().await.unwrap();
            results
        }
    };
    let first = batch("Made").await;
    // A lead created at each of those times, then updated: the update's
    // snapshot carries the stored creation time.
    for (result, t) in first.iter().zip(&created_at) {
        let lead = result.lead.as_ref().unwrap();
        lead::Entity::update_many()
            .col_expr(lead::Column::CreatedAt, sea_orm::sea_query::Expr::value(*t))
            .filter(lead::Column::Id.eq(lead.id))
            .exec(&app.db)
            .await
            .unwrap();
    }
    let second = batch("Changed").await;
    assert!(second.iter().all(|r| r.outcome == Outcome::Updated));

    let events = outbox_event::Entity::find()
        .order_by_asc(outbox_event::Column::Id)
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(events.len(), 2 * times.len());
    let expected: Vec<Value> = first
        .iter()
        .chain(&second)
        .map(|r| serde_json::to_value(LeadSnapshot::from(r.lead.as_ref().unwrap())).unwrap())
        .collect();
    let mut by_lead: HashMap<(i64, i64), &Value> = HashMap::new();
    for event in &events {
        let id = event.payload["id"].as_i64().unwrap();
        let version = event.payload["version"].as_i64().unwrap();
        by_lead.insert((id, version), &event.payload);
    }
    for want in &expected {
        let key = (
            want["id"].as_i64().unwrap(),
            want["version"].as_i64().unwrap(),
        );
        assert_eq!(
            by_lead.get(&key).copied(),
            Some(want),
            "event of lead {key:?}"
        );
    }
    // And what is stored now is what the last events said.
    for r in &second {
        let stored = lead::Entity::find_by_id(r.lead.as_ref().unwrap().id)
            .one(&app.db)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&stored, r.lead.as_ref().unwrap());
    }
}

/// Reconcile pages and inbox batches read back only each lead's key, id,
/// version and sender's time (`ingest_counted_in`): every outcome, lead id,
/// timeline row and outbox event must be what the whole-row path gives, for
/// new, updated, stale and unchanged records, stored or earlier in the batch,
/// and for an erased key.
async fn a_counted_batch_writes_what_a_whole_batch_writes(backend: Backend) {
    let mut seen = Vec::new();
    for counted in [true, false] {
        let app = TestApp::spawn(backend).await;
        // Stored before the batch: "kept" at 11:00, and "gone", then erased.
        let txn = app.db.begin().await.unwrap();
        let before = [
            item("kept", "Kept", "2026-11-01T11:00:00Z"),
            item("gone", "Gone", "2026-11-01T10:00:00Z"),
        ]
        .map(|mut before| {
            before.ctx.correlation_id = Some("before".into());
            before
        });
        let stored = ingest_many_in(&txn, app.db.hasher(), &before)
            .await
            .unwrap();
        txn.commit().await.unwrap();
        let request = EraseRequest {
            lead_id: stored[1].lead_id().unwrap(),
            reason: "subject request".into(),
            include_contact: false,
            erased_by: None,
            correlation_id: None,
        };
        erase(&app.db, &request).await.unwrap();

        let items = [
            item("a", "First", "2026-11-01T10:00:00Z"),
            item("kept", "Older", "2026-11-01T09:00:00Z"),
            item("gone", "Back", "2026-11-01T12:00:00Z"),
            item("a", "Second", "2026-11-01T11:00:00Z"),
            item("kept", "Kept", "2026-11-01T11:00:00Z"),
            item("a", "Older", "2026-11-01T09:00:00Z"),
            item("kept", "Newer", "2026-11-01T12:00:00Z"),
        ];
        let txn = app.db.begin().await.unwrap();
        let results: Vec<(Outcome, Option<i64>)> = if counted {
            ingest_counted_in(&txn, app.db.hasher(), &items)
                .await
                .unwrap()
                .into_iter()
                .map(|c| (c.outcome, c.lead_id))
                .collect()
        } else {
            ingest_many_in(&txn, app.db.hasher(), &items)
                .await
                .unwrap()
                .into_iter()
                .map(|i| (i.outcome, i.lead_id()))
                .collect()
        };
        txn.commit().await.unwrap();

        let leads: HashMap<i64, String> = lead::Entity::find()
            .all(&app.db)
            .await
            .unwrap()
            .into_iter()
            .map(|l| (l.id, l.source_ref))
            .collect();
        let answers: Vec<(Outcome, Option<String>)> = results
            .into_iter()
            .map(|(outcome, id)| (outcome, id.map(|id| leads[&id].clone())))
            .collect();
        let timeline: Vec<(String, Option<String>, Option<Value>)> = activity::Entity::find()
            .order_by_asc(activity::Column::Id)
            .all(&app.db)
            .await
            .unwrap()
            .into_iter()
            .filter(|a| a.correlation_id.as_deref() == Some("batch-1"))
            .map(|a| (leads[&a.lead_id].clone(), a.outcome, a.detail))
            .collect();
        let events: Vec<(String, String, Value)> = outbox_event::Entity::find()
            .order_by_asc(outbox_event::Column::Id)
            .all(&app.db)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.correlation_id.as_deref() == Some("batch-1"))
            .filter_map(|e| {
                let mut payload = e.payload;
                // Times of this run's writes, not of the records.
                for key in ["id", "created_at", "updated_at"] {
                    payload.as_object_mut()?.remove(key);
                }
                Some((leads.get(&e.lead_id?)?.clone(), e.event_type, payload))
            })
            .collect();
        seen.push((answers, timeline, events));
    }
    let answers = &seen[0].0;
    let outcomes: Vec<Outcome> = answers.iter().map(|(o, _)| *o).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Created,
            Outcome::Stale,
            Outcome::Suppressed,
            Outcome::Updated,
            Outcome::Unchanged,
            Outcome::Stale,
            Outcome::Updated
        ]
    );
    assert_eq!(answers[2].1, None, "an erased key reaches no lead");
    assert_eq!(answers[1].1.as_deref(), Some("kept"));
    // Stale rows name both times, from the stored row.
    assert!(seen[0].1.iter().any(|(key, outcome, detail)| key == "kept"
        && outcome.as_deref() == Some("stale")
        && detail.as_ref().unwrap()["stored_source_updated_at"] == "2026-11-01T11:00:00Z"));
    assert_eq!(seen[0].1.len(), 6);
    assert_eq!(seen[0], seen[1]);
}
