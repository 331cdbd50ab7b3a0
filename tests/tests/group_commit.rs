//! Group commit: batched upserts give every record the outcome it would have
//! had alone, in arrival order, with the same activity and outbox rows.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use domain::auth::Role;
use domain::entities::{activity, lead, outbox_event};
use domain::lead::ingest::{IngestContext, IngestItem, Origin, Outcome, ingest_many_in};
use domain::lead::record::LeadRecord;
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use sea_orm::{EntityTrait, QueryOrder, TransactionTrait};
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
        ctx: IngestContext {
            correlation_id: Some("batch-1".into()),
            author_id: None,
        },
    }
}

on_both_backends!(
    a_batch_resolves_repeated_keys_in_arrival_order,
    concurrent_intake_through_group_commit_matches_one_by_one,
    every_record_of_a_batch_gets_its_own_payload_back
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
    let results = ingest_many_in(&txn, &items).await.unwrap();
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
    let recorded: Vec<&str> = activities
        .iter()
        .map(|a| a.outcome.as_deref().unwrap())
        .collect();
    assert_eq!(
        recorded,
        ["created", "updated", "created", "stale", "unchanged"]
    );
    assert!(
        activities
            .iter()
            .all(|a| a.correlation_id.as_deref() == Some("batch-1")
                && a.origin.as_deref() == Some("reconcile"))
    );
    let events: Vec<String> = outbox_event::Entity::find()
        .order_by_asc(outbox_event::Column::Id)
        .all(&app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert_eq!(events, ["lead.created", "lead.updated", "lead.created"]);
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
            futures::future::join_all(bodies.iter().map(|b| app.post_lead(&token, b))).await;
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
    let results = ingest_many_in(&txn, &items).await.unwrap();
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
        futures::future::join_all(bodies.iter().map(|b| app.post_lead(&token, b))).await;
    for (body, response) in bodies.iter().zip(responses) {
        assert_eq!(response.status(), 201);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["source_ref"], body["source_ref"]);
        assert_eq!(answer["payload"], body["payload"]);
    }
}
