//! Export: everything stored about one lead (`GET /api/leads/{id}/export`),
//! and every lead a list filter matches, streamed as CSV or NDJSON
//! (`GET /api/leads/export`).

#![allow(clippy::unwrap_used)]

use domain::actor::Actor;
use domain::auth::Role;
use domain::lead::ingest::{IngestItem, Origin, ingest_many_in};
use domain::lead::record::LeadRecord;
use leadpipe_tests::webhooks::lead_event;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::TransactionTrait;
use serde_json::{Value, json};
use workers::WorkerSettings;

on_both_backends!(
    the_subject_export_holds_everything_stored_about_the_lead,
    the_bulk_export_streams_every_lead_the_filters_match,
    a_formula_behind_invisible_characters_is_defused_in_the_export,
);

async fn the_subject_export_holds_everything_stored_about_the_lead(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let sales = app.token(Role::Sales, None).await;
    let key = app.standard_source("webform").await;
    let body = lead_event("form-7", "ada@example.com", "2026-11-30T10:00:00Z");
    let ack: Value = app
        .post_standard("webform", &key, "msg_7", &body)
        .await
        .json()
        .await
        .unwrap();
    app.processor(WorkerSettings::for_tests())
        .process(ack["id"].as_i64().unwrap())
        .await
        .unwrap();
    let lead = app
        .api(&admin)
        .create_lead(
            &json!({"source": "webform", "source_ref": "form-7", "email": "ada@example.com",
                    "phone": "+44 20 7946 0000"}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    let id = lead["id"].as_i64().unwrap();
    let note = app
        .api(&sales)
        .add_note(id, "prefers email")
        .key("note-7")
        .await;
    assert_eq!(note.status(), 201);

    let path = format!("/api/leads/{id}/export");
    assert_problem(app.api(&sales).get(&path).await, 403, "/problems/forbidden").await;
    assert_problem(
        app.api(&admin)
            .get(&format!("/api/leads/{}/export", id + 100))
            .await,
        404,
        "/problems/not-found",
    )
    .await;
    let response = app.api(&admin).get(&path).await;
    assert_eq!(response.status(), 200);
    let export: Value = response.json().await.unwrap();
    assert_eq!(export["lead"]["id"], id);
    assert_eq!(export["lead"]["email"], "ada@example.com");
    assert_eq!(export["lead"]["phone"], "+442079460000");
    let kinds: Vec<&str> = export["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["ingest", "ingest", "note"]);
    assert_eq!(export["timeline"][2]["detail"]["text"], "prefers email");
    let inbox = export["inbox_events"].as_array().unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0]["event_id"], "msg_7");
    assert_eq!(inbox[0]["body"]["data"]["email"], "ada@example.com");
    let events: Vec<&str> = export["outbox_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["lead.created", "lead.updated", "lead.note_added"]);
    assert_eq!(export["deliveries"], json!([]));
    assert_eq!(export["conversion"], Value::Null);
    assert!(export["exported_at"].is_string());
}

/// Writes `n` leads of `source` straight through the write path.
async fn seed(app: &TestApp, source: &str, n: usize) {
    let items: Vec<IngestItem> = (0..n)
        .map(|i| IngestItem {
            new: LeadRecord {
                source: source.into(),
                source_ref: Some(format!("{source}-{i}")),
                email: Some(format!("person{i}@example.com")),
                phone: None,
                name: Some(if i == 0 {
                    "=HYPERLINK(\"http://evil\")".into()
                } else {
                    format!("Person {i}")
                }),
                company: None,
                source_updated_at: None,
                payload: None,
            }
            .normalise()
            .unwrap(),
            origin: Origin::Import,
            ctx: Actor::default(),
        })
        .collect();
    for chunk in items.chunks(300) {
        let txn = app.db.begin().await.unwrap();
        ingest_many_in(&txn, app.db.hasher(), chunk).await.unwrap();
        txn.commit().await.unwrap();
    }
}

async fn the_bulk_export_streams_every_lead_the_filters_match(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let sales = app.token(Role::Sales, None).await;
    seed(&app, "fair", 1_234).await;
    seed(&app, "other", 3).await;

    let response = app
        .api(&sales)
        .get("/api/leads/export?format=csv&source=fair")
        .await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    // Streamed: no length known up front.
    assert_eq!(headers["transfer-encoding"], "chunked");
    assert!(headers.get("content-length").is_none());
    let text = response.text().await.unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(
        reader.headers().unwrap().iter().collect::<Vec<_>>(),
        domain::lead::export::CSV_COLUMNS
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1_234);
    let mut refs: Vec<&str> = rows.iter().map(|r| &r[2]).collect();
    refs.sort_unstable();
    refs.dedup();
    assert_eq!(refs.len(), 1_234, "every lead exactly once");
    assert!(rows.iter().all(|r| &r[1] == "fair"));
    // A cell a spreadsheet would run as a formula is defused.
    let first = rows.iter().find(|r| &r[2] == "fair-0").unwrap();
    assert_eq!(&first[5], "'=HYPERLINK(\"http://evil\")");

    let response = app
        .api(&sales)
        .get("/api/leads/export?format=ndjson&q=person1")
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let lines: Vec<Value> = response
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // person1, person10–19, person100–199, person1000–1233 of `fair`, and
    // person1 of `other`.
    assert_eq!(lines.len(), 1 + 10 + 100 + 234 + 1);
    assert!(
        lines
            .iter()
            .all(|l| l["email"].as_str().unwrap().starts_with("person1"))
    );

    assert_problem(
        app.api(&sales).get("/api/leads/export?format=xlsx").await,
        422,
        "/problems/validation",
    )
    .await;
    assert_problem(
        app.api(&sales)
            .get("/api/leads/export?status=nonsense")
            .await,
        422,
        "/problems/validation",
    )
    .await;
    let intake = app.token(Role::Intake, Some("fair")).await;
    assert_problem(
        app.api(&intake).get("/api/leads/export").await,
        403,
        "/problems/forbidden",
    )
    .await;
}

/// A spreadsheet does not show a byte-order mark, a zero-width or a
/// bidirectional character, and runs the formula behind it: the export
/// defuses such a cell as it does a bare `=`.
async fn a_formula_behind_invisible_characters_is_defused_in_the_export(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let name = "\u{FEFF}=HYPERLINK(\"http://evil.example\",\"x\")";
    let company = "\u{202E}@SUM(1,1)";
    let source_ref = "\u{200B}+1+1";
    let response = app
        .api(&admin)
        .create_lead(&json!({"source": "hidden", "source_ref": source_ref,
                    "email": "hidden@example.com", "name": name, "company": company}))
        .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());

    let text = app
        .api(&admin)
        .get("/api/leads/export?format=csv&source=hidden")
        .await
        .text()
        .await
        .unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(
        (&rows[0][2], &rows[0][5], &rows[0][6]),
        (
            format!("'{source_ref}").as_str(),
            format!("'{name}").as_str(),
            format!("'{company}").as_str()
        ),
        "{text}"
    );
}
