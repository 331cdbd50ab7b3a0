//! Erasure: `DELETE /api/leads/{id}` removes the person's data everywhere,
//! leaves a tombstone that every door answers `suppressed`, is idempotent,
//! and survives a redelivery arriving at the same moment.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use api::cli::demo::fake_source::FakeSource;
use api::wire::convert::ConvertOut;
use api::wire::crm::Contact;
use api::wire::lead_data::{ErasureOut, SubjectExportOut};
use domain::auth::Role;
use domain::entities::{activity, lead, lead_tombstone, outbox_event};
use leadpipe_tests::client::Answer;
use leadpipe_tests::prometheus::sample;
use leadpipe_tests::webhooks::{ack_id, lead_event};
use leadpipe_tests::{Backend, TestApp, assert_problem, eventually, on_both_backends};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Statement};
use serde_json::{Value, json};
use workers::WorkerSettings;
use workers::inbox_job::Step;

on_both_backends!(
    erasure_leaves_no_trace_of_the_person_in_any_table,
    every_door_is_suppressed_after_erasure,
    erasure_is_idempotent_audited_and_announced,
    lifting_the_tombstone_lets_the_key_create_a_lead_again,
    a_concurrent_redelivery_never_resurrects_an_erased_lead,
    the_cli_erases_unsuppresses_and_exports,
    a_converted_contact_is_blanked_when_asked,
    erasure_reaches_dead_events_and_dead_letters_that_never_made_a_lead,
    a_reconcile_dry_run_predicts_suppressed_for_an_erased_key,
    broken_records_of_an_erased_key_arriving_later_are_not_kept,
    an_event_erasure_emptied_is_not_retried,
    look_alikes_of_an_erased_key_are_suppressed_too,
    stored_replays_are_erased_whatever_the_spelling_of_their_target,
    erased_bytes_do_not_stay_on_disk,
);

const EMAIL: &str = "ada@example.com";
const NAME: &str = "Ada Lovelace";
const REF: &str = "form-1";

/// A lead from `webform` made by a processed webhook; returns its id.
async fn webhook_lead(app: &TestApp, key: &[u8], msg_id: &str) -> Option<i64> {
    let body = lead_event(REF, EMAIL, "2026-11-30T10:00:00Z");
    let id = ack_id(app.post_standard("webform", key, msg_id, &body).await).await;
    let step = app
        .processor(WorkerSettings::for_tests())
        .process(id)
        .await
        .unwrap();
    let Step::Processed { lead_id, .. } = step else {
        panic!("expected processed, got {step:?}")
    };
    lead_id
}

async fn erased(app: &TestApp, token: &str, id: i64) -> ErasureOut {
    app.api(token)
        .erase_lead(id, "?reason=subject%20request%2042")
        .await
        .expect_json(200)
        .await
}

async fn import_csv(app: &TestApp, token: &str, csv: &str) -> Value {
    import_csv_with(app, token, csv, "").await
}

async fn import_csv_with(app: &TestApp, token: &str, csv: &str, extra: &str) -> Value {
    let query = format!("source=webform&map=source_ref=ref,email=email,name=name{extra}");
    let run = app.import_over_api(token, &query, csv.to_owned()).await;
    assert_eq!(run["state"], "done", "{run}");
    run
}

fn person_csv() -> String {
    format!("ref,email,name\n{REF},{EMAIL},{NAME}\n")
}

async fn leads_with_ref(app: &TestApp, source_ref: &str) -> Vec<lead::Model> {
    lead::Entity::find()
        .filter(lead::Column::SourceRef.eq(source_ref))
        .all(&app.db)
        .await
        .unwrap()
}

/// Every table and column (text, JSON and raw bytes alike) holding `needle`,
/// as `table.column`.
async fn tables_containing(app: &TestApp, needle: &str) -> Vec<String> {
    let db = &app.db;
    let backend = db.get_database_backend();
    let columns_sql = match app.backend {
        Backend::Sqlite => {
            "SELECT m.name AS t, p.name AS c, p.type AS ty FROM sqlite_master m \
             JOIN pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
        }
        Backend::Postgres => {
            "SELECT table_name::text AS t, column_name::text AS c, data_type::text AS ty \
             FROM information_schema.columns WHERE table_schema = 'public'"
        }
    };
    let columns = db
        .query_all_raw(Statement::from_string(backend, columns_sql))
        .await
        .unwrap();
    let mut found = Vec::new();
    for row in columns {
        let table: String = row.try_get("", "t").unwrap();
        let column: String = row.try_get("", "c").unwrap();
        let ty: String = row.try_get("", "ty").unwrap();
        let text = match (app.backend, ty.as_str()) {
            (Backend::Postgres, "bytea") => format!("encode(\"{column}\", 'escape')"),
            (Backend::Postgres, _) => format!("\"{column}\"::text"),
            (Backend::Sqlite, _) => format!("CAST(\"{column}\" AS TEXT)"),
        };
        let sql = format!(
            "SELECT COUNT(*) AS n FROM \"{table}\" WHERE LOWER({text}) LIKE '%{}%'",
            needle.to_lowercase()
        );
        let n: i64 = db
            .query_one_raw(Statement::from_string(backend, sql))
            .await
            .unwrap()
            .unwrap()
            .try_get("", "n")
            .unwrap();
        if n > 0 {
            found.push(format!("{table}.{column}"));
        }
    }
    found
}

async fn erasure_leaves_no_trace_of_the_person_in_any_table(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let sales = app.token(Role::Sales, None).await;
    let key = app.standard_source("webform").await;
    let id = webhook_lead(&app, &key, "msg_1").await.unwrap();
    // A note (stored with its idempotent response), an import of the same
    // person, an intake update: every place the person's data lands.
    let note = app
        .api(&sales)
        .add_note(id, &format!("Called {NAME} back"))
        .key("note-1")
        .await;
    assert_eq!(note.status(), 201);
    let run = import_csv(&app, &admin, &person_csv()).await;
    assert_eq!(run["rows"], 1);
    let update = app
        .api(&admin)
        .create_lead(
            &json!({"source": "webform", "source_ref": REF, "email": EMAIL,
                    "name": NAME, "phone": "+44 20 7946 0000"}),
        )
        .await;
    assert_eq!(update.status(), 200);
    for needle in [EMAIL, NAME] {
        assert!(
            !tables_containing(&app, needle).await.is_empty(),
            "the setup stored {needle} somewhere"
        );
    }

    let body = erased(&app, &admin, id).await;
    assert!(!body.repeated);
    let erasure = &body.erasure;
    assert_eq!(erasure.lead_id, id);
    assert_eq!(erasure.reason, "subject request 42");
    let counts = &erasure.counts;
    assert_eq!(counts["lead"], 1);
    assert_eq!(counts["inbox_event"], 1);
    assert_eq!(counts["import_row"], 1);
    assert_eq!(counts["idempotency_key"], 1);
    assert!(counts["activity"].as_i64().unwrap() >= 4, "{counts}");

    // The phone as sent and as stored; a bare "7946" could match a timestamp.
    for needle in [EMAIL, NAME, "7946 0000", "2079460000", REF] {
        assert_eq!(
            tables_containing(&app, needle).await,
            Vec::<String>::new(),
            "{needle} is still stored"
        );
    }
    let response = app.api(&admin).get(&format!("/api/leads/{id}")).await;
    assert_problem(response, 404, "/problems/not-found").await;
}

async fn every_door_is_suppressed_after_erasure(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let key = app.standard_source("webform").await;
    let id = webhook_lead(&app, &key, "msg_1").await.unwrap();
    let run = import_csv(&app, &admin, &person_csv()).await;
    assert_eq!(run["created"], 0, "{run}");
    erased(&app, &admin, id).await;

    // Intake: answered, counted, nothing written.
    let response = app
        .api(&admin)
        .create_lead(&json!({"source": "webform", "source_ref": REF, "email": EMAIL}))
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, json!({"outcome": "suppressed"}));

    // A webhook (a fresh delivery id): processed as suppressed, no lead,
    // and its raw body is not kept.
    let lead_id = webhook_lead(&app, &key, "msg_2").await;
    assert_eq!(lead_id, None);
    let events = domain::entities::inbox_event::Entity::find()
        .filter(domain::entities::inbox_event::Column::EventId.eq("msg_2"))
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(events[0].state, "processed");
    assert_eq!(events[0].outcome.as_deref(), Some("suppressed"));
    assert_eq!(events[0].lead_id, None);
    assert!(events[0].body.is_empty());

    // An import's dry run predicts it, and a re-run of the same file does it.
    let dry = import_csv_with(&app, &admin, &person_csv(), "&dry_run=true").await;
    assert_eq!(
        (&dry["suppressed"], &dry["created"]),
        (&json!(1), &json!(0)),
        "{dry}"
    );
    // An import re-run of the same file.
    let rerun = import_csv(&app, &admin, &person_csv()).await;
    assert_eq!(
        (&rerun["suppressed"], &rerun["created"]),
        (&json!(1), &json!(0)),
        "{rerun}"
    );

    // A reconcile page with the key on it.
    let fake = FakeSource::start(3).await.unwrap();
    let partner_key = partner_source(&app, &admin, &fake).await;
    let (event_id, body) = fake.delivery(1);
    let response = app
        .post_standard("partner", &partner_key, &event_id, &body)
        .await;
    let event: Value = response.json().await.unwrap();
    let step = app
        .processor(WorkerSettings::for_tests())
        .process(event["id"].as_i64().unwrap())
        .await
        .unwrap();
    let Step::Processed {
        lead_id: Some(partner_lead),
        ..
    } = step
    else {
        panic!("{step:?}")
    };
    erased(&app, &admin, partner_lead).await;
    let ops = app.token(Role::Ops, None).await;
    let run = app.reconcile_over_api(&ops, "partner", None).await;
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(
        (&run["created"], &run["suppressed"]),
        (&json!(2), &json!(1)),
        "{run}"
    );
    assert!(leads_with_ref(&app, &fake.source_ref(1)).await.is_empty());

    assert!(leads_with_ref(&app, REF).await.is_empty());
    let metrics = app.metrics().await;
    for origin in ["api", "webhook", "import", "reconcile"] {
        assert!(
            metrics.contains(&format!(
                "leadpipe_ingest_suppressed_total{{origin=\"{origin}\"}}"
            )),
            "{origin}: {metrics}"
        );
    }
}

async fn erasure_is_idempotent_audited_and_announced(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let record = json!({"source": "web", "source_ref": REF, "email": EMAIL, "name": NAME});
    let id = app.api(&admin).new_lead(&record).await;

    // Only admins, and only with a reason.
    let sales = app.token(Role::Sales, None).await;
    assert_problem(
        app.api(&sales).erase_lead(id, "?reason=x").await,
        403,
        "/problems/forbidden",
    )
    .await;
    assert_problem(
        app.api(&admin).erase_lead(id, "?").await,
        422,
        "/problems/validation",
    )
    .await;
    assert_problem(
        app.api(&admin).erase_lead(id + 1000, "?reason=x").await,
        404,
        "/problems/not-found",
    )
    .await;

    let first = erased(&app, &admin, id).await;
    // A client retrying a timed-out erase gets the same success.
    let again = erased(&app, &admin, id).await;
    assert!(again.repeated);
    let audit = serde_json::to_string(&first.erasure).unwrap();
    assert_eq!(serde_json::to_string(&again.erasure).unwrap(), audit);
    assert!(!audit.contains(EMAIL) && !audit.contains(REF), "{audit}");

    let erasures: Vec<outbox_event::Model> = outbox_event::Entity::find()
        .filter(outbox_event::Column::EventType.eq("lead.erased"))
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(erasures.len(), 1);
    assert_eq!(erasures[0].lead_id, None);
    assert_eq!(erasures[0].payload["lead_id"], id);
    assert_eq!(erasures[0].payload["key_hash"], first.erasure.key_hash);
    assert!(!erasures[0].payload.to_string().contains(EMAIL));
    // Nothing else about the lead is left to publish.
    let others = outbox_event::Entity::find()
        .filter(outbox_event::Column::LeadId.eq(id))
        .all(&app.db)
        .await
        .unwrap();
    assert!(others.is_empty(), "{others:?}");
    assert!(domain::outbound::outbox::EVENT_TYPES.contains(&"lead.erased"));
}

async fn lifting_the_tombstone_lets_the_key_create_a_lead_again(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let record = json!({"source": "web", "source_ref": REF, "email": EMAIL});
    let id = app.api(&admin).new_lead(&record).await;
    let body = erased(&app, &admin, id).await;
    let hash = body.erasure.key_hash;
    assert_eq!(hash.len(), 64);
    let suppressed = app.api(&admin).create_lead(&record).await;
    assert_eq!(
        suppressed.json::<Value>().await.unwrap()["outcome"],
        "suppressed"
    );

    let lift = |token: String| app.api(&token).lift_tombstone(&hash);
    let ops = app.token(Role::Ops, None).await;
    assert_problem(lift(ops).await, 403, "/problems/forbidden").await;
    assert_eq!(lift(admin.clone()).await.status(), 204);
    assert_problem(lift(admin.clone()).await, 404, "/problems/not-found").await;

    let back = app.api(&admin).create_lead(&record).await;
    assert_eq!(back.status(), 201);
    let back: Value = back.json().await.unwrap();
    assert_eq!(back["outcome"], "created");
    assert_ne!(back["id"], id);
}

/// Redeliveries of the key race the erasure. Whatever the interleaving, the
/// lead ends erased and buried, and nothing the redeliveries wrote survives.
async fn a_concurrent_redelivery_never_resurrects_an_erased_lead(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    for round in 0..10 {
        let source_ref = format!("race-{round}");
        let record = |n: usize| {
            json!({"source": "web", "source_ref": source_ref, "email": EMAIL,
                   "name": format!("{NAME} {n}")})
        };
        let created = app.api(&admin).create_lead(&record(0)).await;
        assert_eq!(created.status(), 201);
        let id = created.json::<Value>().await.unwrap()["id"]
            .as_i64()
            .unwrap();

        let redeliveries = (1..=12).map(|n| {
            let app = &app;
            let admin = &admin;
            let body = record(n);
            async move {
                // Staggered, to land around the erasure (the race tested).
                tokio::time::sleep(Duration::from_millis((n % 4) as u64 * 3)).await;
                app.api(admin).create_lead(&body).await.status().as_u16()
            }
        });
        let erasure = async {
            // Among the redeliveries rather than before them (the race tested).
            tokio::time::sleep(Duration::from_millis(4)).await;
            app.api(&admin)
                .erase_lead(id, "?reason=race")
                .await
                .status()
                .as_u16()
        };
        let (statuses, erased_status) =
            tokio::join!(futures::future::join_all(redeliveries), erasure);
        assert_eq!(erased_status, 200);
        assert!(
            statuses.iter().all(|s| *s == 200 || *s == 201),
            "{statuses:?}"
        );

        assert!(
            leads_with_ref(&app, &source_ref).await.is_empty(),
            "round {round}: resurrected"
        );
        let left = activity::Entity::find()
            .filter(activity::Column::LeadId.eq(id))
            .all(&app.db)
            .await
            .unwrap();
        assert!(left.is_empty(), "round {round}: {left:?}");
        assert_eq!(
            lead_tombstone::Entity::find()
                .filter(lead_tombstone::Column::LeadId.eq(id))
                .all(&app.db)
                .await
                .unwrap()
                .len(),
            1
        );
        let later = app.api(&admin).create_lead(&record(99)).await;
        assert_eq!(
            later.json::<Value>().await.unwrap()["outcome"],
            "suppressed"
        );
    }
}

async fn the_cli_erases_unsuppresses_and_exports(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let record = json!({"source": "web", "source_ref": REF, "email": EMAIL, "name": NAME});
    let id = app.api(&admin).new_lead(&record).await;
    app.api(&admin)
        .create_lead(&json!({"source": "web", "source_ref": "other", "email": "bob@example.com"}))
        .await;

    let exported = app.run_cli(&["export", "--format", "ndjson", "--source", "web"], &[]);
    assert!(exported.status.success(), "{exported:?}");
    assert_eq!(String::from_utf8_lossy(&exported.stdout).lines().count(), 2);

    let missing = app.run_cli(&["lead", "erase", "999999", "--reason", "request"], &[]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no such lead"),
        "{missing:?}"
    );

    let id_arg = id.to_string();
    let erased = app.run_cli(
        &["lead", "erase", &id_arg, "--reason", "subject request"],
        &[],
    );
    assert!(erased.status.success(), "{erased:?}");
    let audit: Value = serde_json::from_slice(&erased.stdout).unwrap();
    assert_eq!(audit["lead_id"], id);
    assert_eq!(audit["reason"], "subject request");
    let again = app.run_cli(
        &["lead", "erase", &id_arg, "--reason", "subject request"],
        &[],
    );
    assert!(again.status.success());
    assert_eq!(
        serde_json::from_slice::<Value>(&again.stdout).unwrap(),
        audit
    );

    // The server finds the tombstone the command left.
    let suppressed = app.api(&admin).create_lead(&record).await;
    assert_eq!(
        suppressed.json::<Value>().await.unwrap()["outcome"],
        "suppressed"
    );
    let csv = app.run_cli(&["export", "--source", "web"], &[]);
    let text = String::from_utf8_lossy(&csv.stdout).into_owned();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(!text.contains(EMAIL));

    let lifted = app.run_cli(
        &["lead", "unsuppress", "--source", "web", "--source-ref", REF],
        &[],
    );
    assert!(lifted.status.success(), "{lifted:?}");
    let none = app.run_cli(
        &["lead", "unsuppress", "--source", "web", "--source-ref", REF],
        &[],
    );
    assert!(!none.status.success());
    assert_eq!(app.api(&admin).create_lead(&record).await.status(), 201);
}

async fn a_converted_contact_is_blanked_when_asked(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let sales = app.token(Role::Sales, None).await;
    let record = json!({"source": "web", "source_ref": REF, "email": EMAIL, "name": NAME,
                        "company": "Analytical Engines"});
    let id = app.api(&admin).new_lead(&record).await;
    let sales = app.api(&sales);
    for to in ["contacted", "qualified"] {
        let moved = sales.move_lead(id, to, None).await;
        assert_eq!(moved.status(), 200);
    }
    let converted = sales.convert_lead(id, &json!({})).key("convert-1").await;
    assert_eq!(converted.status(), 201);
    let contact_id = converted
        .json::<ConvertOut>()
        .await
        .unwrap()
        .conversion
        .contact_id;
    // Follow-up tasks on the lead and on its contact name the person.
    for (kind, subject) in [("lead", id), ("contact", contact_id)] {
        let body = json!({"subject_type": kind, "subject_id": subject,
                          "title": format!("Call {NAME} back"), "due_at": "2026-12-24T09:00:00Z"});
        let created = sales
            .post("/api/tasks", &body)
            .key(&format!("task-{kind}"))
            .await;
        assert_eq!(created.status(), 201);
    }
    // The subject export names the conversion, the contact and the tasks.
    let export: SubjectExportOut = app
        .api(&admin)
        .get(&format!("/api/leads/{id}/export"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(export.conversion.unwrap().contact_id, contact_id);
    assert_eq!(export.contact.unwrap().email.as_deref(), Some(EMAIL));
    let subjects: Vec<(String, i64)> = export
        .tasks
        .iter()
        .map(|t| (t.subject_type.as_str().to_owned(), t.subject_id))
        .collect();
    assert_eq!(
        subjects,
        [("lead".to_owned(), id), ("contact".to_owned(), contact_id)]
    );

    let response = app
        .api(&admin)
        .erase_lead(id, "?reason=request&include_contact=true")
        .await;
    assert_eq!(response.status(), 200);
    let body: ErasureOut = response.json().await.unwrap();
    assert_eq!(body.erasure.counts["contact"], 1);
    assert_eq!(body.erasure.counts["lead_conversion"], 1);
    assert_eq!(body.erasure.counts["task"], 2);
    for needle in [EMAIL, NAME] {
        assert_eq!(
            tables_containing(&app, needle).await,
            Vec::<String>::new(),
            "{needle} is still stored"
        );
    }
    let contact: Contact = sales
        .get(&format!("/api/contacts/{contact_id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!((contact.email, contact.name), (None, None));
}

/// `partner`, a standard-webhooks source pulling from `fake`; its signing key.
async fn partner_source(app: &TestApp, admin: &str, fake: &FakeSource) -> Vec<u8> {
    let key = app.standard_source("partner").await;
    let saved = app
        .api(admin)
        .patch_source(
            "partner",
            &json!({"pull_url": fake.pull_url, "pull_page_size": 10}),
        )
        .await;
    assert_eq!(saved.status(), 200, "{}", saved.text().await.unwrap());
    key
}

/// An app with `partner`, a standard-webhooks source pulling from a fake
/// sender of `records` records.
struct Partner {
    app: TestApp,
    admin: String,
    ops: String,
    fake: FakeSource,
    key: Vec<u8>,
}

impl Partner {
    async fn spawn(backend: Backend, records: usize) -> Self {
        let app = TestApp::spawn(backend).await;
        let admin = app.admin_token().await;
        let ops = app.token(Role::Ops, None).await;
        let fake = FakeSource::start(records).await.unwrap();
        let key = partner_source(&app, &admin, &fake).await;
        Self {
            app,
            admin,
            ops,
            fake,
            key,
        }
    }

    fn parts(&self) -> (&TestApp, &str, &str, &FakeSource, &[u8]) {
        (&self.app, &self.admin, &self.ops, &self.fake, &self.key)
    }

    /// Delivers `record` as event `event_id` and processes it; the inbox
    /// row's id and the lead made.
    async fn lead(&self, event_id: &str, record: &Value) -> (i64, i64) {
        let event = deliver(&self.app, &self.key, event_id, record).await;
        let step = process(&self.app, event).await;
        let Step::Processed {
            lead_id: Some(id), ..
        } = step
        else {
            panic!("the lead was not made: {step:?}")
        };
        (event, id)
    }
}

/// `record` dated far in the future: it maps, then fails validation.
fn from_the_future(record: &Value) -> Value {
    let mut future = record.clone();
    future["updated_at"] = json!(FUTURE);
    future
}

const FUTURE: &str = "2099-01-01T00:00:00Z";

/// Delivers `record` to `partner` as event `event_id`; the inbox row's id.
async fn deliver(app: &TestApp, key: &[u8], event_id: &str, record: &Value) -> i64 {
    let body = json!({"type": "lead.updated", "data": record}).to_string();
    ack_id(
        app.post_standard("partner", key, event_id, body.as_bytes())
            .await,
    )
    .await
}

async fn process(app: &TestApp, id: i64) -> Step {
    app.processor(WorkerSettings::for_tests())
        .process(id)
        .await
        .unwrap()
}

/// What a sender's events can leave behind without ever making a lead — an
/// event that fails validation after its key was read, one whose mapping
/// fails, one not processed yet, reconcile records rejected, and such rows
/// kept before their key hash was (no hash) — is erased with the lead.
async fn erasure_reaches_dead_events_and_dead_letters_that_never_made_a_lead(backend: Backend) {
    let partner = Partner::spawn(backend, 3).await;
    let (app, admin, ops, fake, key) = partner.parts();
    let person = fake.record(0);
    let needles: Vec<String> = ["email", "name", "phone", "id"]
        .map(|field| person[field].as_str().unwrap().to_owned())
        .into();

    // Maps, then fails validation (a timestamp far in the future): dead.
    let future = from_the_future(&person);
    let invalid = deliver(app, key, "evt-invalid", &future).await;
    assert!(matches!(process(app, invalid).await, Step::Dead(_)));
    // Does not map at all (the email is not text), but its key reads: dead.
    let mut unmappable = person.clone();
    unmappable["email"] = json!({"address": person["email"]});
    let broken = deliver(app, key, "evt-unmappable", &unmappable).await;
    assert!(matches!(process(app, broken).await, Step::Dead(_)));
    // One kept before events carried their key hash.
    let legacy = deliver(app, key, "evt-legacy", &unmappable).await;
    assert!(matches!(process(app, legacy).await, Step::Dead(_)));
    // Received, not yet processed.
    let waiting = deliver(app, key, "evt-waiting", &person).await;

    // Reconcile rejects the person's record twice (two different records),
    // and creates the other two.
    fake.update(0, |r| r["updated_at"] = json!(FUTURE));
    let run = app.reconcile_over_api(ops, "partner", None).await;
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(
        (&run["created"], &run["rejected"]),
        (&json!(2), &json!(1)),
        "{run}"
    );
    fake.update(0, |r| {
        r["updated_at"] = json!("2026-11-30T10:00:00Z");
        r["email"] = json!({"address": person["email"]});
    });
    let run = app.reconcile_over_api(ops, "partner", None).await;
    assert_eq!(run["rejected"], 1, "{run}");
    let rejected = domain::entities::reconcile_rejected::Entity::find()
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    for (table, id) in [
        ("inbox_event", legacy),
        ("reconcile_rejected", rejected[0].id),
    ] {
        app.db
            .execute_raw(Statement::from_string(
                app.db.get_database_backend(),
                format!("UPDATE {table} SET key_hash = NULL WHERE id = {id}"),
            ))
            .await
            .unwrap();
    }

    // Then the person's lead is made, and erased.
    let (made, id) = partner.lead("evt-lead", &person).await;
    for needle in &needles {
        let found = tables_containing(app, needle).await;
        for table in [
            "inbox_event.body",
            "reconcile_rejected.record",
            "lead.email",
        ] {
            if table != "lead.email" || needle == &needles[0] {
                assert!(found.contains(&table.to_owned()), "{needle}: {found:?}");
            }
        }
    }
    // The subject export shows the key's events that never made the lead.
    let export: Value = app
        .api(admin)
        .get(&format!("/api/leads/{id}/export"))
        .await
        .json()
        .await
        .unwrap();
    let exported: Vec<i64> = export["inbox_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert_eq!(exported, [invalid, broken, waiting, made], "{export}");
    // And its pulled records reconcile could not map (the one kept with a
    // key hash; the other is found by erasure's re-mapping only).
    let exported: Vec<i64> = export["reconcile_rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(exported, [rejected[1].id], "{export}");
    assert_eq!(
        export["reconcile_rejected"][0]["record"]["email"]["address"], person["email"],
        "{export}"
    );

    let body = erased(app, admin, id).await;
    let counts = &body.erasure.counts;
    assert_eq!(counts["inbox_event"], 5, "{counts}");
    assert_eq!(counts["reconcile_rejected"], 2, "{counts}");
    for needle in &needles {
        assert_eq!(
            tables_containing(app, needle).await,
            Vec::<String>::new(),
            "{needle} is still stored"
        );
    }
    // The waiting event is settled as the tombstone answers it; no worker
    // later reports its emptied body as broken.
    let event = app.inbox_event(waiting).await;
    assert_eq!(
        (event.state.as_str(), event.outcome.as_deref()),
        ("processed", Some("suppressed"))
    );
    assert!(matches!(process(app, waiting).await, Step::NothingToDo));
    // The others stay leads; an erasure retried answers the same.
    assert_eq!(leads_with_ref(app, &fake.source_ref(1)).await.len(), 1);
    let again = erased(app, admin, id).await;
    assert!(again.repeated);
    assert_eq!(
        serde_json::to_value(&again.erasure).unwrap(),
        serde_json::to_value(&body.erasure).unwrap()
    );
}

/// A dry run answers an erased key as the real run does: `suppressed`.
async fn a_reconcile_dry_run_predicts_suppressed_for_an_erased_key(backend: Backend) {
    let partner = Partner::spawn(backend, 1).await;
    let (app, admin, ops, fake, _) = partner.parts();
    let (_, id) = partner.lead("evt-lead", &fake.record(0)).await;
    erased(app, admin, id).await;

    let outcomes = |run: &Value| {
        ["created", "updated", "unchanged", "suppressed", "missed"].map(|k| run[k].clone())
    };
    let dry = app
        .reconcile_over_api(ops, "partner", Some(&json!({"dry_run": true})))
        .await;
    assert_eq!(
        (&dry["state"], &dry["dry_run"]),
        (&json!("done"), &json!(true)),
        "{dry}"
    );
    assert_eq!(outcomes(&dry), [0, 0, 0, 1, 0].map(|n| json!(n)), "{dry}");
    assert!(leads_with_ref(app, &fake.source_ref(0)).await.is_empty());

    let real = app.reconcile_over_api(ops, "partner", None).await;
    assert_eq!(real["state"], "done", "{real}");
    assert_eq!(outcomes(&real), outcomes(&dry), "{real}");
    assert!(leads_with_ref(app, &fake.source_ref(0)).await.is_empty());
}

/// After the erasure, a delivery or a pulled record of the key that cannot
/// become a lead does not keep the person's data either: the dead event has
/// no body, and reconcile answers `suppressed` instead of keeping a dead
/// letter.
async fn broken_records_of_an_erased_key_arriving_later_are_not_kept(backend: Backend) {
    let partner = Partner::spawn(backend, 1).await;
    let (app, admin, ops, fake, key) = partner.parts();
    let person = fake.record(0);
    let (_, id) = partner.lead("evt-lead", &person).await;
    erased(app, admin, id).await;

    let future = from_the_future(&person);
    let late = deliver(app, key, "evt-late", &future).await;
    assert!(matches!(process(app, late).await, Step::Dead(_)));
    let event = app.inbox_event(late).await;
    assert_eq!(event.state, "dead");
    assert!(event.body.is_empty());

    fake.update(0, |r| r["updated_at"] = json!(FUTURE));
    let dry = app
        .reconcile_over_api(ops, "partner", Some(&json!({"dry_run": true})))
        .await;
    let run = app.reconcile_over_api(ops, "partner", None).await;
    for run in [&dry, &run] {
        assert_eq!(
            (&run["state"], &run["rejected"], &run["suppressed"]),
            (&json!("done"), &json!(0), &json!(1)),
            "{run}"
        );
    }
    let kept = domain::entities::reconcile_rejected::Entity::find()
        .all(&app.db)
        .await
        .unwrap();
    assert!(kept.is_empty(), "{kept:?}");
    for field in ["email", "name", "id"] {
        let needle = person[field].as_str().unwrap();
        assert_eq!(
            tables_containing(app, needle).await,
            Vec::<String>::new(),
            "{needle} is stored again"
        );
    }
}

/// Delivers a `lead_event` to `source` as `msg_id` and processes it.
async fn delivered_and_processed(
    app: &TestApp,
    source: &str,
    key: &[u8],
    msg_id: &str,
    body: &[u8],
) -> (i64, Step) {
    let id = ack_id(app.post_standard(source, key, msg_id, body).await).await;
    (id, process(app, id).await)
}

/// Erasure empties the body of every event of the person and keeps the
/// row. Retrying such an event has nothing to process: it once went on to
/// fail as "body is not JSON", turned `dead` and raised a dead-letter alert.
/// Ops are told it was erased, and the row stays as it is.
async fn an_event_erasure_emptied_is_not_retried(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let ops = app.token(Role::Ops, None).await;
    // A source of this test's own, per backend: the dead-letter counter is
    // per source, and one recorder serves every test of the binary.
    let source = match backend {
        Backend::Sqlite => "forgotten-sqlite",
        Backend::Postgres => "forgotten-postgres",
    };
    let key = app.standard_source(source).await;
    let (made, step) = delivered_and_processed(
        &app,
        source,
        &key,
        "msg_made",
        &lead_event(REF, EMAIL, "2026-11-30T10:00:00Z"),
    )
    .await;
    let Step::Processed {
        lead_id: Some(lead_id),
        ..
    } = step
    else {
        panic!("{step:?}")
    };
    // The same person, dated in the future: it maps, then fails validation.
    let (dead, step) = delivered_and_processed(
        &app,
        source,
        &key,
        "msg_dead",
        &lead_event(REF, EMAIL, FUTURE),
    )
    .await;
    assert!(matches!(step, Step::Dead(_)), "{step:?}");
    // Someone else's dead event stays retryable.
    let (other, step) = delivered_and_processed(
        &app,
        source,
        &key,
        "msg_other",
        &lead_event("other-1", "bob@example.com", FUTURE),
    )
    .await;
    assert!(matches!(step, Step::Dead(_)), "{step:?}");
    erased(&app, &admin, lead_id).await;
    let dead_letters = || async {
        sample(
            &app.metrics().await,
            "leadpipe_inbox_dead_total",
            &[("source", source)],
        )
    };
    let dead_before = dead_letters().await;

    for event in [made, dead] {
        let before = app.inbox_event(event).await;
        assert!(before.body.is_empty(), "{before:?}");
        let problem = assert_problem(
            app.api(&ops).retry_inbox_event(event).await,
            409,
            "/problems/inbox-event-erased",
        )
        .await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("erased"), "{detail}");
        assert_eq!(app.inbox_event(event).await, before);
        // Nothing was sent back: a worker finds nothing to do.
        assert_eq!(process(&app, event).await, Step::NothingToDo);
        assert_eq!(app.inbox_event(event).await, before);

        let id = event.to_string();
        let refused = app.run_cli(&["inbox", "retry", &id], &[]);
        assert!(!refused.status.success(), "{refused:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("erased"), "{stderr}");
        assert_eq!(app.inbox_event(event).await, before);
    }

    // In bulk, the erased events are skipped and counted; the others go on.
    let dead_event = app.inbox_event(dead).await;
    let dry = app
        .api(&ops)
        .retry_inbox_events(&json!({"source": source, "state": "dead", "dry_run": true}))
        .await
        .expect(200)
        .await;
    assert_eq!(
        (&dry["matched"], &dry["skipped_erased"]),
        (&json!(1), &json!(1)),
        "{dry}"
    );
    let done = app
        .api(&ops)
        .retry_inbox_events(&json!({"source": source, "state": "dead"}))
        .await
        .expect(200)
        .await;
    assert_eq!(
        (&done["matched"], &done["retried"], &done["skipped_erased"]),
        (&json!(1), &json!(1), &json!(1)),
        "{done}"
    );
    assert_eq!(app.inbox_event(other).await.retries, 1);
    assert_eq!(app.inbox_event(dead).await, dead_event);
    let all = app
        .api(&ops)
        .retry_inbox_events(&json!({"source": source, "include_processed": true, "dry_run": true}))
        .await
        .expect(200)
        .await;
    assert_eq!(
        (&all["matched"], &all["skipped_erased"]),
        (&json!(1), &json!(2)),
        "{all}"
    );
    let bulk = app.run_cli(
        &["inbox", "retry", "--source", source, "--state", "dead"],
        &[],
    );
    assert!(bulk.status.success(), "{bulk:?}");
    let stdout = String::from_utf8_lossy(&bulk.stdout);
    assert!(stdout.contains("1 erased event(s) skipped"), "{stdout}");
    assert_eq!(app.inbox_event(dead).await, dead_event);

    assert_eq!(dead_letters().await, dead_before);
}

/// Posts `source_ref` at intake to `webform`; the answer's outcome.
async fn intake_outcome(app: &TestApp, token: &str, source_ref: &str) -> String {
    let response = app
        .api(token)
        .create_lead(&json!({"source": "webform", "source_ref": source_ref, "email": EMAIL}))
        .await;
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    match body["outcome"].as_str() {
        Some("suppressed") => assert_eq!((status, &body), (200, &json!({"outcome": "suppressed"}))),
        Some("created") => assert_eq!(status, 201, "{body}"),
        _ => {}
    }
    body["outcome"].as_str().unwrap_or_default().to_owned()
}

/// A key that differs from an erased one only in how its characters are
/// encoded — Unicode normalisation (NFC or NFD), compatibility forms such as
/// full-width letters and digits, zero-width or bidirectional characters —
/// reads as the same key, and the tombstone answers it `suppressed` at every
/// door. The stored key stays as the sender wrote it; a different key still
/// makes a lead; lifting the tombstone lifts it for the look-alikes too.
async fn look_alikes_of_an_erased_key_are_suppressed_too(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let key = app.standard_source("webform").await;
    let full_width = "\u{FF21}-123"; // "Ａ-123"
    let composed = "caf\u{E9}"; // "café", NFC
    let mut hashes = Vec::new();
    for erased_ref in [full_width, composed] {
        assert_eq!(intake_outcome(&app, &admin, erased_ref).await, "created");
        let lead = &leads_with_ref(&app, erased_ref).await[0];
        assert_eq!(lead.source_ref, erased_ref, "stored as sent");
        let body = erased(&app, &admin, lead.id).await;
        hashes.push(body.erasure.key_hash);
    }

    let look_alikes = [
        "A-123",
        "\u{FF21}-\u{FF11}\u{FF12}\u{FF13}",
        "A\u{200B}-123",
        "cafe\u{301}",
        "caf\u{200B}\u{E9}",
        "\u{FEFF}caf\u{E9}",
        "\u{200E}ca\u{200D}fe\u{301}",
        "caf\u{202E}\u{E9}\u{202C}",
    ];
    for look_alike in look_alikes {
        assert_eq!(
            intake_outcome(&app, &admin, look_alike).await,
            "suppressed",
            "{look_alike:?}"
        );
    }
    // Through a webhook too.
    for (n, look_alike) in ["A-123", "cafe\u{301}"].into_iter().enumerate() {
        let body = lead_event(look_alike, EMAIL, "2026-11-30T10:00:00Z");
        let (_, step) =
            delivered_and_processed(&app, "webform", &key, &format!("msg_look_{n}"), &body).await;
        assert!(
            matches!(step, Step::Processed { lead_id: None, .. }),
            "{look_alike:?}: {step:?}"
        );
    }
    // A look-alike delivery that cannot become a lead keeps no body either.
    let (dead, step) = delivered_and_processed(
        &app,
        "webform",
        &key,
        "msg_look_dead",
        &lead_event("cafe\u{301}", EMAIL, FUTURE),
    )
    .await;
    assert!(matches!(step, Step::Dead(_)), "{step:?}");
    assert!(app.inbox_event(dead).await.body.is_empty());
    for look_alike in look_alikes {
        assert!(
            leads_with_ref(&app, look_alike).await.is_empty(),
            "{look_alike:?}"
        );
    }

    // Keys that read differently are other keys.
    for other in ["A-124", "a-123", "cafe", "caf\u{E8}"] {
        assert_eq!(
            intake_outcome(&app, &admin, other).await,
            "created",
            "{other:?}"
        );
    }

    // A tombstone kept before look-alikes were folded holds the key's own
    // hash only: it still buries that exact key.
    app.db
        .execute_raw(Statement::from_string(
            app.db.get_database_backend(),
            format!(
                "UPDATE lead_tombstone SET folded_hash = NULL WHERE key_hash = '{}'",
                hashes[0]
            ),
        ))
        .await
        .unwrap();
    assert_eq!(intake_outcome(&app, &admin, full_width).await, "suppressed");

    // Lifting the tombstone of "café" lifts it for its look-alikes.
    let lifted = app.api(&admin).lift_tombstone(&hashes[1]).await;
    assert_eq!(lifted.status(), 204);
    assert_eq!(intake_outcome(&app, &admin, "cafe\u{301}").await, "created");

    // Two look-alikes that were leads of their own, erased one by one, hold
    // a tombstone each; lifting one lifts the key for every spelling.
    let mut naive = Vec::new();
    for spelling in ["na\u{EF}ve", "nai\u{308}ve"] {
        assert_eq!(intake_outcome(&app, &admin, spelling).await, "created");
    }
    for spelling in ["na\u{EF}ve", "nai\u{308}ve"] {
        let lead = &leads_with_ref(&app, spelling).await[0];
        let body = erased(&app, &admin, lead.id).await;
        naive.push(body.erasure.key_hash);
    }
    let lifted = app.api(&admin).lift_tombstone(&naive[0]).await;
    assert_eq!(lifted.status(), 204);
    for spelling in ["na\u{EF}ve", "nai\u{308}ve"] {
        assert_eq!(
            intake_outcome(&app, &admin, spelling).await,
            "created",
            "{spelling:?}"
        );
    }
}

/// A keyed write, as sent: `(status, Idempotent-Replayed, body)`.
async fn keyed(
    app: &TestApp,
    token: &str,
    method: reqwest::Method,
    path: &str,
    key: &str,
    body: &Value,
) -> (u16, Option<String>, String) {
    let response = app
        .api(token)
        .request(method, path)
        .json(body)
        .key(key)
        .await;
    let status = response.status().as_u16();
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, replayed, response.text().await.unwrap())
}

async fn stored_replays_are_erased_whatever_the_spelling_of_their_target(backend: Backend) {
    use reqwest::Method;
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let sales = app.token(Role::Sales, None).await;
    let record = json!({"source": "web", "source_ref": REF, "email": EMAIL, "name": NAME});
    let (status, _, created) =
        keyed(&app, &admin, Method::POST, "/api/leads?", "k-bare", &record).await;
    assert_eq!(status, 201, "{created}");
    let id = serde_json::from_str::<Value>(&created).unwrap()["id"]
        .as_i64()
        .unwrap();
    // An empty query is no query: the same request, so the same key replays.
    let (status, replayed, _) =
        keyed(&app, &admin, Method::POST, "/api/leads", "k-bare", &record).await;
    assert_eq!((status, replayed.as_deref()), (201, Some("true")));

    let mut sent = vec![
        (
            Method::POST,
            "/api/leads?ref=1".to_owned(),
            "k-query",
            record.clone(),
        ),
        (
            Method::PATCH,
            format!("/api/leads/{id}?x=1"),
            "k-patch",
            json!({}),
        ),
    ];
    for (method, path, key, body) in &sent {
        let (status, _, answer) = keyed(&app, &admin, method.clone(), path, key, body).await;
        assert_eq!(status, 200, "{path}: {answer}");
        assert!(answer.contains(EMAIL), "{path}: {answer}");
    }
    // Other spellings of an id are no ids at all.
    for (method, path, key, body) in [
        (
            Method::PATCH,
            format!("/api/leads/0{id}"),
            "k-zero",
            json!({}),
        ),
        (
            Method::POST,
            format!("/api/leads/+{id}/notes"),
            "k-plus",
            json!({"text": "hi"}),
        ),
        (
            Method::GET,
            format!("/api/leads/0{id}"),
            "k-get",
            Value::Null,
        ),
    ] {
        let (status, _, answer) = keyed(&app, &sales, method, &path, key, &body).await;
        assert_eq!(status, 404, "{path}: {answer}");
    }
    for to in ["contacted", "qualified"] {
        let (status, _, answer) = keyed(
            &app,
            &sales,
            Method::POST,
            &format!("/api/leads/{id}/transitions"),
            &format!("k-{to}"),
            &json!({"to": to}),
        )
        .await;
        assert_eq!(status, 200, "{answer}");
    }
    let (status, _, answer) = keyed(
        &app,
        &sales,
        Method::POST,
        &format!("/api/leads/{id}/convert"),
        "k-convert",
        &json!({}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    // The contact matched by email, answered (and stored) with it.
    let contact = json!({"email": EMAIL});
    let (status, _, answer) = keyed(
        &app,
        &sales,
        Method::POST,
        "/api/contacts",
        "k-contact",
        &contact,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(EMAIL), "{answer}");
    sent.push((
        Method::POST,
        "/api/leads?".to_owned(),
        "k-bare",
        record.clone(),
    ));

    let response = app
        .api(&admin)
        .erase_lead(id, "?reason=request&include_contact=true")
        .await;
    assert_eq!(response.status(), 200);
    for needle in [EMAIL, NAME] {
        assert_eq!(
            tables_containing(&app, needle).await,
            Vec::<String>::new(),
            "{needle} is still stored"
        );
    }
    // No key answers with what it stored before the erasure.
    for (method, path, key, body) in &sent {
        let (_, replayed, answer) = keyed(&app, &admin, method.clone(), path, key, body).await;
        assert_ne!(replayed.as_deref(), Some("true"), "{path}: {answer}");
        assert!(!answer.contains(NAME), "{path}: {answer}");
    }
    let (_, replayed, answer) = keyed(
        &app,
        &sales,
        Method::POST,
        "/api/contacts",
        "k-contact",
        &contact,
    )
    .await;
    assert_ne!(replayed.as_deref(), Some("true"), "{answer}");
}

/// PostgreSQL: a keyed write that answers with the lead, caught mid-commit by
/// an erasure, leaves no stored replay of the person behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn a_keyed_write_racing_an_erasure_leaves_no_stored_replay() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let admin = app.admin_token().await;
    let sales = app.token(Role::Sales, None).await;
    let record = json!({"source": "web", "source_ref": REF, "email": EMAIL, "name": NAME});
    let id = app.api(&admin).new_lead(&record).await;
    // Storing a finished reply takes a while: the write holds its
    // transaction open while the erasure starts.
    app.exec(
        "CREATE FUNCTION slow_reply() RETURNS trigger AS $$ \
         BEGIN PERFORM pg_sleep(1.5); RETURN NEW; END $$ LANGUAGE plpgsql",
    )
    .await;
    app.exec(
        "CREATE TRIGGER slow_reply BEFORE UPDATE ON idempotency_key FOR EACH ROW \
         WHEN (NEW.state = 'done') EXECUTE FUNCTION slow_reply()",
    )
    .await;
    let patch = async {
        keyed(
            &app,
            &sales,
            reqwest::Method::PATCH,
            // A target no path match would find.
            &format!("/api/leads/{id}?via=list"),
            "k-racing",
            &json!({}),
        )
        .await
    };
    let erasure = async {
        // Lets the keyed write get into its commit first (the race tested).
        tokio::time::sleep(Duration::from_millis(400)).await;
        app.api(&admin)
            .erase_lead(id, "?reason=request")
            .await
            .status()
    };
    let ((status, _, answer), erased) = tokio::join!(patch, erasure);
    assert_eq!(erased, 200);
    assert!([200, 404].contains(&status), "{status}: {answer}");
    for needle in [EMAIL, NAME] {
        assert_eq!(
            tables_containing(&app, needle).await,
            Vec::<String>::new(),
            "{needle} is still stored"
        );
    }
}

/// Where an erased person's bytes could still be read on SQLite: the
/// database file (free space in pages, free pages), its `-wal` (the page
/// images of every write since the last checkpoint). Each file holding
/// `needle`, by suffix.
fn sqlite_files_containing(app: &TestApp, needle: &str) -> Vec<String> {
    let path = app
        .database_url
        .strip_prefix("sqlite://")
        .and_then(|rest| rest.split('?').next())
        .unwrap();
    let mut found = Vec::new();
    for suffix in ["", "-wal"] {
        let Ok(bytes) = std::fs::read(format!("{path}{suffix}")) else {
            continue;
        };
        if bytes
            .windows(needle.len())
            .any(|window| window == needle.as_bytes())
        {
            found.push(format!("db{suffix}"));
        }
    }
    found
}

async fn erased_bytes_do_not_stay_on_disk(backend: Backend) {
    const CANARY: &str = "zq-erasure-canary";
    let app = TestApp::spawn(backend).await;
    let admin = app.admin_token().await;
    let sales = app.token(Role::Sales, None).await;
    let record = |n: usize| {
        json!({"source": "web", "source_ref": format!("{CANARY}-ref"),
               "email": format!("{CANARY}@example.com"),
               "name": format!("Zq Canary {n} {CANARY}")})
    };
    let id = app.api(&admin).new_lead(&record(0)).await;
    // Updates leave earlier versions of the rows in freed space; a
    // checkpoint half-way puts them in the database file, the later ones
    // stay in the WAL.
    for n in 1..6 {
        assert_eq!(app.api(&admin).create_lead(&record(n)).await.status(), 200);
        if n == 3 && backend == Backend::Sqlite {
            app.db
                .execute_unprepared("PRAGMA wal_checkpoint(TRUNCATE)")
                .await
                .unwrap();
        }
    }
    let note = app
        .api(&sales)
        .add_note(id, &format!("Called {CANARY} back"))
        .key("canary-note")
        .await;
    assert_eq!(note.status(), 201);
    if backend == Backend::Sqlite {
        assert_eq!(
            sqlite_files_containing(&app, CANARY),
            ["db", "db-wal"],
            "the setup wrote the canary to both files"
        );
    } else {
        assert_eq!(lead_vacuumed_at_now(&app).await, None);
    }

    erased(&app, &admin, id).await;
    match backend {
        Backend::Sqlite => assert_eq!(
            sqlite_files_containing(&app, CANARY),
            Vec::<String>::new(),
            "the erased person's bytes are still on disk"
        ),
        // The vacuum after an erasure runs after the answer.
        Backend::Postgres => {
            eventually(
                "a vacuum of the tables the erasure touched",
                Duration::from_secs(10),
                async || lead_vacuumed_at_now(&app).await,
            )
            .await;
        }
    }
}

async fn lead_vacuumed_at_now(app: &TestApp) -> Option<String> {
    let row = app
        .db
        .query_one_raw(Statement::from_string(
            app.db.get_database_backend(),
            "SELECT last_vacuum::text AS at FROM pg_stat_user_tables WHERE relname = 'lead'",
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get("", "at").unwrap()
}

/// PostgreSQL: an erasure that holds the lead while a keyed write to it
/// waits (its key already claimed) finishes, and so does the write: the
/// erasure does not wait for the write's in-flight key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn an_erasure_and_a_keyed_write_waiting_for_its_lead_do_not_deadlock() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let admin = app.admin_token().await;
    let sales = app.token(Role::Sales, None).await;
    let record = json!({"source": "web", "source_ref": REF, "email": EMAIL, "name": NAME});
    let id = app.api(&admin).new_lead(&record).await;
    // The erasure holds the lead a while before it reaches stored replies.
    app.exec(
        "CREATE FUNCTION slow_erasure() RETURNS trigger AS $$ \
         BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$ LANGUAGE plpgsql",
    )
    .await;
    app.exec(
        "CREATE TRIGGER slow_erasure BEFORE DELETE ON activity FOR EACH STATEMENT \
         EXECUTE FUNCTION slow_erasure()",
    )
    .await;
    let erasure = async {
        app.api(&admin)
            .erase_lead(id, "?reason=request")
            .await
            .status()
    };
    let patch = async {
        // Lets the erasure get into its slowed delete first (the race tested).
        tokio::time::sleep(Duration::from_millis(400)).await;
        keyed(
            &app,
            &sales,
            reqwest::Method::PATCH,
            &format!("/api/leads/{id}"),
            "k-waiting",
            &json!({}),
        )
        .await
    };
    let (erased, (status, _, answer)) = tokio::join!(erasure, patch);
    assert_eq!(erased, 200);
    assert_eq!(status, 404, "{answer}");
}
