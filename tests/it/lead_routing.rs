//! Routing that knows the team: what routing knows about sales staff
//! (team, availability, capacity), who may change it (`PATCH
//! /api/principals/{id}`, `leadpipe token set`), and what the schema keeps
//! of principals that existed before.

#![allow(clippy::unwrap_used)]

use domain::auth::Role;
use domain::entities::{
    activity, assignment_cursor, lead_awaiting_owner, principal, routing_rules,
};
use leadpipe_tests::cli::output_text;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use workers::WorkerSettings;
use workers::lead_processor::LeadProcessor;

on_both_backends!(
    a_sales_principal_marks_itself_away_and_back,
    only_an_admin_sets_a_team_and_a_capacity,
    bad_routing_values_are_refused_naming_their_field,
    the_command_line_sets_team_capacity_and_availability,
    principals_from_before_the_migration_are_available_without_a_limit,
    assignment_passes_by_the_away_and_the_full,
    a_lead_no_one_can_take_waits_once_and_goes_to_whoever_comes_back,
    a_lead_closed_by_a_full_principal_makes_room_for_a_waiting_one,
    a_return_time_that_passes_brings_the_principal_back,
    routing_rules_are_replaced_whole_under_if_match,
    rules_route_by_source_and_payload_to_a_team_passing_by_the_away_and_the_full,
    a_weighted_rule_shares_by_weight,
    the_preview_says_who_would_get_a_lead_and_why,
);

/// Posts a webform lead with `payload`; its id.
async fn lead_with(app: &TestApp, intake: &str, source_ref: &str, payload: Value) -> i64 {
    let response = app
        .post_lead(
            intake,
            &json!({"source": "webform", "source_ref": source_ref, "payload": payload}),
        )
        .await;
    assert_eq!(response.status(), 201, "{source_ref}");
    app.lead_by_ref(source_ref).await.id
}

async fn put_rules(app: &TestApp, admin: &str, rules: Value) {
    let response = app
        .api(admin)
        .request(reqwest::Method::PUT, "/api/routing-rules")
        .json(&json!({ "rules": rules }))
        .await;
    assert_eq!(response.status(), 200, "{rules}");
}

async fn turn_of(app: &TestApp, pool: &str) -> Option<i64> {
    assignment_cursor::Entity::find_by_id(pool.to_owned())
        .one(&app.db)
        .await
        .unwrap()
        .map(|c| c.turn)
}

/// Drains the lead backlog as a woken worker does, until it is empty.
async fn drain(app: &TestApp) {
    let processor = LeadProcessor::new(app.db.clone(), WorkerSettings::for_tests());
    while processor.drain_once().await.unwrap() > 0 {}
}

async fn owner_of(app: &TestApp, source_ref: &str) -> Option<i64> {
    app.lead_by_ref(source_ref).await.owner_id
}

/// The kinds and details of a lead's timeline entries of `kind`.
async fn entries(app: &TestApp, source_ref: &str, kind: &str) -> Vec<Value> {
    let id = app.lead_by_ref(source_ref).await.id;
    activity::Entity::find()
        .filter(activity::Column::LeadId.eq(id))
        .filter(activity::Column::Kind.eq(kind))
        .all(&app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.detail.unwrap_or(Value::Null))
        .collect()
}

async fn set(app: &TestApp, admin: &str, id: i64, body: Value) {
    let response = app
        .api(admin)
        .patch(&format!("/api/principals/{id}"), &body)
        .await;
    assert_eq!(response.status(), 200, "{body}");
}

/// A new principal with `role`: its token and id.
async fn principal(app: &TestApp, role: Role) -> (String, i64) {
    let token = app.token(role, None).await;
    let me: Value = app.api(&token).get("/api/me").await.json().await.unwrap();
    (token, me["id"].as_i64().unwrap())
}

async fn row(app: &TestApp, id: i64) -> principal::Model {
    principal::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap()
}

async fn a_sales_principal_marks_itself_away_and_back(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (rep, id) = principal(&app, Role::Sales).await;
    let me = app.api(&rep).get("/api/me").await;
    assert_eq!(me.headers()["etag"], "\"1\"");
    let me: Value = me.json().await.unwrap();
    assert_eq!(
        (
            &me["availability"],
            &me["away_until"],
            &me["team"],
            &me["capacity"]
        ),
        (
            &json!("available"),
            &Value::Null,
            &Value::Null,
            &Value::Null
        ),
        "{me}"
    );

    let path = format!("/api/principals/{id}");
    let away = app
        .api(&rep)
        .patch(
            &path,
            &json!({"availability": "away", "away_until": "2031-01-05T09:00:00Z"}),
        )
        .if_match(1)
        .await;
    assert_eq!(away.status(), 200);
    assert_eq!(away.headers()["etag"], "\"2\"");
    let away: Value = away.json().await.unwrap();
    assert_eq!(
        (&away["availability"], &away["away_until"], &away["version"]),
        (&json!("away"), &json!("2031-01-05T09:00:00Z"), &json!(2)),
        "{away}"
    );
    let stored = row(&app, id).await;
    assert_eq!(stored.availability, "away");
    assert_eq!(
        stored.away_until.unwrap().to_rfc3339(),
        "2031-01-05T09:00:00+00:00"
    );

    // Everyone sees it in the list; the caller sees it in /api/me.
    let admin = app.token(Role::Admin, None).await;
    let all: Value = app
        .api(&admin)
        .get("/api/principals")
        .await
        .json()
        .await
        .unwrap();
    let listed = all
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .unwrap();
    assert_eq!(listed["availability"], "away", "{listed}");
    let me: Value = app.api(&rep).get("/api/me").await.json().await.unwrap();
    assert_eq!(me["away_until"], "2031-01-05T09:00:00Z");

    // A stale tag is refused; back to available clears the return time.
    let stale = app
        .api(&rep)
        .patch(&path, &json!({"availability": "available"}))
        .if_match(1)
        .await;
    assert_problem(stale, 412, "/problems/precondition-failed").await;
    let back: Value = app
        .api(&rep)
        .patch(&path, &json!({"availability": "available"}))
        .if_match(2)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&back["availability"], &back["away_until"], &back["version"]),
        (&json!("available"), &Value::Null, &json!(3)),
        "{back}"
    );
    // Nothing to change: no new version.
    let same: Value = app
        .api(&rep)
        .patch(&path, &json!({"availability": "available"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(same["version"], 3);
    assert_eq!(row(&app, id).await.away_until, None);
}

async fn only_an_admin_sets_a_team_and_a_capacity(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (rep, id) = principal(&app, Role::Sales).await;
    let (_, colleague) = principal(&app, Role::Sales).await;
    let (ops, _) = principal(&app, Role::Ops).await;
    let admin = app.token(Role::Admin, None).await;
    let path = format!("/api/principals/{id}");

    let own_team = app.api(&rep).patch(&path, &json!({"team": "east"})).await;
    assert_problem(own_team, 403, "/problems/forbidden").await;
    let own_capacity = app.api(&rep).patch(&path, &json!({"capacity": 50})).await;
    assert_problem(own_capacity, 403, "/problems/forbidden").await;
    let colleagues = app
        .api(&rep)
        .patch(
            &format!("/api/principals/{colleague}"),
            &json!({"availability": "away"}),
        )
        .await;
    assert_problem(colleagues, 403, "/problems/forbidden").await;
    let by_ops = app
        .api(&ops)
        .patch(&path, &json!({"availability": "away"}))
        .await;
    assert_problem(by_ops, 403, "/problems/forbidden").await;
    assert_eq!(row(&app, id).await.version, 1, "nothing was changed");

    let set: Value = app
        .api(&admin)
        .patch(
            &path,
            &json!({"team": " east ", "capacity": 20, "availability": "away"}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            &set["team"],
            &set["capacity"],
            &set["availability"],
            &set["away_until"]
        ),
        (&json!("east"), &json!(20), &json!("away"), &Value::Null),
        "{set}"
    );
    let stored = row(&app, id).await;
    assert_eq!(
        (stored.team.as_deref(), stored.capacity, stored.version),
        (Some("east"), Some(20), 2)
    );
    let cleared: Value = app
        .api(&admin)
        .patch(&path, &json!({"team": null, "capacity": null}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&cleared["team"], &cleared["capacity"]),
        (&Value::Null, &Value::Null)
    );
    let missing = app
        .api(&admin)
        .patch("/api/principals/999999", &json!({"team": "east"}))
        .await;
    assert_problem(missing, 404, "/problems/not-found").await;
}

async fn bad_routing_values_are_refused_naming_their_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, id) = principal(&app, Role::Sales).await;
    let (_, ops_id) = principal(&app, Role::Ops).await;
    let admin = app.token(Role::Admin, None).await;
    let path = format!("/api/principals/{id}");
    for (body, field) in [
        (json!({"capacity": -1}), "capacity"),
        (json!({"capacity": 100_001}), "capacity"),
        (json!({"capacity": "many"}), "capacity"),
        (json!({"team": "  "}), "team"),
        (json!({"team": "x".repeat(65)}), "team"),
        (json!({"availability": "busy"}), "availability"),
        (json!({"away_until": "2031-01-05T09:00:00Z"}), "away_until"),
        (
            json!({"away_until": "soon", "availability": "away"}),
            "away_until",
        ),
        (json!({"shift": "night"}), "shift"),
    ] {
        let response = app.api(&admin).patch(&path, &body).await;
        let problem = assert_problem(response, 422, "/problems/validation").await;
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
    let not_sales = app
        .api(&admin)
        .patch(
            &format!("/api/principals/{ops_id}"),
            &json!({"team": "east"}),
        )
        .await;
    let problem = assert_problem(not_sales, 422, "/problems/validation").await;
    assert_eq!(problem["errors"][0]["field"], "team", "{problem}");
    assert_eq!(row(&app, id).await.version, 1, "nothing was changed");
}

async fn the_command_line_sets_team_capacity_and_availability(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, id) = principal(&app, Role::Sales).await;
    let id_arg = id.to_string();
    let set = app
        .cli()
        .args([
            "token",
            "set",
            "--id",
            &id_arg,
            "--team",
            "east",
            "--capacity",
            "20",
        ])
        .args(["--away", "--until", "2031-01-05T09:00:00Z"])
        .output()
        .unwrap();
    assert!(set.status.success(), "{}", output_text(&set));
    assert_eq!(
        String::from_utf8_lossy(&set.stdout).trim(),
        format!("principal {id}: team east, away until 2031-01-05T09:00:00Z, capacity 20")
    );
    let stored = row(&app, id).await;
    assert_eq!(
        (
            stored.team.as_deref(),
            stored.capacity,
            stored.availability.as_str()
        ),
        (Some("east"), Some(20), "away")
    );

    let listed = app
        .cli()
        .args(["token", "list", "-o", "json"])
        .output()
        .unwrap();
    let rows: Vec<Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mine = rows.iter().find(|r| r["id"] == id).unwrap();
    assert_eq!(
        (&mine["team"], &mine["capacity"], &mine["availability"]),
        (
            &json!("east"),
            &json!(20),
            &json!("away until 2031-01-05T09:00:00Z")
        ),
        "{mine}"
    );

    let back = app
        .cli()
        .args([
            "token",
            "set",
            "--id",
            &id_arg,
            "--available",
            "--no-capacity",
            "--no-team",
        ])
        .output()
        .unwrap();
    assert!(back.status.success(), "{}", output_text(&back));
    let stored = row(&app, id).await;
    assert_eq!(
        (
            stored.team,
            stored.capacity,
            stored.availability.as_str(),
            stored.away_until
        ),
        (None, None, "available", None)
    );

    // A refused value names its field and exits as a usage error.
    let bad = app
        .cli()
        .args(["token", "set", "--id", &id_arg, "--capacity=-3"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", output_text(&bad));
    assert!(
        output_text(&bad).contains("capacity"),
        "{}",
        output_text(&bad)
    );
    let missing = app
        .cli()
        .args(["token", "set", "--id", "999999", "--available"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(3), "{}", output_text(&missing));
}

/// Principals written before the routing columns existed keep their rows
/// and come out available, in no team, without a limit, at version 1.
async fn principals_from_before_the_migration_are_available_without_a_limit(backend: Backend) {
    use migration::MigratorTrait;
    use sea_orm::{ConnectionTrait, Statement};

    let url = match backend {
        Backend::Sqlite => {
            let dir =
                std::env::temp_dir().join(format!("leadpipe-routing-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).unwrap();
            format!("sqlite://{}?mode=rwc", dir.join("old.db").display())
        }
        Backend::Postgres => leadpipe_tests::fresh_postgres_database().await,
    };
    let db = sea_orm::Database::connect(&url).await.unwrap();
    let all = migration::Migrator::migrations().len();
    let routing = all
        - migration::Migrator::migrations()
            .iter()
            .rev()
            .position(|m| m.name() == "m20261207_000950_principal_routing")
            .unwrap()
        - 1;
    migration::Migrator::up(&db, Some(u32::try_from(routing).unwrap()))
        .await
        .unwrap();
    db.execute_raw(Statement::from_string(
        db.get_database_backend(),
        "INSERT INTO principal (name, role, token_hash, active, created_at) \
         VALUES ('old rep', 'sales', 'abc', TRUE, '2026-12-01T00:00:00Z')",
    ))
    .await
    .unwrap();
    migration::Migrator::up(&db, None).await.unwrap();
    let old = principal::Entity::find().one(&db).await.unwrap().unwrap();
    assert_eq!(
        (
            old.name.as_str(),
            old.team,
            old.availability.as_str(),
            old.away_until,
            old.capacity,
            old.version
        ),
        ("old rep", None, "available", None, None, 1)
    );
}

async fn assignment_passes_by_the_away_and_the_full(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let (_, away) = principal(&app, Role::Sales).await;
    let (_, full) = principal(&app, Role::Sales).await;
    let (_, free) = principal(&app, Role::Sales).await;
    set(&app, &admin, away, json!({"availability": "away"})).await;
    set(&app, &admin, full, json!({"capacity": 1})).await;

    app.post_leads((0..4).map(|i| format!("form-{i}"))).await;
    drain(&app).await;
    let mut owners = Vec::new();
    for i in 0..4 {
        owners.push(owner_of(&app, &format!("form-{i}")).await.unwrap());
    }
    // The turns start at `away`: passed by every time; `full` takes one.
    assert_eq!(
        owners,
        [full, free, free, free],
        "away {away}, full {full}, free {free}"
    );
    let first = entries(&app, "form-0", "assigned").await;
    assert_eq!(
        first,
        [json!({"from": null, "to": full, "by": "round_robin",
            "skipped": [{"principal_id": away, "reason": "away"}]})]
    );
    let second = entries(&app, "form-1", "assigned").await;
    assert_eq!(
        second[0]["skipped"],
        json!([{"principal_id": full, "reason": "at_capacity"}]),
        "{second:?}"
    );
    // Nobody was ever out of reach: nothing waits.
    assert_eq!(app.count(lead_awaiting_owner::Entity).await, 0);
}

async fn a_lead_no_one_can_take_waits_once_and_goes_to_whoever_comes_back(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let (rep, id) = principal(&app, Role::Sales).await;
    set(&app, &admin, id, json!({"availability": "away"})).await;

    app.post_leads(["form-a".to_owned(), "form-b".to_owned()])
        .await;
    drain(&app).await;
    assert_eq!(owner_of(&app, "form-a").await, None);
    let unowned: Value = app
        .api(&admin)
        .leads("?owner=none")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(unowned["data"].as_array().unwrap().len(), 2, "{unowned}");
    assert_eq!(
        entries(&app, "form-a", "awaiting_owner").await,
        [
            json!({"rule": null, "pool": "sales", "skipped": [{"principal_id": id, "reason": "away"}]})
        ]
    );
    assert_eq!(app.count(lead_awaiting_owner::Entity).await, 2);

    // The lead changes and is processed again: still waiting, said once.
    let intake = app.token(Role::Intake, Some("webform")).await;
    let response = app
        .post_lead(
            &intake,
            &json!({"source": "webform", "source_ref": "form-a", "name": "Ada"}),
        )
        .await;
    assert_eq!(response.status(), 200);
    drain(&app).await;
    assert_eq!(entries(&app, "form-a", "awaiting_owner").await.len(), 1);
    assert_eq!(owner_of(&app, "form-a").await, None);

    // A person takes one meanwhile; then the rep comes back: the other one
    // is routed to it, the person's choice stands.
    let b = app.lead_by_ref("form-b").await;
    let taken = app
        .api(&admin)
        .patch_lead(b.id, &json!({"owner_id": id}))
        .if_match(b.version)
        .await;
    assert_eq!(taken.status(), 200);
    let a_before = app.lead_by_ref("form-a").await;
    let back = app
        .api(&rep)
        .patch(
            &format!("/api/principals/{id}"),
            &json!({"availability": "available"}),
        )
        .await;
    assert_eq!(back.status(), 200);
    let a_after = app.lead_by_ref("form-a").await;
    assert_eq!(a_after.version, a_before.version, "its ETag is unchanged");
    assert!(
        a_after.processed_version < a_after.version,
        "sent back to the lead drain"
    );
    assert_eq!(
        app.count(lead_awaiting_owner::Entity).await,
        1,
        "form-b left the wait"
    );
    drain(&app).await;
    assert_eq!(owner_of(&app, "form-a").await, Some(id));
    assert_eq!(
        entries(&app, "form-b", "assigned").await.len(),
        1,
        "only the person's"
    );
    assert_eq!(app.count(lead_awaiting_owner::Entity).await, 0);

    // A lead a person leaves without an owner is not routed again.
    let a = app.lead_by_ref("form-a").await;
    let unassigned = app
        .api(&admin)
        .patch_lead(a.id, &json!({"owner_id": null}))
        .if_match(a.version)
        .await;
    assert_eq!(unassigned.status(), 200);
    set(&app, &admin, id, json!({"capacity": 10})).await;
    set(&app, &admin, id, json!({"capacity": null})).await;
    drain(&app).await;
    assert_eq!(owner_of(&app, "form-a").await, None);
}

async fn a_lead_closed_by_a_full_principal_makes_room_for_a_waiting_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let (rep, id) = principal(&app, Role::Sales).await;
    set(&app, &admin, id, json!({"capacity": 1})).await;
    app.post_leads(["form-1".to_owned(), "form-2".to_owned()])
        .await;
    drain(&app).await;
    assert_eq!(owner_of(&app, "form-1").await, Some(id));
    assert_eq!(owner_of(&app, "form-2").await, None);
    assert_eq!(
        entries(&app, "form-2", "awaiting_owner").await[0]["skipped"],
        json!([{"principal_id": id, "reason": "at_capacity"}])
    );

    let first = app.lead_by_ref("form-1").await;
    let lost = app
        .api(&rep)
        .move_lead(first.id, "lost", Some("no budget"))
        .if_match(first.version)
        .await;
    assert_eq!(lost.status(), 200);
    drain(&app).await;
    assert_eq!(owner_of(&app, "form-2").await, Some(id));
    assert_eq!(app.count(lead_awaiting_owner::Entity).await, 0);
}

async fn a_return_time_that_passes_brings_the_principal_back(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (rep, id) = principal(&app, Role::Sales).await;
    let until = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let away = app
        .api(&rep)
        .patch(
            &format!("/api/principals/{id}"),
            &json!({"availability": "away", "away_until": until}),
        )
        .await;
    assert_eq!(away.status(), 200);
    app.post_leads(["form-1".to_owned()]).await;
    drain(&app).await;
    assert_eq!(owner_of(&app, "form-1").await, None);
    assert_eq!(
        workers::housekeeping::end_past_absences(&app.db)
            .await
            .unwrap(),
        0
    );

    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    assert_eq!(
        workers::housekeeping::end_past_absences(&app.db)
            .await
            .unwrap(),
        1
    );
    let stored = row(&app, id).await;
    assert_eq!(
        (
            stored.availability.as_str(),
            stored.away_until,
            stored.version
        ),
        ("available", None, 3)
    );
    drain(&app).await;
    assert_eq!(owner_of(&app, "form-1").await, Some(id));
}

async fn routing_rules_are_replaced_whole_under_if_match(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (rep, _) = principal(&app, Role::Sales).await;
    let admin = app.token(Role::Admin, None).await;
    let admin_id = domain::auth::authenticate(&app.db, &admin)
        .await
        .unwrap()
        .unwrap()
        .id;

    let empty = app.api(&rep).get("/api/routing-rules").await;
    assert_eq!(empty.headers()["etag"], "\"1\"");
    let empty: Value = empty.json().await.unwrap();
    assert_eq!(
        (&empty["rules"], &empty["version"]),
        (&json!([]), &json!(1))
    );

    let rules = json!([
        {"source": "webform", "team": "dach",
         "conditions": [{"pointer": "/country", "in": ["DE", "AT", "CH"]}]},
        {"team": "enterprise", "strategy": "weighted",
         "conditions": [{"pointer": "/employees", "gte": 1000}],
         "weights": [{"principal_id": 7, "weight": 3}]},
    ]);
    let by_rep = app
        .api(&rep)
        .request(reqwest::Method::PUT, "/api/routing-rules")
        .json(&json!({ "rules": rules }))
        .await;
    assert_problem(by_rep, 403, "/problems/forbidden").await;

    let put = app
        .api(&admin)
        .request(reqwest::Method::PUT, "/api/routing-rules")
        .json(&json!({ "rules": rules }))
        .if_match(1)
        .await;
    assert_eq!(put.status(), 200);
    assert_eq!(put.headers()["etag"], "\"2\"");
    let put: Value = put.json().await.unwrap();
    assert_eq!(put["version"], 2);
    assert_eq!(put["updated_by"], admin_id);
    assert_eq!(put["rules"][0]["strategy"], "round_robin", "{put}");
    assert_eq!(put["rules"][1]["weights"][0]["weight"], 3, "{put}");
    let row = routing_rules::Entity::find_by_id(1)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.version, row.rules.as_array().unwrap().len()), (2, 2));

    let stale = app
        .api(&admin)
        .request(reqwest::Method::PUT, "/api/routing-rules")
        .json(&json!({"rules": []}))
        .if_match(1)
        .await;
    let problem = assert_problem(stale, 412, "/problems/precondition-failed").await;
    assert_eq!(problem["current_version"], 2, "{problem}");

    let bad = app
        .api(&admin)
        .request(reqwest::Method::PUT, "/api/routing-rules")
        .json(&json!({"rules": [
            {"team": "east"},
            {"team": "", "conditions": [{"pointer": "country", "equals": "DE"}]},
        ]}))
        .await;
    let problem = assert_problem(bad, 422, "/problems/validation").await;
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["rules[1].team", "rules[1].conditions[0].pointer"],
        "{problem}"
    );
    let unknown = app
        .api(&admin)
        .request(reqwest::Method::PUT, "/api/routing-rules")
        .json(&json!({"rules": [{"team": "east", "strategy": "random"}]}))
        .await;
    assert_problem(unknown, 422, "/problems/validation").await;
    let listed: Value = app
        .api(&rep)
        .get("/api/routing-rules")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["version"], 2, "refusals changed nothing");
}

async fn rules_route_by_source_and_payload_to_a_team_passing_by_the_away_and_the_full(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let (_, east1) = principal(&app, Role::Sales).await;
    let (_, east2) = principal(&app, Role::Sales).await;
    let (_, west) = principal(&app, Role::Sales).await;
    let away = json!({"team": "east", "availability": "away"});
    set(&app, &admin, east1, away).await;
    set(&app, &admin, east2, json!({"team": "east"})).await;
    set(&app, &admin, west, json!({"team": "west", "capacity": 1})).await;
    put_rules(
        &app,
        &admin,
        json!([
            {"source": "webform", "team": "east",
             "conditions": [{"pointer": "/country", "in": ["DE", "AT"]}]},
            {"team": "west", "conditions": [{"pointer": "/company/employees", "gte": 100}]},
        ]),
    )
    .await;

    lead_with(&app, &intake, "de", json!({"country": "de"})).await;
    lead_with(
        &app,
        &intake,
        "big",
        json!({"company": {"employees": "250"}}),
    )
    .await;
    lead_with(&app, &intake, "small", json!({"company": {"employees": 5}})).await;
    lead_with(
        &app,
        &intake,
        "big-2",
        json!({"company": {"employees": 900}}),
    )
    .await;
    drain(&app).await;

    assert_eq!(owner_of(&app, "de").await, Some(east2));
    assert_eq!(
        entries(&app, "de", "assigned").await,
        [
            json!({"from": null, "to": east2, "by": "round_robin", "rule": 0, "pool": "team:east",
            "skipped": [{"principal_id": east1, "reason": "away"}]})
        ]
    );
    assert_eq!(owner_of(&app, "big").await, Some(west));
    // No rule: every sales principal, today's pool (its first turn passes
    // east1 by).
    assert_eq!(owner_of(&app, "small").await, Some(east2));
    // The west team is full: the second big lead waits, saying why.
    assert_eq!(owner_of(&app, "big-2").await, None);
    assert_eq!(
        entries(&app, "big-2", "awaiting_owner").await,
        [json!({"rule": 1, "pool": "team:west",
            "skipped": [{"principal_id": west, "reason": "at_capacity"}]})]
    );
    assert_eq!(
        (
            turn_of(&app, "team:east").await,
            turn_of(&app, "team:west").await,
            turn_of(&app, "sales").await
        ),
        (Some(1), Some(2), Some(1))
    );

    // A new rule list routes the waiting lead again: now to the east team.
    put_rules(&app, &admin, json!([{"team": "east"}])).await;
    drain(&app).await;
    assert_eq!(owner_of(&app, "big-2").await, Some(east2));
    assert_eq!(app.count(lead_awaiting_owner::Entity).await, 0);
}

async fn a_weighted_rule_shares_by_weight(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let (_, heavy) = principal(&app, Role::Sales).await;
    let (_, light) = principal(&app, Role::Sales).await;
    let (_, never) = principal(&app, Role::Sales).await;
    for id in [heavy, light, never] {
        set(&app, &admin, id, json!({"team": "east"})).await;
    }
    put_rules(
        &app,
        &admin,
        json!([{"team": "east", "strategy": "weighted", "weights": [
            {"principal_id": heavy, "weight": 3}, {"principal_id": never, "weight": 0}]}]),
    )
    .await;
    app.post_leads((0..8).map(|i| format!("form-{i}"))).await;
    drain(&app).await;
    let mut owners = Vec::new();
    for i in 0..8 {
        owners.push(owner_of(&app, &format!("form-{i}")).await.unwrap());
    }
    assert_eq!(
        owners,
        [heavy, heavy, light, heavy, heavy, heavy, light, heavy],
        "heavy {heavy}, light {light}"
    );
}

async fn the_preview_says_who_would_get_a_lead_and_why(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = app.token(Role::Admin, None).await;
    let (rep, east1) = principal(&app, Role::Sales).await;
    let (_, east2) = principal(&app, Role::Sales).await;
    set(
        &app,
        &admin,
        east1,
        json!({"team": "east", "availability": "away"}),
    )
    .await;
    set(&app, &admin, east2, json!({"team": "east"})).await;
    put_rules(
        &app,
        &admin,
        json!([{"team": "east", "conditions": [{"pointer": "/country", "equals": "DE"}]}]),
    )
    .await;

    let preview = |body: Value| {
        let api = app.api(&rep);
        async move { api.post("/api/routing-rules/preview", &body).await }
    };
    let said: Value = preview(json!({"source": "webform", "payload": {"country": "DE"}}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        said,
        json!({"rule": 0, "team": "east", "pool": "team:east", "candidates": [east1, east2],
            "owner_id": east2, "skipped": [{"principal_id": east1, "reason": "away"}],
            "routed": true})
    );
    assert_eq!(turn_of(&app, "team:east").await, None, "no turn taken");

    let other: Value = preview(json!({"source": "webform", "payload": {"country": "FR"}}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&other["rule"], &other["pool"]),
        (&Value::Null, &json!("sales")),
        "{other}"
    );

    // A stored lead: routed as it is; one with an owner is not routed at all.
    let intake = app.token(Role::Intake, Some("webform")).await;
    let id = lead_with(&app, &intake, "de", json!({"country": "DE"})).await;
    drain(&app).await;
    let stored: Value = preview(json!({"lead_id": id})).await.json().await.unwrap();
    assert_eq!(
        (&stored["rule"], &stored["owner_id"], &stored["routed"]),
        (&json!(0), &json!(east2), &json!(false)),
        "{stored}"
    );

    let neither = preview(json!({})).await;
    let problem = assert_problem(neither, 422, "/problems/validation").await;
    assert_eq!(problem["errors"][0]["field"], "lead_id");
    let missing = preview(json!({"lead_id": 999_999})).await;
    assert_problem(missing, 404, "/problems/not-found").await;
}

/// PostgreSQL: lead batches drained at once, their leads routed through
/// two pools that share principals (a team's rule and the whole sales
/// pool), all with a capacity. No batch fails over to lead-by-lead (no
/// deadlock between pools taken in different orders), and no principal
/// ends past its capacity however the batches interleave.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn concurrent_batches_over_shared_pools_neither_deadlock_nor_overfill() {
    use domain::db::BatchPath;
    use domain::lead::backlog::process_batch;
    use domain::retry::RetryPolicy;

    let app = TestApp::spawn(Backend::Postgres).await;
    let admin = app.token(Role::Admin, None).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let mut staff = Vec::new();
    for i in 0..4 {
        let (_, id) = principal(&app, Role::Sales).await;
        set(&app, &admin, id, json!({"capacity": 3})).await;
        if i < 2 {
            set(&app, &admin, id, json!({"team": "east"})).await;
        }
        staff.push(id);
    }
    put_rules(
        &app,
        &admin,
        json!([{"team": "east", "conditions": [{"pointer": "/form", "equals": "east"}]}]),
    )
    .await;
    for i in 0..40 {
        let form = if i % 3 == 0 { "east" } else { "other" };
        lead_with(&app, &intake, &format!("race-{i}"), json!({"form": form})).await;
    }

    let drains = (0..4).map(|_| {
        let db = app.db.clone();
        async move {
            let mut paths = Vec::new();
            loop {
                let batch = process_batch(&db, 4, &RetryPolicy::default(), chrono::Utc::now())
                    .await
                    .unwrap();
                if batch.taken() == 0 {
                    return paths;
                }
                paths.push(batch.path);
            }
        }
    });
    let paths: Vec<BatchPath> = futures::future::join_all(drains)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert!(
        paths.iter().all(|p| *p == BatchPath::Whole),
        "some batches failed over: {paths:?}"
    );
    let mut owned = std::collections::HashMap::new();
    for i in 0..40 {
        if let Some(owner) = owner_of(&app, &format!("race-{i}")).await {
            *owned.entry(owner).or_insert(0) += 1;
        }
    }
    for id in &staff {
        assert!(owned.get(id).copied().unwrap_or(0) <= 3, "{owned:?}");
    }
    assert_eq!(owned.values().sum::<i32>(), 12, "{owned:?}");
    assert_eq!(app.count(lead_awaiting_owner::Entity).await, 28);
}
