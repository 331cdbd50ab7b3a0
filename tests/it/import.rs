//! Bulk import: `POST /api/imports` and the `leadpipe import` code path.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use api::cli::import::ImportArgs;
use domain::auth::Role;
use domain::entities::{activity, import_run, lead, outbox_event};
use leadpipe_tests::{Backend, TestApp, assert_problem, eventually, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use serde_json::Value;

const FIRST: &str = "\
Lead ID,Email,name,Booth
fair-1,ada@one.example,Ada,A1
fair-2,bob@two.example,Bob,A2
fair-3,cy@three.example,Cy,B1
fair-4,di@four.example,Di,B2
fair-5,ed@five.example,Ed,C1
";

/// `fair-2` has a new email, `fair-6` is new; the rest are as before.
const CORRECTED: &str = "\
Lead ID,Email,name,Booth
fair-1,ada@one.example,Ada,A1
fair-2,bob@new-two.example,Bob,A2
fair-3,cy@three.example,Cy,B1
fair-4,di@four.example,Di,B2
fair-5,ed@five.example,Ed,C1
fair-6,fay@six.example,Fay,C2
";

const MAP: &str = "source_ref=Lead%20ID,email=Email";

struct Imports {
    app: TestApp,
    ops: String,
}

impl Imports {
    async fn new(backend: Backend) -> Self {
        Self::with(TestApp::spawn(backend).await).await
    }

    async fn with(app: TestApp) -> Self {
        let ops = app.token(Role::Ops, None).await;
        // An intake token for `fair` makes it a configured source, which
        // ops may import for.
        app.token(Role::Intake, Some("fair")).await;
        Self { app, ops }
    }

    /// Uploads a CSV and waits for its run to finish.
    async fn import(&self, query: &str, body: &str) -> Value {
        let response = self
            .app
            .api(&self.ops)
            .upload_import(query, "text/csv", body.to_owned())
            .await;
        assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        let started: Value = response.json().await.unwrap();
        assert_eq!(location, format!("/api/imports/{}", started["id"]));
        self.wait(&location).await
    }

    async fn wait(&self, location: &str) -> Value {
        let run = self.app.run_ended(&self.ops, location).await;
        assert_eq!(run["state"], "done", "{run}");
        run
    }

    async fn report(&self, run: &Value) -> Vec<Vec<String>> {
        let response = self
            .app
            .api(&self.ops)
            .get(run["report_url"].as_str().unwrap())
            .await;
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/csv")
        );
        let text = response.text().await.unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("row,line,source_ref,outcome,lead_id,reason")
        );
        lines
            .map(|l| {
                let mut reader = csv_fields(l);
                std::mem::take(&mut reader)
            })
            .collect()
    }

    async fn leads(&self) -> Vec<lead::Model> {
        lead::Entity::find()
            .order_by_asc(lead::Column::Id)
            .all(&self.app.db)
            .await
            .unwrap()
    }
}

/// Splits one CSV line (the report quotes fields with commas or quotes).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            (c, _) => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

fn counts(run: &Value) -> [i64; 6] {
    [
        "rows",
        "created",
        "updated",
        "unchanged",
        "stale",
        "rejected",
    ]
    .map(|k| run[k].as_i64().unwrap())
}

on_both_backends!(
    the_same_file_twice_is_all_unchanged_the_second_time,
    a_corrected_file_updates_only_what_changed,
    bad_rows_are_reported_with_line_numbers_and_good_rows_go_in,
    a_row_with_a_nul_is_rejected_alone_on_both_backends,
    a_dry_run_writes_no_lead,
    only_ops_and_admin_import_and_bodies_are_checked,
    the_cli_imports_ndjson_and_writes_the_report,
    a_batch_waits_for_the_write_turn_on_sqlite,
);

async fn the_same_file_twice_is_all_unchanged_the_second_time(backend: Backend) {
    let t = Imports::new(backend).await;
    let query = format!("source=fair&map={MAP}&file_name=fair.csv");
    let first = t.import(&query, FIRST).await;
    assert_eq!(counts(&first), [5, 5, 0, 0, 0, 0]);
    assert_eq!(first["file_name"], "fair.csv");
    assert_eq!(first["mapping"]["source_ref"], "Lead ID");
    let before = t.leads().await;
    assert_eq!(before.len(), 5);
    assert_eq!(before[0].email.as_deref(), Some("ada@one.example"));
    assert_eq!(before[0].payload["Booth"], "A1");
    let activities = t.app.count(activity::Entity).await;
    let events = t.app.count(outbox_event::Entity).await;

    let second = t.import(&query, FIRST).await;
    assert_ne!(second["id"], first["id"]);
    assert_eq!(second["file_hash"], first["file_hash"]);
    assert_eq!(counts(&second), [5, 0, 0, 5, 0, 0]);
    assert_eq!(t.leads().await, before, "nothing changed");
    assert_eq!(t.app.count(activity::Entity).await, activities);
    assert_eq!(t.app.count(outbox_event::Entity).await, events);
    let report = t.report(&second).await;
    assert_eq!(report.len(), 5);
    for (i, row) in report.iter().enumerate() {
        assert_eq!(row[0], (i + 1).to_string());
        assert_eq!(row[1], (i + 2).to_string(), "line numbers count the header");
        assert_eq!(row[3], "unchanged");
        assert_eq!(row[4], before[i].id.to_string());
    }
}

async fn a_corrected_file_updates_only_what_changed(backend: Backend) {
    let t = Imports::new(backend).await;
    let query = format!("source=fair&map={MAP}");
    t.import(&query, FIRST).await;
    let before = t.leads().await;
    let corrected = t.import(&query, CORRECTED).await;
    assert_eq!(counts(&corrected), [6, 1, 1, 4, 0, 0]);
    let after = t.leads().await;
    assert_eq!(after.len(), 6);
    assert_eq!(after[1].email.as_deref(), Some("bob@new-two.example"));
    assert_eq!(after[1].version, 2);
    for i in [0, 2, 3, 4] {
        assert_eq!(after[i], before[i], "row {i} untouched");
    }
    let report = t.report(&corrected).await;
    let outcomes: Vec<&str> = report.iter().map(|r| r[3].as_str()).collect();
    assert_eq!(
        outcomes,
        [
            "unchanged",
            "updated",
            "unchanged",
            "unchanged",
            "unchanged",
            "created"
        ]
    );
    let events = outbox_event::Entity::find()
        .filter(outbox_event::Column::EventType.eq("lead.updated"))
        .count(&t.app.db)
        .await
        .unwrap();
    assert_eq!(events, 1);
}

async fn bad_rows_are_reported_with_line_numbers_and_good_rows_go_in(backend: Backend) {
    let t = Imports::new(backend).await;
    let file = "\
Lead ID,Email,name
ok-1,one@ok.example,One
,missing@ref.example,No Ref
ok-2,not-an-email,Bad Mail
\"ok-3\",\"three@ok.example\",\"Three,
with a line break\"
ok-4,four@ok.example
ok-5,five@ok.example,Five
";
    let run = t.import(&format!("source=fair&map={MAP}"), file).await;
    assert_eq!(counts(&run), [6, 3, 0, 0, 0, 3]);
    let refs: Vec<String> = t.leads().await.into_iter().map(|l| l.source_ref).collect();
    assert_eq!(refs, ["ok-1", "ok-3", "ok-5"]);
    let report = t.report(&run).await;
    let rejected: Vec<(&str, &str, &str)> = report
        .iter()
        .filter(|r| r[3] == "rejected")
        .map(|r| (r[0].as_str(), r[1].as_str(), r[5].as_str()))
        .collect();
    assert_eq!(rejected.len(), 3);
    assert_eq!(rejected[0].0, "2");
    assert_eq!(rejected[0].1, "3");
    assert!(rejected[0].2.contains("source_ref"), "{rejected:?}");
    assert_eq!((rejected[1].0, rejected[1].1), ("3", "4"));
    assert!(rejected[1].2.contains("email"), "{rejected:?}");
    // Row 4 spans lines 5-6, so the short row is row 5 on line 7.
    assert_eq!((rejected[2].0, rejected[2].1), ("5", "7"));
    assert!(rejected[2].2.contains("expected 3 fields"), "{rejected:?}");
    let good_line = report.iter().find(|r| r[2] == "ok-5").unwrap();
    assert_eq!(
        (good_line[1].as_str(), good_line[3].as_str()),
        ("8", "created")
    );

    // A mapping naming a column the file lacks is refused before anything runs.
    let response = t
        .app
        .api(&t.ops)
        .upload_import("source=fair&map=source_ref=Nope", "text/csv", file)
        .await;
    let problem = assert_problem(response, 422, "/problems/validation").await;
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("Nope")
    );
    // So is a file with no source_ref column at all: never guessed.
    let response = t
        .app
        .api(&t.ops)
        .upload_import("source=fair", "text/csv", "id,email\n1,a@b.example\n")
        .await;
    assert_problem(response, 422, "/problems/validation").await;
    assert_eq!(t.app.count(import_run::Entity).await, 1);
}

/// PostgreSQL's `text` and `jsonb` refuse a NUL character; SQLite stores
/// it. A row holding one is rejected with its reason, on both backends, and
/// the rows around it go in.
async fn a_row_with_a_nul_is_rejected_alone_on_both_backends(backend: Backend) {
    let t = Imports::new(backend).await;
    let file = "Lead ID,Email,name\n\
                ok-1,one@ok.example,One\n\
                ok-2,two@ok.example,T\u{0}wo\n\
                ok\u{0}3,three@ok.example,Three\n\
                ok-4,four@ok.example,Four\n";
    let run = t
        .import(
            &format!("source=fair&map={MAP}&file_name=fair%00.csv"),
            file,
        )
        .await;
    assert_eq!(counts(&run), [4, 2, 0, 0, 0, 2]);
    // Kept for the report with the NUL shown as U+FFFD.
    assert_eq!(run["file_name"], "fair\u{FFFD}.csv");
    let refs: Vec<String> = t.leads().await.into_iter().map(|l| l.source_ref).collect();
    assert_eq!(refs, ["ok-1", "ok-4"]);
    let report = t.report(&run).await;
    let rejected: Vec<(&str, &str)> = report
        .iter()
        .filter(|r| r[3] == "rejected")
        .map(|r| (r[0].as_str(), r[5].as_str()))
        .collect();
    assert_eq!(rejected.len(), 2, "{report:?}");
    assert_eq!(rejected[0].0, "2");
    assert!(
        rejected[0].1.contains("name") && rejected[0].1.contains("NUL"),
        "{rejected:?}"
    );
    assert_eq!(rejected[1].0, "3");
    assert_eq!(report[2][2], "ok\u{FFFD}3");
    assert!(rejected[1].1.contains("source_ref"), "{rejected:?}");
}

async fn a_dry_run_writes_no_lead(backend: Backend) {
    let t = Imports::new(backend).await;
    let dry = t
        .import(&format!("source=fair&map={MAP}&dry_run=true"), FIRST)
        .await;
    assert_eq!(dry["dry_run"], true);
    assert_eq!(counts(&dry), [5, 5, 0, 0, 0, 0]);
    assert_eq!(t.app.count(lead::Entity).await, 0);
    assert_eq!(t.app.count(activity::Entity).await, 0);
    assert_eq!(t.app.count(outbox_event::Entity).await, 0);
    assert_eq!(t.report(&dry).await.len(), 5);

    t.import(&format!("source=fair&map={MAP}"), FIRST).await;
    let before = t.leads().await;
    let dry = t
        .import(&format!("source=fair&map={MAP}&dry_run=true"), CORRECTED)
        .await;
    assert_eq!(counts(&dry), [6, 1, 1, 4, 0, 0]);
    assert_eq!(t.leads().await, before);
}

async fn only_ops_and_admin_import_and_bodies_are_checked(backend: Backend) {
    let mut http = api::config::HttpSettings::for_tests();
    http.import_max_bytes = 256;
    let t = Imports::with(TestApp::spawn_with(backend, http).await).await;
    let sales = t.app.token(Role::Sales, None).await;
    let intake = t.app.token(Role::Intake, Some("fair")).await;
    for token in [&sales, &intake] {
        let response = t
            .app
            .api(token)
            .upload_import(&format!("source=fair&map={MAP}"), "text/csv", FIRST)
            .await;
        assert_problem(response, 403, "/problems/forbidden").await;
    }
    assert_problem(
        t.app.api(&sales).get("/api/imports").await,
        403,
        "/problems/forbidden",
    )
    .await;
    let admin = t.app.token(Role::Admin, None).await;
    let response = t
        .app
        .api(&admin)
        .upload_import(&format!("source=fair&map={MAP}"), "text/csv", FIRST)
        .await;
    assert_eq!(response.status(), 202);

    assert_problem(
        t.app
            .api(&t.ops)
            .upload_import("source=fair", "application/json", "{}")
            .await,
        415,
        "/problems/unsupported-media-type",
    )
    .await;
    let big = format!("{FIRST}{}", "fair-9,x@y.example,X,Z\n".repeat(20));
    assert_problem(
        t.app
            .api(&t.ops)
            .upload_import(&format!("source=fair&map={MAP}"), "text/csv", big.clone())
            .await,
        413,
        "/problems/payload-too-large",
    )
    .await;
    assert_problem(
        t.app
            .api(&t.ops)
            .upload_import("source=Not%20A%20Source", "text/csv", FIRST)
            .await,
        422,
        "/problems/validation",
    )
    .await;
    assert_problem(
        t.app
            .api(&t.ops)
            .upload_import("map=source_ref=x", "text/csv", FIRST)
            .await,
        422,
        "/problems/validation",
    )
    .await;
    let list: Value = t
        .app
        .api(&t.ops)
        .get("/api/imports?limit=10")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert_problem(
        t.app.api(&t.ops).get("/api/imports/999/report.csv").await,
        404,
        "/problems/not-found",
    )
    .await;
}

async fn the_cli_imports_ndjson_and_writes_the_report(backend: Backend) {
    let t = Imports::new(backend).await;
    let dir = std::env::temp_dir().join(format!("lp-cli-import-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("partner.ndjson");
    std::fs::write(
        &file,
        "{\"ref\": 101, \"email\": \"p1@partner.example\", \"score\": 7}\n\
         \n\
         {\"ref\": \"102\", \"email\": \"p2@partner.example\", \"source_updated_at\": \"2026-11-30T10:00:00Z\"}\n\
         {\"email\": \"noref@partner.example\"}\n",
    )
    .unwrap();
    let report = dir.join("report.csv");
    let args = |dry_run: bool, report: Option<std::path::PathBuf>| ImportArgs {
        source: "partner".into(),
        map: Some("source_ref=ref".into()),
        dry_run,
        format: None,
        batch_size: 2,
        report,
        no_progress: true,
        file: file.clone(),
    };
    api::cli::import::run(&t.app.db, args(true, None))
        .await
        .unwrap();
    assert_eq!(t.app.count(lead::Entity).await, 0);
    api::cli::import::run(&t.app.db, args(false, Some(report.clone())))
        .await
        .unwrap();
    let leads = t.leads().await;
    assert_eq!(leads.len(), 2);
    assert_eq!(leads[0].source_ref, "101");
    assert_eq!(leads[0].payload["score"], 7);
    let text = std::fs::read_to_string(&report).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[3].starts_with("3,4,,rejected,,"), "{}", lines[3]);
    api::cli::import::run(&t.app.db, args(false, None))
        .await
        .unwrap();
    let last = import_run::Entity::find()
        .order_by_desc(import_run::Column::Id)
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (last.unchanged, last.rejected, last.state.as_str()),
        (2, 1, "done")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// On SQLite an import is written in this process's write turn, as every
/// other writer is (its run record and each batch), instead of sleeping in
/// SQLite's busy handler behind them: while another writer holds the turn,
/// the import waits. PostgreSQL has no turn.
async fn a_batch_waits_for_the_write_turn_on_sqlite(backend: Backend) {
    let t = Imports::new(backend).await;
    let dir = std::env::temp_dir().join(format!("lp-turn-import-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fair.csv");
    std::fs::write(&file, FIRST).unwrap();
    let args = ImportArgs {
        source: "fair".into(),
        map: Some("source_ref=Lead ID,email=Email".into()),
        dry_run: false,
        format: None,
        batch_size: 100,
        report: None,
        no_progress: true,
        file: file.clone(),
    };
    let turn = t.app.db.write_turn().await;
    let import = {
        let db = t.app.db.clone();
        tokio::spawn(async move { api::cli::import::run(&db, args).await })
    };
    // Time for an import that skipped the turn to write: none must. On
    // PostgreSQL, time for it to record its run and write its batch.
    let recorded = eventually(
        "the import run is recorded (PostgreSQL)",
        Duration::from_secs(20),
        async || backend == Backend::Sqlite || t.app.count(import_run::Entity).await == 1,
    );
    recorded.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let runs_meanwhile = t.app.count(import_run::Entity).await;
    let written_meanwhile = t.app.count(lead::Entity).await;
    drop(turn);
    import.await.unwrap().unwrap();
    if backend == Backend::Sqlite {
        assert_eq!(
            (runs_meanwhile, written_meanwhile),
            (0, 0),
            "the import was written in another's turn"
        );
    }
    assert_eq!(t.app.count(lead::Entity).await, 5);
    std::fs::remove_dir_all(&dir).unwrap();
}
