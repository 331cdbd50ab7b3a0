//! Follow-up tasks on leads, contacts and deals.

#![allow(clippy::unwrap_used)]

use api::wire::tasks::TaskOut;
use chrono::{DateTime, Duration, Utc};
use domain::auth::Role;
use domain::entities::{activity, crm_activity, outbox_event, task};
use domain::lifecycle::task::TaskStatus;
use leadpipe_tests::cli::output_text;
use leadpipe_tests::client::{Answer, Api};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

struct Desk {
    app: TestApp,
    intake: Api,
    sales: Api,
    sales_id: i64,
}

impl Desk {
    async fn new(backend: Backend) -> Self {
        let app = TestApp::spawn(backend).await;
        let intake = app.api_as(Role::Intake, Some("webform")).await;
        let sales = app.api_as(Role::Sales, None).await;
        let me = sales.get("/api/me").await.expect(200).await;
        let sales_id = me["id"].as_i64().unwrap();
        Self {
            app,
            intake,
            sales,
            sales_id,
        }
    }

    async fn lead(&self, source_ref: &str) -> i64 {
        let body = json!({"source": "webform", "source_ref": source_ref,
                          "email": format!("{source_ref}@example.com"), "name": "Grace Hopper"});
        self.intake.new_lead(&body).await
    }

    async fn task(&self, key: &str, body: &Value) -> TaskOut {
        self.sales
            .post("/api/tasks", body)
            .key(key)
            .await
            .expect_json(201)
            .await
    }

    async fn ids(&self, query: &str) -> Vec<i64> {
        let page = self
            .sales
            .get(&format!("/api/tasks{query}"))
            .await
            .expect(200)
            .await;
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    }

    async fn events(&self, event_type: &str) -> Vec<outbox_event::Model> {
        outbox_event::Entity::find()
            .filter(outbox_event::Column::EventType.eq(event_type))
            .order_by_asc(outbox_event::Column::Id)
            .all(&self.app.db)
            .await
            .unwrap()
    }
}

/// The start of tomorrow, UTC.
fn end_of_today() -> DateTime<Utc> {
    end_of_day_at(0)
}

/// The start of tomorrow at `offset` seconds east of UTC, as a UTC time.
fn end_of_day_at(offset: i64) -> DateTime<Utc> {
    let local = (Utc::now() + Duration::seconds(offset)).date_naive() + Duration::days(1);
    local.and_hms_opt(0, 0, 0).unwrap().and_utc() - Duration::seconds(offset)
}

on_both_backends!(
    a_task_is_created_once_per_key_with_its_timeline_and_event,
    due_lists_split_a_reps_day_and_page_soonest_first,
    completing_a_task_records_who_and_when_and_sends_task_completed,
    tasks_on_contacts_and_deals_land_on_their_timelines,
    refused_tasks_name_the_field_and_store_nothing,
    erasing_a_lead_erases_its_tasks_and_their_events,
    the_cli_lists_overdue_tasks_as_the_api_does,
);

async fn a_task_is_created_once_per_key_with_its_timeline_and_event(backend: Backend) {
    let t = Desk::new(backend).await;
    let lead_id = t.lead("t-1").await;
    let due = Utc::now() + Duration::hours(2);
    let body = json!({"subject_type": "lead", "subject_id": lead_id,
                      "title": "  Call back about the quote ", "due_at": due});

    assert_problem(
        t.sales.post("/api/tasks", &body).await,
        400,
        "/problems/idempotency-key-missing",
    )
    .await;
    let first = t.sales.post("/api/tasks", &body).key("task-1").await;
    assert_eq!(first.status(), 201);
    let location = first.headers()["location"].to_str().unwrap().to_owned();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let first_body = first.text().await.unwrap();
    let again = t.sales.post("/api/tasks", &body).key("task-1").await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.text().await.unwrap(), first_body);

    let created: TaskOut = serde_json::from_str(&first_body).unwrap();
    assert_eq!(location, format!("/api/tasks/{}", created.id));
    assert_eq!(etag, "\"1\"");
    assert_eq!(created.title, "Call back about the quote");
    assert_eq!(created.owner_id, t.sales_id, "a sales caller owns its task");
    assert_eq!(created.created_by, Some(t.sales_id));
    assert_eq!(created.status, TaskStatus::Open);
    assert_eq!(created.due_at.timestamp(), due.timestamp());
    assert_eq!(task::Entity::find().count(&t.app.db).await.unwrap(), 1);

    let got: TaskOut = t.sales.get(&location).await.expect_json(200).await;
    assert_eq!(got.id, created.id);

    let timeline = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(lead_id))
        .filter(activity::Column::Kind.eq("task_created"))
        .all(&t.app.db)
        .await
        .unwrap();
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].author_id, Some(t.sales_id));

    let events = t.events("task.created").await;
    assert_eq!(
        events.len(),
        1,
        "one event for one task, however often it is sent"
    );
    assert_eq!(
        events[0].lead_id,
        Some(lead_id),
        "in order with the lead's events"
    );
    let data = &events[0].payload;
    assert_eq!(data["task_id"], created.id);
    assert_eq!(data["subject_type"], "lead");
    assert_eq!(data["owner_id"], t.sales_id);
    assert!(
        data.get("title").is_none(),
        "free text stays out of events: {data}"
    );
    let admin = t.app.api_as(Role::Admin, None).await;
    let types = admin.get("/api/event-types").await.expect(200).await;
    let names: Vec<&str> = types["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"task.created") && names.contains(&"task.completed"));
}

async fn due_lists_split_a_reps_day_and_page_soonest_first(backend: Backend) {
    let t = Desk::new(backend).await;
    let lead_id = t.lead("t-2").await;
    let other = t.app.api_as(Role::Sales, None).await;
    let new = |title: &str, due: DateTime<Utc>| json!({"subject_type": "lead", "subject_id": lead_id, "title": title, "due_at": due});
    let end = end_of_today();
    let later_today = t
        .task("k-today", &new("later today", end - Duration::seconds(1)))
        .await;
    let overdue = t
        .task(
            "k-late",
            &new("two days late", Utc::now() - Duration::days(2)),
        )
        .await;
    let upcoming = t
        .task("k-soon", &new("tomorrow", end + Duration::hours(10)))
        .await;
    let done = t
        .task("k-done", &new("done already", end - Duration::seconds(2)))
        .await;
    t.sales
        .patch(
            &format!("/api/tasks/{}", done.id),
            &json!({"status": "done"}),
        )
        .await
        .expect(200)
        .await;
    let theirs: TaskOut = other
        .post(
            "/api/tasks",
            &new("someone else's", end - Duration::seconds(3)),
        )
        .key("k-theirs")
        .await
        .expect_json(201)
        .await;

    assert_eq!(t.ids("?owner=me&due=today").await, vec![later_today.id]);
    assert_eq!(t.ids("?owner=me&due=overdue").await, vec![overdue.id]);
    assert_eq!(t.ids("?owner=me&due=upcoming").await, vec![upcoming.id]);
    assert_eq!(t.ids("?owner=me&status=done").await, vec![done.id]);
    assert_eq!(
        t.ids("?due=today").await,
        vec![theirs.id, later_today.id],
        "without an owner: everyone's, soonest due first"
    );
    // Soonest due first, a page at a time.
    let all = vec![overdue.id, theirs.id, done.id, later_today.id, upcoming.id];
    assert_eq!(t.ids("?limit=200").await, all);
    let first = t.sales.get("/api/tasks?limit=2").await.expect(200).await;
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    assert_eq!(first["data"].as_array().unwrap().len(), 2);
    let rest = t.ids(&format!("?limit=2&cursor={cursor}")).await;
    assert_eq!(rest, all[2..4].to_vec());
    assert_eq!(t.ids(&format!("?lead_id={lead_id}&limit=200")).await, all);

    // A caller 14 hours ahead of UTC has another day: a task due in it, but
    // not in today's UTC day, is today only when the caller says so.
    let ahead = end_of_day_at(14 * 3600);
    let due = if ahead < end {
        ahead - Duration::hours(20)
    } else {
        ahead - Duration::hours(1)
    };
    let far_east: TaskOut = other
        .post("/api/tasks", &new("Kiribati morning call", due))
        .key("k-east")
        .await
        .expect_json(201)
        .await;
    let ids = |page: Value| -> Vec<i64> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    let utc_day = other
        .get("/api/tasks?owner=me&due=today")
        .await
        .expect(200)
        .await;
    assert!(!ids(utc_day).contains(&far_east.id));
    let their_day = other
        .get("/api/tasks?owner=me&due=today&utc_offset=%2B14:00")
        .await
        .expect(200)
        .await;
    assert!(ids(their_day).contains(&far_east.id));

    for (query, field) in [
        ("?due=soon", "due"),
        ("?status=closed", "status"),
        ("?utc_offset=Europe/Berlin", "utc_offset"),
        ("?owner=someone", "owner"),
        ("?cursor=not-ours", "cursor"),
        ("?lead_id=1&deal_id=2", "lead_id"),
        ("?due=today&status=done", "status"),
    ] {
        let problem = assert_problem(
            t.sales.get(&format!("/api/tasks{query}")).await,
            422,
            "/problems/validation",
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], field, "{query}: {problem}");
    }
}

async fn completing_a_task_records_who_and_when_and_sends_task_completed(backend: Backend) {
    let t = Desk::new(backend).await;
    let lead_id = t.lead("t-3").await;
    let created = t
        .task(
            "k-1",
            &json!({"subject_type": "lead", "subject_id": lead_id, "title": "Send the brochure",
                    "due_at": Utc::now() + Duration::days(1)}),
        )
        .await;
    let path = format!("/api/tasks/{}", created.id);

    assert_problem(
        t.sales
            .patch(&path, &json!({"status": "done"}))
            .if_match(7)
            .await,
        412,
        "/problems/precondition-failed",
    )
    .await;
    let done: TaskOut = t
        .sales
        .patch(&path, &json!({"status": "done"}))
        .if_match(1)
        .await
        .expect_json(200)
        .await;
    assert_eq!(done.status, TaskStatus::Done);
    assert_eq!(done.version, 2);
    assert_eq!(done.completed_by, Some(t.sales_id));
    assert!(done.completed_at.is_some());
    // Done again changes nothing: no new version, no second event.
    let again: TaskOut = t
        .sales
        .patch(&path, &json!({"status": "done"}))
        .await
        .expect_json(200)
        .await;
    assert_eq!(again.version, 2);
    let events = t.events("task.completed").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].lead_id, Some(lead_id));
    assert_eq!(events[0].payload["completed_by"], t.sales_id);
    let kinds: Vec<String> = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(lead_id))
        .order_by_asc(activity::Column::Id)
        .all(&t.app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.kind)
        .collect();
    assert!(
        kinds.ends_with(&["task_created".into(), "task_completed".into()]),
        "{kinds:?}"
    );

    let reopened: TaskOut = t
        .sales
        .patch(
            &path,
            &json!({"status": "open", "title": "Send the new brochure",
                              "description": "the 2027 one"}),
        )
        .await
        .expect_json(200)
        .await;
    assert_eq!(reopened.status, TaskStatus::Open);
    assert_eq!(reopened.completed_at, None);
    assert_eq!(reopened.completed_by, None);
    assert_eq!(reopened.title, "Send the new brochure");
    assert_eq!(reopened.description.as_deref(), Some("the 2027 one"));
    let cleared: TaskOut = t
        .sales
        .patch(&path, &json!({"description": null}))
        .await
        .expect_json(200)
        .await;
    assert_eq!(cleared.description, None);
    assert_eq!(t.events("task.completed").await.len(), 1);
}

async fn tasks_on_contacts_and_deals_land_on_their_timelines(backend: Backend) {
    let t = Desk::new(backend).await;
    let contact = t
        .sales
        .post(
            "/api/contacts",
            &json!({"email": "ada@example.com", "name": "Ada"}),
        )
        .key("c-1")
        .await
        .expect(201)
        .await;
    let deal = t
        .sales
        .post(
            "/api/deals",
            &json!({"name": "Engine", "amount_cents": 100, "currency": "EUR"}),
        )
        .key("d-1")
        .await
        .expect(201)
        .await;
    let due = Utc::now() + Duration::days(3);
    for (kind, id) in [("contact", &contact["id"]), ("deal", &deal["id"])] {
        let id = id.as_i64().unwrap();
        let created = t
            .task(
                &format!("k-{kind}"),
                &json!({"subject_type": kind, "subject_id": id, "title": "Follow up", "due_at": due}),
            )
            .await;
        t.sales
            .patch(
                &format!("/api/tasks/{}", created.id),
                &json!({"status": "done"}),
            )
            .await
            .expect(200)
            .await;
        let kinds: Vec<String> = crm_activity::Entity::find()
            .filter(crm_activity::Column::SubjectType.eq(kind))
            .filter(crm_activity::Column::SubjectId.eq(id))
            .order_by_asc(crm_activity::Column::Id)
            .all(&t.app.db)
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.kind)
            .collect();
        assert!(
            kinds.ends_with(&["task_created".into(), "task_completed".into()]),
            "{kind}: {kinds:?}"
        );
        let query = format!("?{kind}_id={id}");
        assert_eq!(t.ids(&query).await, vec![created.id]);
    }
}

async fn refused_tasks_name_the_field_and_store_nothing(backend: Backend) {
    let t = Desk::new(backend).await;
    let lead_id = t.lead("t-5").await;
    let ops = t.app.api_as(Role::Ops, None).await;
    let due = Utc::now() + Duration::days(1);
    let cases = [
        (
            &t.sales,
            json!({"subject_type": "lead", "subject_id": lead_id + 1000, "title": "x", "due_at": due}),
            "subject_id",
        ),
        (
            &t.sales,
            json!({"subject_type": "lead", "subject_id": lead_id, "title": "   ", "due_at": due}),
            "title",
        ),
        (
            &ops,
            json!({"subject_type": "lead", "subject_id": lead_id, "title": "x", "due_at": due}),
            "owner_id",
        ),
        // A careless sender's date: before year 1.
        (
            &t.sales,
            json!({"subject_type": "lead", "subject_id": lead_id, "title": "x",
                   "due_at": "-0001-06-01T00:00:00Z"}),
            "due_at",
        ),
    ];
    for (i, (api, body, field)) in cases.iter().enumerate() {
        let problem = assert_problem(
            api.post("/api/tasks", body).key(&format!("bad-{i}")).await,
            422,
            "/problems/validation",
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], *field, "{problem}");
    }
    // An ops principal may not own one either.
    let me = ops.get("/api/me").await.expect(200).await;
    let body = json!({"subject_type": "lead", "subject_id": lead_id, "title": "x",
                      "due_at": due, "owner_id": me["id"]});
    let problem = assert_problem(
        ops.post("/api/tasks", &body).key("bad-owner").await,
        422,
        "/problems/validation",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "owner_id");
    // A body that is not a task at all.
    let problem = assert_problem(
        t.sales
            .post(
                "/api/tasks",
                &json!({"subject_type": "invoice", "subject_id": 1}),
            )
            .key("bad-shape")
            .await,
        422,
        "/problems/validation",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "subject_type", "{problem}");
    assert_eq!(task::Entity::find().count(&t.app.db).await.unwrap(), 0);
    assert!(t.events("task.created").await.is_empty());
}

async fn erasing_a_lead_erases_its_tasks_and_their_events(backend: Backend) {
    let t = Desk::new(backend).await;
    let lead_id = t.lead("t-6").await;
    let kept = t.lead("t-7").await;
    let mut erased_tasks = Vec::new();
    let due = Utc::now();
    let body = |subject: i64| {
        json!({"subject_type": "lead", "subject_id": subject,
               "title": "Ask Grace about the invoice", "due_at": due})
    };
    for (key, subject) in [("e-1", lead_id), ("e-2", lead_id), ("e-3", kept)] {
        let created = t.task(key, &body(subject)).await;
        if subject == lead_id {
            erased_tasks.push(created.id);
        }
    }
    t.sales
        .patch(
            &format!("/api/tasks/{}", erased_tasks[0]),
            &json!({"status": "done"}),
        )
        .await
        .expect(200)
        .await;
    let admin = t.app.api_as(Role::Admin, None).await;
    let erasure = admin
        .erase_lead(lead_id, "?reason=subject%20request")
        .await
        .expect(200)
        .await;
    assert_eq!(erasure["erasure"]["counts"]["task"], 2, "{erasure}");

    for id in &erased_tasks {
        assert_problem(
            t.sales.get(&format!("/api/tasks/{id}")).await,
            404,
            "/problems/not-found",
        )
        .await;
    }
    let left: Vec<i64> = task::Entity::find()
        .all(&t.app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|task| task.subject_id)
        .collect();
    assert_eq!(left, vec![kept]);
    let events = t.events("task.created").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].lead_id, Some(kept));
    assert!(t.events("task.completed").await.is_empty());
    // The stored reply of the erased lead's task went with it: the same key
    // and body are asked again, and find no lead.
    let replay = t.sales.post("/api/tasks", &body(lead_id)).key("e-1").await;
    let problem = assert_problem(replay, 422, "/problems/validation").await;
    assert_eq!(problem["errors"][0]["field"], "subject_id");
}

async fn the_cli_lists_overdue_tasks_as_the_api_does(backend: Backend) {
    let t = Desk::new(backend).await;
    let lead_id = t.lead("t-8").await;
    let new = |title: &str, due: DateTime<Utc>| json!({"subject_type": "lead", "subject_id": lead_id, "title": title, "due_at": due});
    let late = t
        .task("k-late", &new("Late\tone", Utc::now() - Duration::hours(3)))
        .await;
    t.task("k-later", &new("Not yet", Utc::now() + Duration::days(3)))
        .await;

    let owner = t.sales_id.to_string();
    let args = [
        "task", "list", "--due", "overdue", "--owner", &owner, "-o", "json",
    ];
    let output = t.app.run_cli(&args, &[]);
    let text = output_text(&output);
    assert!(output.status.success(), "{text}");
    let rows: Vec<TaskOut> = String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0].id, late.id);
    assert_eq!(
        t.ids(&format!("?due=overdue&owner={owner}")).await,
        vec![late.id]
    );

    let table = t.app.run_cli(&["task", "list", "--status", "open"], &[]);
    let text = output_text(&table);
    assert!(table.status.success(), "{text}");
    assert!(
        text.contains("Late one") && text.contains("Not yet"),
        "{text}"
    );

    let refused = t.app.run_cli(&["task", "list", "--due", "soon"], &[]);
    assert!(!refused.status.success());
    assert!(output_text(&refused).contains("soon"));
}
