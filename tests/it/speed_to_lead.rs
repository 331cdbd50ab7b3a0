//! Speed to lead: the clock a lead's owner starts and a person's first
//! action stops, teams' targets and escalation, the report and the gauge.

#![allow(clippy::unwrap_used)]

use chrono::{DateTime, Duration, Utc};
use domain::auth::Role;
use domain::entities::{lead, outbox_event};
use leadpipe_tests::cli::output_text;
use leadpipe_tests::client::{Answer, Api};
use leadpipe_tests::prometheus::sample;
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

on_both_backends!(
    an_owner_starts_the_clock_by_the_teams_target_and_a_call_stops_it,
    each_human_action_counts_as_the_first_response,
    the_report_is_computed_from_the_timestamps,
    an_overdue_lead_goes_to_the_next_available_teammate_and_is_counted,
    team_settings_are_checked_and_versioned,
    the_cli_sets_teams_and_prints_the_report,
);

struct Desk {
    app: TestApp,
    admin: Api,
}

impl Desk {
    async fn new(backend: Backend) -> Self {
        let app = TestApp::spawn(backend).await;
        let admin = app.api_as(Role::Admin, None).await;
        Self { app, admin }
    }

    /// A sales principal in `team`; its API and id.
    async fn rep(&self, team: Option<&str>) -> (Api, i64) {
        let api = self.app.api_as(Role::Sales, None).await;
        let me = api.get("/api/me").await.expect(200).await;
        let id = me["id"].as_i64().unwrap();
        if let Some(team) = team {
            self.admin
                .patch(&format!("/api/principals/{id}"), &json!({"team": team}))
                .await
                .expect(200)
                .await;
        }
        (api, id)
    }

    async fn team(&self, name: &str, body: Value) -> u16 {
        self.admin
            .request(reqwest::Method::PUT, &format!("/api/teams/{name}"))
            .json(&body)
            .await
            .status()
            .as_u16()
    }

    async fn lead(&self, source: &str, source_ref: &str) -> i64 {
        self.admin
            .new_lead(&json!({"source": source, "source_ref": source_ref, "name": "Ada"}))
            .await
    }

    async fn process(&self) {
        while workers::lead_processor::run_once(&self.app.db, 100)
            .await
            .unwrap()
            > 0
        {}
    }

    async fn stored(&self, id: i64) -> lead::Model {
        lead::Entity::find_by_id(id)
            .one(&self.app.db)
            .await
            .unwrap()
            .unwrap()
    }

    /// Sets a lead's clock as if it had run at these times.
    async fn backdate(
        &self,
        id: i64,
        created: DateTime<Utc>,
        assigned: Option<DateTime<Utc>>,
        responded: Option<DateTime<Utc>>,
        due: Option<DateTime<Utc>>,
    ) {
        lead::Entity::update_many()
            .col_expr(lead::Column::CreatedAt, Expr::val(created))
            .col_expr(lead::Column::AssignedAt, Expr::val(assigned))
            .col_expr(lead::Column::FirstResponseAt, Expr::val(responded))
            .col_expr(lead::Column::ResponseDueAt, Expr::val(due))
            .filter(lead::Column::Id.eq(id))
            .exec(&self.app.db)
            .await
            .unwrap();
    }
}

fn around_the_clock(target: i32) -> Value {
    json!({"time_zone": "UTC", "work_days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
           "work_start": "00:00", "work_end": "24:00", "response_target_minutes": target})
}

async fn an_owner_starts_the_clock_by_the_teams_target_and_a_call_stops_it(backend: Backend) {
    let t = Desk::new(backend).await;
    assert_eq!(t.team("default", around_the_clock(60)).await, 201);
    assert_eq!(t.team("east", around_the_clock(5)).await, 201);
    let (rep, rep_id) = t.rep(Some("east")).await;
    let id = t.lead("webform", "w-1").await;
    t.process().await;

    let stored = t.stored(id).await;
    assert_eq!(stored.owner_id, Some(rep_id));
    let assigned = stored.assigned_at.unwrap();
    // East's five minutes, not the default team's hour.
    assert_eq!(
        stored.response_due_at,
        Some(assigned + Duration::minutes(5))
    );
    let view = rep.lead(id).await.expect(200).await;
    assert_eq!(view["speed_to_lead"]["overdue"], false);
    assert!(view["speed_to_lead"]["first_response_at"].is_null());

    rep.post(
        &format!("/api/leads/{id}/notes"),
        &json!({"text": "Called, will send the deck", "kind": "call"}),
    )
    .key("call-1")
    .await
    .expect(201)
    .await;
    let answered = t.stored(id).await.first_response_at.unwrap();
    // A second note does not move the first response.
    rep.add_note(id, "Deck sent")
        .key("note-2")
        .await
        .expect(201)
        .await;
    assert_eq!(t.stored(id).await.first_response_at, Some(answered));
    let timeline = rep.lead_activities(id, "").await.expect(200).await;
    assert!(
        timeline["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "call" && a["detail"]["text"] == "Called, will send the deck")
    );
    let events = outbox_event::Entity::find()
        .filter(outbox_event::Column::EventType.eq("lead.note_added"))
        .order_by_asc(outbox_event::Column::Id)
        .all(&t.app.db)
        .await
        .unwrap();
    assert_eq!(events[0].payload["kind"], "call");

    let report = rep
        .get("/api/reports/speed-to-lead?window=24h")
        .await
        .expect(200)
        .await;
    assert_eq!(report["total"]["leads"], 1);
    assert_eq!(report["total"]["responded"], 1);
    assert_eq!(report["total"]["within_target"], 1);
    assert_eq!(report["total"]["breaches"], 0);
    assert_eq!(report["by_owner"][0]["owner_id"], rep_id);
    assert_eq!(report["by_source"][0]["source"], "webform");
}

async fn each_human_action_counts_as_the_first_response(backend: Backend) {
    let t = Desk::new(backend).await;
    let (rep, rep_id) = t.rep(None).await;
    let moved = t.lead("webform", "moved").await;
    let tasked = t.lead("webform", "tasked").await;
    let assigned = t.lead("webform", "assigned").await;
    t.process().await;
    for id in [moved, tasked] {
        assert_eq!(t.stored(id).await.owner_id, Some(rep_id));
        assert!(t.stored(id).await.first_response_at.is_none());
    }
    rep.move_lead(moved, "contacted", None)
        .await
        .expect(200)
        .await;
    assert!(t.stored(moved).await.first_response_at.is_some());

    let task = rep
        .post(
            "/api/tasks",
            &json!({"subject_type": "lead", "subject_id": tasked, "title": "Call",
                    "due_at": "2030-01-01T09:00:00Z"}),
        )
        .key("task")
        .await
        .expect(201)
        .await;
    // Creating a task is planning, not an answer; completing it is.
    assert!(t.stored(tasked).await.first_response_at.is_none());
    rep.patch(
        &format!("/api/tasks/{}", task["id"]),
        &json!({"status": "done"}),
    )
    .await
    .expect(200)
    .await;
    assert!(t.stored(tasked).await.first_response_at.is_some());

    // An assignment by a person starts the clock again for an unanswered
    // lead; it is no answer itself.
    let (_, other) = t.rep(None).await;
    let before = t.stored(assigned).await;
    rep.patch_lead(assigned, &json!({"owner_id": other}))
        .await
        .expect(200)
        .await;
    let after = t.stored(assigned).await;
    assert!(after.first_response_at.is_none());
    // `assigned_at` stays the first assignment; the due time is the new
    // owner's, and nothing was due yet, so no breach.
    assert_eq!(after.assigned_at, before.assigned_at);
    assert!(after.response_due_at > before.response_due_at);
    assert_eq!(after.response_breached_at, None);
}

async fn the_report_is_computed_from_the_timestamps(backend: Backend) {
    let t = Desk::new(backend).await;
    let (rep, rep_id) = t.rep(None).await;
    let now = Utc::now();
    let base = now - Duration::hours(2);
    // Ten web leads: assigned after 1..10 s, answered 10..100 s later; due
    // 60 s after assignment, so the last four answers are late.
    for i in 1..=10i64 {
        let id = t.lead("webform", &format!("w-{i}")).await;
        lead::Entity::update_many()
            .col_expr(lead::Column::OwnerId, Expr::val(rep_id))
            .filter(lead::Column::Id.eq(id))
            .exec(&t.app.db)
            .await
            .unwrap();
        let assigned = base + Duration::seconds(i);
        t.backdate(
            id,
            base,
            Some(assigned),
            Some(assigned + Duration::seconds(10 * i)),
            Some(assigned + Duration::seconds(60)),
        )
        .await;
    }
    // One partner lead, assigned, never answered, long overdue; one from
    // two days ago that the 24h window leaves out.
    let silent = t.lead("partner", "p-1").await;
    lead::Entity::update_many()
        .col_expr(lead::Column::OwnerId, Expr::val(rep_id))
        .filter(lead::Column::Id.eq(silent))
        .exec(&t.app.db)
        .await
        .unwrap();
    t.backdate(
        silent,
        base,
        Some(base),
        None,
        Some(base + Duration::minutes(5)),
    )
    .await;
    // Handed on after its due time passed, then answered in time by the
    // next owner: still a breach.
    let late = t.lead("partner", "p-2").await;
    lead::Entity::update_many()
        .col_expr(lead::Column::OwnerId, Expr::val(rep_id))
        .col_expr(
            lead::Column::ResponseBreachedAt,
            Expr::val(base + Duration::minutes(1)),
        )
        .filter(lead::Column::Id.eq(late))
        .exec(&t.app.db)
        .await
        .unwrap();
    t.backdate(
        late,
        base,
        Some(base),
        Some(base + Duration::seconds(30)),
        Some(base + Duration::hours(1)),
    )
    .await;
    let old = t.lead("partner", "p-old").await;
    t.backdate(old, now - Duration::days(2), None, None, None)
        .await;

    let report = rep
        .get("/api/reports/speed-to-lead?window=24h")
        .await
        .expect(200)
        .await;
    let web = &report["by_source"][1];
    assert_eq!(web["source"], "webform");
    assert_eq!(
        (&web["leads"], &web["assigned"], &web["responded"]),
        (&json!(10), &json!(10), &json!(10))
    );
    assert_eq!(web["system_delay_seconds"], json!({"p50": 5.0, "p90": 9.0}));
    assert_eq!(web["rep_delay_seconds"], json!({"p50": 50.0, "p90": 90.0}));
    assert_eq!(
        (&web["within_target"], &web["breaches"]),
        (&json!(6), &json!(4))
    );
    let partner = &report["by_source"][0];
    assert_eq!(
        (
            &partner["leads"],
            &partner["responded"],
            &partner["within_target"],
            &partner["breaches"]
        ),
        (&json!(2), &json!(1), &json!(0), &json!(2))
    );
    assert_eq!(
        partner["rep_delay_seconds"],
        json!({"p50": 30.0, "p90": 30.0})
    );
    assert_eq!(report["total"]["leads"], 12);
    assert_eq!(report["total"]["breaches"], 6);
    assert_eq!(report["by_owner"][0]["owner_id"], rep_id);
    assert_eq!(report["by_owner"][0]["leads"], 12);

    let month = rep
        .get("/api/reports/speed-to-lead?window=30d&source=partner")
        .await
        .expect(200)
        .await;
    assert_eq!(month["total"]["leads"], 3);
    let problem = assert_problem(
        rep.get("/api/reports/speed-to-lead?window=1y").await,
        422,
        "/problems/validation",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "window");
}

async fn an_overdue_lead_goes_to_the_next_available_teammate_and_is_counted(backend: Backend) {
    let t = Desk::new(backend).await;
    let mut escalating = around_the_clock(5);
    escalating["escalation"] = json!({"to": "next_available"});
    assert_eq!(t.team("east", escalating).await, 201);
    assert_eq!(t.team("west", around_the_clock(5)).await, 201);
    let (_, first) = t.rep(Some("east")).await;
    let (_, second) = t.rep(Some("east")).await;
    let (_, west) = t.rep(Some("west")).await;
    let east_lead = t.lead("webform", "e-1").await;
    let west_lead = t.lead("webform", "w-1").await;
    let past = Utc::now() - Duration::minutes(30);
    for (id, owner) in [(east_lead, first), (west_lead, west)] {
        lead::Entity::update_many()
            .col_expr(lead::Column::OwnerId, Expr::val(owner))
            .col_expr(
                lead::Column::ProcessedVersion,
                Expr::col(lead::Column::Version),
            )
            .filter(lead::Column::Id.eq(id))
            .exec(&t.app.db)
            .await
            .unwrap();
        t.backdate(
            id,
            past,
            Some(past),
            None,
            Some(past + Duration::minutes(5)),
        )
        .await;
    }
    let text = t
        .app
        .metrics_until("two overdue leads", |m| {
            sample(m, "leadpipe_leads_response_overdue", &[]) == 2.0
        })
        .await;
    assert_eq!(sample(&text, "leadpipe_leads_response_overdue", &[]), 2.0);
    let view = t.admin.lead(east_lead).await.expect(200).await;
    assert_eq!(view["speed_to_lead"]["overdue"], true);

    let before = t.stored(east_lead).await;
    let moved = workers::housekeeping::escalate_overdue(&t.app.db)
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let escalated = t.stored(east_lead).await;
    assert_eq!(escalated.owner_id, Some(second));
    assert!(escalated.response_due_at.unwrap() > Utc::now());
    // The first assignment and the missed due time stay on record.
    assert_eq!(escalated.assigned_at, before.assigned_at);
    assert_eq!(escalated.response_breached_at, before.response_due_at);
    // West has no escalation: its lead stays with its owner, overdue.
    assert_eq!(t.stored(west_lead).await.owner_id, Some(west));
    let timeline = t
        .admin
        .lead_activities(east_lead, "")
        .await
        .expect(200)
        .await;
    let entry = &timeline["data"][0];
    assert_eq!(
        (
            &entry["kind"],
            &entry["detail"]["by"],
            &entry["detail"]["to"]
        ),
        (&json!("assigned"), &json!("escalation"), &json!(second))
    );
    let assigned = outbox_event::Entity::find()
        .filter(outbox_event::Column::EventType.eq("lead.assigned"))
        .all(&t.app.db)
        .await
        .unwrap();
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0].payload["from"], first);
    t.app
        .metrics_until("one overdue lead left", |m| {
            sample(m, "leadpipe_leads_response_overdue", &[]) == 1.0
                && sample(m, "leadpipe_leads_response_escalated_total", &[]) >= 1.0
        })
        .await;
}

async fn team_settings_are_checked_and_versioned(backend: Backend) {
    let t = Desk::new(backend).await;
    let berlin = json!({"time_zone": "Europe/Berlin", "work_days": ["mon", "tue", "wed", "thu", "fri"],
                        "work_start": "09:00", "work_end": "17:30", "response_target_minutes": 30});
    let created = t
        .admin
        .request(reqwest::Method::PUT, "/api/teams/east")
        .json(&berlin)
        .await;
    assert_eq!(created.status(), 201);
    assert_eq!(created.headers()["etag"], "\"1\"");
    for (field, body) in [
        ("time_zone", json!({"time_zone": "Mars/Olympus"})),
        ("work_days", json!({"work_days": []})),
        ("work_end", json!({"work_end": "08:00"})),
        (
            "response_target_minutes",
            json!({"response_target_minutes": 0}),
        ),
        (
            "escalation.principal_id",
            json!({"escalation": {"to": "principal", "principal_id": 999_999}}),
        ),
    ] {
        let mut wrong = berlin.clone();
        wrong
            .as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        let problem = assert_problem(
            t.admin
                .request(reqwest::Method::PUT, "/api/teams/east")
                .json(&wrong)
                .await,
            422,
            "/problems/validation",
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    assert_problem(
        t.admin
            .request(reqwest::Method::PUT, "/api/teams/east")
            .json(&berlin)
            .if_match(7)
            .await,
        412,
        "/problems/precondition-failed",
    )
    .await;
    let (rep, _) = t.rep(None).await;
    assert_problem(
        rep.request(reqwest::Method::PUT, "/api/teams/east")
            .json(&berlin)
            .await,
        403,
        "/problems/forbidden",
    )
    .await;
    let list = rep.get("/api/teams").await.expect(200).await;
    assert_eq!(
        list["data"][0],
        json!({"name": "east", "time_zone": "Europe/Berlin",
               "work_days": ["mon", "tue", "wed", "thu", "fri"], "work_start": "09:00",
               "work_end": "17:30", "response_target_minutes": 30, "escalation": null,
               "version": 1, "updated_at": list["data"][0]["updated_at"]})
    );
}

async fn the_cli_sets_teams_and_prints_the_report(backend: Backend) {
    let t = Desk::new(backend).await;
    let output = t.app.run_cli(
        &[
            "team",
            "set",
            "east",
            "--time-zone",
            "Europe/Berlin",
            "--days",
            "mon,tue,wed,thu,fri",
            "--hours",
            "09:00-17:30",
            "--target-minutes",
            "30",
            "--escalate",
            "next-available",
        ],
        &[],
    );
    assert!(output.status.success(), "{}", output_text(&output));
    let list = t.admin.get("/api/teams").await.expect(200).await;
    assert_eq!(list["data"][0]["work_end"], "17:30");
    assert_eq!(
        list["data"][0]["escalation"],
        json!({"to": "next_available"})
    );
    let bad = t.app.run_cli(
        &[
            "team",
            "set",
            "east",
            "--time-zone",
            "Nowhere/Land",
            "--target-minutes",
            "30",
        ],
        &[],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", output_text(&bad));
    assert!(output_text(&bad).contains("time_zone"));

    let (_, rep_id) = t.rep(None).await;
    let id = t.lead("webform", "w-1").await;
    t.process().await;
    assert_eq!(t.stored(id).await.owner_id, Some(rep_id));
    let report = t.app.run_cli(
        &["report", "speed-to-lead", "--window", "7d", "-o", "json"],
        &[],
    );
    assert!(report.status.success(), "{}", output_text(&report));
    let text = String::from_utf8(report.stdout).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&first["group"], &first["leads"], &first["assigned"]),
        (&json!("all"), &json!(1), &json!(1))
    );
}

/// PostgreSQL: first PUTs of one team racing each other are all answered
/// (one creates it, the others replace its settings, none fails) and the
/// team ends with one row whose version counts every PUT.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn first_puts_of_a_team_racing_each_other_all_succeed() {
    let t = Desk::new(Backend::Postgres).await;
    let puts = (0..8).map(|i| {
        let body = json!({"time_zone": "UTC", "work_days": ["mon"], "work_start": "09:00",
                          "work_end": "17:00", "response_target_minutes": 10 + i});
        let admin = t.admin.clone();
        async move {
            admin
                .request(reqwest::Method::PUT, "/api/teams/race")
                .json(&body)
                .await
                .status()
                .as_u16()
        }
    });
    let mut statuses = futures::future::join_all(puts).await;
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 200, 201]);
    let list = t.admin.get("/api/teams").await.expect(200).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["data"][0]["version"], 8);
}
