//! Contacts, companies, deals and lead conversion.

#![allow(clippy::unwrap_used)]

use api::wire::convert::{ConvertIn, ConvertOut};
use api::wire::crm::DealOut;
use api::wire::deals::DealIn;
use domain::auth::Role;
use domain::entities::{
    activity, company, contact, crm_activity, deal, lead, lead_conversion, outbox_event,
};
use domain::lifecycle::deal_stage::DealStage;
use domain::lifecycle::lead_status::LeadStatus;
use leadpipe_tests::client::{Answer, Api};
use leadpipe_tests::{Backend, TestApp, assert_problem, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};

struct Crm {
    app: TestApp,
    intake: Api,
    sales: Api,
}

impl Crm {
    async fn new(backend: Backend) -> Self {
        let app = TestApp::spawn(backend).await;
        let intake = app.api_as(Role::Intake, Some("webform")).await;
        let sales = app.api_as(Role::Sales, None).await;
        Self { app, intake, sales }
    }

    async fn lead(&self, source_ref: &str, email: &str, company: Option<&str>) -> i64 {
        let body = json!({"source": "webform", "source_ref": source_ref, "email": email,
                          "name": format!("Lead {source_ref}"), "company": company});
        self.intake.new_lead(&body).await
    }

    async fn qualified_lead(&self, source_ref: &str, email: &str, company: Option<&str>) -> i64 {
        let id = self.lead(source_ref, email, company).await;
        for to in [LeadStatus::Contacted, LeadStatus::Qualified] {
            assert_eq!(self.sales.move_lead(id, to, None).await.status(), 200);
        }
        id
    }

    async fn crm_activities(&self, subject: &str, id: i64, kind: &str) -> u64 {
        crm_activity::Entity::find()
            .filter(crm_activity::Column::SubjectType.eq(subject))
            .filter(crm_activity::Column::SubjectId.eq(id))
            .filter(crm_activity::Column::Kind.eq(kind))
            .count(&self.app.db)
            .await
            .unwrap()
    }
}

on_both_backends!(
    converting_twice_with_one_key_creates_one_contact_company_and_deal,
    converting_again_with_another_key_is_409_naming_the_conversion,
    converting_a_new_lead_is_409_naming_the_allowed_moves,
    two_leads_of_one_company_share_one_company,
    deal_stages_move_open_to_won_or_lost_only,
    contacts_and_companies_match_instead_of_duplicating,
    lists_filter_and_page_with_cursors,
    only_sales_and_up_convert_and_a_key_is_required,
    concurrent_conversions_with_different_keys_convert_once,
    concurrent_patches_without_if_match_each_get_their_own_version,
    a_caller_without_the_role_is_refused_before_its_body_is_read,
    contacts_companies_and_deals_send_events_with_ids_not_personal_data,
);

async fn converting_twice_with_one_key_creates_one_contact_company_and_deal(backend: Backend) {
    let t = Crm::new(backend).await;
    let id = t
        .qualified_lead("c-1", "Ada@Analytical.example", Some("Analytical Engines"))
        .await;
    let body = ConvertIn {
        deal: Some(DealIn {
            name: Some("Engine No. 2".into()),
            amount_cents: Some(1_250_000),
            currency: Some("gbp".into()),
            owner_id: None,
            contact_id: None,
            company_id: None,
        }),
    };

    let first = t.sales.convert_lead(id, &body).key("convert-1").await;
    assert_eq!(first.status(), 201);
    assert_eq!(first.headers()["idempotent-replayed"], "false");
    assert_eq!(
        first.headers()["location"],
        format!("/api/leads/{id}/conversion").as_str()
    );
    let first_body = first.text().await.unwrap();
    let second = t.sales.convert_lead(id, &body).key("convert-1").await;
    assert_eq!(second.status(), 201);
    assert_eq!(second.headers()["idempotent-replayed"], "true");
    assert_eq!(second.text().await.unwrap(), first_body);

    let ConvertOut {
        converted: out,
        conversion,
    } = serde_json::from_str(&first_body).unwrap();
    let (lead, contact, company) = (out.lead.lead, out.contact, out.company.unwrap());
    let deal = out.deal.unwrap();
    assert_eq!(lead.status, LeadStatus::Converted);
    assert_eq!(lead.version, 4);
    assert_eq!(contact.email.as_deref(), Some("ada@analytical.example"));
    assert_eq!(company.domain.as_deref(), Some("analytical.example"));
    assert_eq!(company.name, "Analytical Engines");
    assert_eq!(deal.stage, DealStage::Open);
    assert_eq!(deal.amount_cents, 1_250_000);
    assert_eq!(deal.currency, "GBP");
    assert_eq!(deal.lead_id, Some(id));
    assert!(out.contact_created);
    let (contact_id, company_id, deal_id) = (
        conversion.contact_id,
        conversion.company_id.unwrap(),
        conversion.deal_id.unwrap(),
    );
    assert_eq!(deal.contact_id, Some(contact_id));
    assert_eq!(deal.company_id, Some(company_id));
    assert_eq!(contact.company_id, Some(company_id));

    assert_eq!(t.app.count(contact::Entity).await, 1);
    assert_eq!(t.app.count(company::Entity).await, 1);
    assert_eq!(t.app.count(deal::Entity).await, 1);
    assert_eq!(t.app.count(lead_conversion::Entity).await, 1);
    let converted_events = outbox_event::Entity::find()
        .filter(outbox_event::Column::EventType.eq("lead.converted"))
        .all(&t.app.db)
        .await
        .unwrap();
    assert_eq!(converted_events.len(), 1);
    assert_eq!(converted_events[0].payload["deal_id"], deal_id);
    assert_eq!(converted_events[0].payload["contact_id"], contact_id);
    let lead_entries = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(id))
        .filter(activity::Column::Kind.eq("converted"))
        .count(&t.app.db)
        .await
        .unwrap();
    assert_eq!(lead_entries, 1);
    for (subject, sid) in [
        ("contact", contact_id),
        ("company", company_id),
        ("deal", deal_id),
    ] {
        assert_eq!(t.crm_activities(subject, sid, "lead_converted").await, 1);
        assert_eq!(t.crm_activities(subject, sid, "created").await, 1);
    }

    // The conversion can be read back, and the deal's timeline through the API.
    let stored: Value = t
        .sales
        .get(&format!("/api/leads/{id}/conversion"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(stored["deal_id"], deal_id);
    let timeline: Value = t
        .sales
        .get(&format!("/api/deals/{deal_id}/activities"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(timeline["data"][0]["kind"], "lead_converted");
}

async fn converting_again_with_another_key_is_409_naming_the_conversion(backend: Backend) {
    let t = Crm::new(backend).await;
    let id = t.qualified_lead("c-2", "grace@navy.example", None).await;
    let first: Value = t
        .sales
        .convert_lead(id, &json!({}))
        .key("k-a")
        .await
        .json()
        .await
        .unwrap();
    assert!(first["deal"].is_null());
    assert_eq!(first["company"]["name"], "navy.example");

    let again = t.sales.convert_lead(id, &json!({})).key("k-b").await;
    let problem = assert_problem(again, 409, "/problems/already-converted").await;
    assert_eq!(problem["conversion"]["lead_id"], id);
    assert_eq!(
        problem["conversion"]["contact_id"],
        first["conversion"]["contact_id"]
    );
    // A 409 outcome is stored like a success: the same key replays it.
    let replay = t.sales.convert_lead(id, &json!({})).key("k-b").await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_problem(replay, 409, "/problems/already-converted").await;
    assert_eq!(t.app.count(contact::Entity).await, 1);
    assert_eq!(t.app.count(lead_conversion::Entity).await, 1);
}

async fn converting_a_new_lead_is_409_naming_the_allowed_moves(backend: Backend) {
    let t = Crm::new(backend).await;
    let id = t.lead("c-3", "new@lead.example", None).await;
    let body = assert_problem(
        t.sales.convert_lead(id, &json!({})).key("k-new").await,
        409,
        "/problems/illegal-transition",
    )
    .await;
    assert_eq!(body["allowed"], json!(["contacted", "lost"]));
    assert_eq!(t.app.count(contact::Entity).await, 0);
    assert_eq!(t.app.count(company::Entity).await, 0);
    let lead = lead::Entity::find_by_id(id)
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((lead.status.as_str(), lead.version), ("new", 1));
    assert_problem(
        t.sales
            .convert_lead(404_404, &json!({}))
            .key("k-missing")
            .await,
        404,
        "/problems/not-found",
    )
    .await;
}

async fn two_leads_of_one_company_share_one_company(backend: Backend) {
    let t = Crm::new(backend).await;
    let a = t
        .qualified_lead("c-4a", "ann@acme.example", Some("ACME"))
        .await;
    let b = t
        .qualified_lead("c-4b", "bob@www.ACME.example", Some("Acme Inc."))
        .await;
    let free_mail = t
        .qualified_lead("c-4c", "carol@gmail.com", Some("Carol Consulting"))
        .await;
    let mut companies = Vec::new();
    for (id, key) in [(a, "k-a"), (b, "k-b"), (free_mail, "k-c")] {
        let out: Value = t
            .sales
            .convert_lead(id, &json!({}))
            .key(key)
            .await
            .json()
            .await
            .unwrap();
        companies.push(out["conversion"]["company_id"].as_i64().unwrap());
    }
    assert_eq!(companies[0], companies[1]);
    assert_ne!(companies[0], companies[2]);
    assert_eq!(t.app.count(company::Entity).await, 2);
    assert_eq!(t.app.count(contact::Entity).await, 3);
    let carol = company::Entity::find_by_id(companies[2])
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        carol.domain, None,
        "free-mail domains are not company domains"
    );
    assert_eq!(carol.name, "Carol Consulting");

    // A contact that already exists is linked, not duplicated.
    let d = t
        .qualified_lead("c-4d", "ANN@acme.example", Some("ACME"))
        .await;
    let out: Value = t
        .sales
        .convert_lead(d, &json!({}))
        .key("k-d")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["contact_created"], false);
    assert_eq!(t.app.count(contact::Entity).await, 3);
}

async fn deal_stages_move_open_to_won_or_lost_only(backend: Backend) {
    let t = Crm::new(backend).await;
    let body = json!({"name": "Support plan", "amount_cents": 9_900, "currency": "EUR"});
    assert_problem(
        t.sales.create_crm("deals", &body).await,
        400,
        "/problems/idempotency-key-missing",
    )
    .await;
    let created = t.sales.create_crm("deals", &body).key("deal-1").await;
    assert_eq!(created.status(), 201);
    assert_eq!(created.headers()["etag"], "\"1\"");
    let deal: DealOut = created.expect_json(201).await;
    let id = deal.id;
    assert_eq!(deal.stage, DealStage::Open);
    assert!(deal.owner_id.is_some(), "a sales caller owns the deal");

    let stale = t
        .sales
        .move_deal(id, DealStage::Won, None)
        .if_match(7)
        .await;
    let problem = assert_problem(stale, 412, "/problems/precondition-failed").await;
    assert_eq!(problem["current_version"], 1);
    // A deal's problem speaks of the record, not of a lead.
    assert_eq!(
        problem["detail"],
        "this record is at version 1; fetch it again and retry with its ETag"
    );

    let won: DealOut = t
        .sales
        .move_deal(id, DealStage::Won, None)
        .await
        .expect_json(200)
        .await;
    assert_eq!((won.stage, won.version), (DealStage::Won, 2));
    assert!(won.closed_at.is_some());
    let body = assert_problem(
        t.sales.move_deal(id, DealStage::Lost, None).await,
        409,
        "/problems/illegal-transition",
    )
    .await;
    assert_eq!(body["allowed"], json!([]));
    assert_problem(
        t.sales.move_deal(id, "pending", None).await,
        422,
        "/problems/validation",
    )
    .await;

    let other: DealOut = t
        .sales
        .create_crm(
            "deals",
            &json!({"name": "Lost one", "amount_cents": 1, "currency": "USD"}),
        )
        .key("deal-2")
        .await
        .json()
        .await
        .unwrap();
    let other_id = other.id;
    assert_problem(
        t.sales.move_deal(other_id, DealStage::Open, None).await,
        409,
        "/problems/illegal-transition",
    )
    .await;
    let lost: DealOut = t
        .sales
        .move_deal(other_id, DealStage::Lost, Some("budget cut"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(lost.lost_reason.as_deref(), Some("budget cut"));

    let bad = t
        .sales
        .create_crm(
            "deals",
            &json!({"name": "x", "amount_cents": -1, "currency": "EURO"}),
        )
        .key("deal-3")
        .await;
    let problem = assert_problem(bad, 422, "/problems/validation").await;
    assert!(
        problem["errors"][0]["field"] == "amount_cents"
            || problem["errors"][0]["field"] == "currency"
    );
    let stage_events = outbox_event::Entity::find()
        .filter(outbox_event::Column::EventType.eq("deal.stage_changed"))
        .count(&t.app.db)
        .await
        .unwrap();
    assert_eq!(stage_events, 2);

    // PATCH honours If-Match; an owner must be an active sales principal.
    let ops = t.app.api_as(Role::Ops, None).await;
    let patch = ops
        .patch_crm("deals", id, &json!({"amount_cents": 12_000}))
        .if_match(2)
        .await;
    assert_eq!(patch.status(), 200);
    assert_eq!(patch.headers()["etag"], "\"3\"");
    let not_sales = ops.patch_crm("deals", id, &json!({"owner_id": 999})).await;
    assert_problem(not_sales, 422, "/problems/validation").await;
}

async fn contacts_and_companies_match_instead_of_duplicating(backend: Backend) {
    let t = Crm::new(backend).await;
    let first = t
        .sales
        .create_crm(
            "companies",
            &json!({"name": "Acme", "website": "https://www.Acme.example/about"}),
        )
        .await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    assert_eq!(
        (first["domain"].clone(), first["outcome"].clone()),
        (json!("acme.example"), json!("created"))
    );
    let again = t
        .sales
        .create_crm(
            "companies",
            &json!({"name": "ACME Corporation", "domain": "acme.example"}),
        )
        .await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["outcome"], "matched");
    let by_name = t
        .sales
        .create_crm("companies", &json!({"name": "  Blue   Sky "}))
        .await;
    assert_eq!(by_name.status(), 201);
    let by_name_again = t
        .sales
        .create_crm("companies", &json!({"name": "blue sky"}))
        .await;
    assert_eq!(by_name_again.status(), 200);
    assert_eq!(t.app.count(company::Entity).await, 2);

    let company_id = first["id"].as_i64().unwrap();
    let contact = t
        .sales
        .create_crm(
            "contacts",
            &json!({"email": "Zed@Acme.example", "name": "Zed", "company_id": company_id}),
        )
        .await;
    assert_eq!(contact.status(), 201);
    let contact: Value = contact.json().await.unwrap();
    let matched = t
        .sales
        .create_crm("contacts", &json!({"email": "zed@acme.example"}))
        .await;
    assert_eq!(matched.status(), 200);
    assert_eq!(matched.json::<Value>().await.unwrap()["id"], contact["id"]);
    assert_problem(
        t.sales
            .create_crm("contacts", &json!({"name": "No Mail"}))
            .await,
        400,
        "/problems/idempotency-key-missing",
    )
    .await;
    assert_eq!(
        t.sales
            .create_crm("contacts", &json!({"name": "No Mail"}))
            .key("nm-1")
            .await
            .status(),
        201
    );
    assert_problem(
        t.sales
            .create_crm("contacts", &json!({"email": "zed", "company_id": 1}))
            .await,
        422,
        "/problems/validation",
    )
    .await;

    let contact_id = contact["id"].as_i64().unwrap();
    let get = t.sales.get(&format!("/api/contacts/{contact_id}")).await;
    assert_eq!(get.headers()["etag"], "\"1\"");
    let patched = t
        .sales
        .patch_crm(
            "contacts",
            contact_id,
            &json!({"phone": "+44 20 7946 0000", "name": null}),
        )
        .if_match(1)
        .await;
    assert_eq!(patched.status(), 200);
    let patched: Value = patched.json().await.unwrap();
    assert_eq!(patched["phone"], "+442079460000");
    assert!(patched["name"].is_null());
    assert_problem(
        t.sales
            .patch_crm("contacts", contact_id, &json!({"name": "Z"}))
            .if_match(1)
            .await,
        412,
        "/problems/precondition-failed",
    )
    .await;
    // Another contact may not take an email that is already someone's.
    let other = t
        .sales
        .create_crm("contacts", &json!({"email": "yan@acme.example"}))
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_problem(
        t.sales
            .patch_crm(
                "contacts",
                other["id"].as_i64().unwrap(),
                &json!({"email": "ZED@acme.example"}),
            )
            .await,
        409,
        "/problems/conflict",
    )
    .await;
}

async fn lists_filter_and_page_with_cursors(backend: Backend) {
    let t = Crm::new(backend).await;
    for i in 0..5 {
        let r = t
            .sales
            .create_crm(
                "contacts",
                &json!({"email": format!("p{i}@page.example"), "name": format!("Person {i}")}),
            )
            .await;
        assert_eq!(r.status(), 201);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(c) => format!("/api/contacts?limit=2&sort=created_at&cursor={c}"),
            None => "/api/contacts?limit=2&sort=created_at".to_owned(),
        };
        let page: Value = t.sales.get(&query).await.json().await.unwrap();
        for row in page["data"].as_array().unwrap() {
            seen.push(row["email"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(
        seen,
        ["p4", "p3", "p2", "p1", "p0"].map(|p| format!("{p}@page.example"))
    );
    let found: Value = t
        .sales
        .get("/api/contacts?q=PERSON%203")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(found["data"].as_array().unwrap().len(), 1);
    let bad = t.sales.get("/api/contacts?cursor=garbage").await;
    assert_problem(bad, 422, "/problems/validation").await;
    let bad = t.sales.get("/api/deals?stage=pending").await;
    assert_problem(bad, 422, "/problems/validation").await;
    let open: Value = t
        .sales
        .get("/api/deals?stage=open&owner=me")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(open["data"], json!([]));
}

async fn only_sales_and_up_convert_and_a_key_is_required(backend: Backend) {
    let t = Crm::new(backend).await;
    let id = t.qualified_lead("c-9", "x@roles.example", None).await;
    let intake = t.intake.convert_lead(id, &json!({})).key("k-i").await;
    assert_problem(intake, 403, "/problems/forbidden").await;
    assert_problem(
        t.sales.convert_lead(id, &json!({})).await,
        400,
        "/problems/idempotency-key-missing",
    )
    .await;
    let unauthenticated = t
        .app
        .client
        .post(t.app.url("/api/contacts"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_problem(unauthenticated, 401, "/problems/unauthorized").await;
    assert_problem(
        t.intake.get("/api/companies").await,
        403,
        "/problems/forbidden",
    )
    .await;
    // An admin converting a lead nobody owns must name the deal's owner.
    let admin = t.app.api_as(Role::Admin, None).await;
    let no_owner = admin
        .convert_lead(
            id,
            &json!({"deal": {"name": "D", "amount_cents": 5, "currency": "EUR"}}),
        )
        .key("k-admin")
        .await;
    let problem = assert_problem(no_owner, 422, "/problems/validation").await;
    assert_eq!(problem["errors"][0]["field"], "deal.owner_id");
    assert_eq!(t.app.count(contact::Entity).await, 0, "rolled back");
}

async fn concurrent_conversions_with_different_keys_convert_once(backend: Backend) {
    let t = Crm::new(backend).await;
    let id = t
        .qualified_lead("c-10", "race@together.example", Some("Together"))
        .await;
    let body = json!({"deal": {"name": "Race", "amount_cents": 100, "currency": "EUR"}});
    let keys: Vec<String> = (0..8).map(|i| format!("race-{i}")).collect();
    let responses = futures::future::join_all(
        keys.iter()
            .map(|key| t.sales.convert_lead(id, &body).key(key)),
    )
    .await;
    let mut statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409, 409, 409, 409, 409, 409, 409]);
    for response in responses {
        if response.status() == 409 {
            let problem: Value = response.json().await.unwrap();
            assert_eq!(problem["type"], "/problems/already-converted", "{problem}");
        }
    }
    assert_eq!(t.app.count(lead_conversion::Entity).await, 1);
    assert_eq!(t.app.count(deal::Entity).await, 1);
    assert_eq!(t.app.count(contact::Entity).await, 1);
    assert_eq!(t.app.count(company::Entity).await, 1);
}

/// Without `If-Match` a PATCH re-reads and retries when it loses the
/// compare-and-set: every `200` is its own version, none overwrites another
/// unseen, and each has its timeline row; a writer that keeps losing gets `412`.
async fn concurrent_patches_without_if_match_each_get_their_own_version(backend: Backend) {
    let t = Crm::new(backend).await;
    let created = t
        .sales
        .create_crm("contacts", &json!({"email": "race@patch.example"}))
        .await;
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    let bodies: Vec<Value> = (0..8)
        .map(|i| json!({"name": format!("Name {i}")}))
        .collect();
    let responses = futures::future::join_all(
        bodies
            .iter()
            .map(|body| t.sales.patch_crm("contacts", id, body)),
    )
    .await;
    let mut versions = Vec::new();
    for response in responses {
        match response.status().as_u16() {
            200 => {
                let body: Value = response.json().await.unwrap();
                versions.push(body["version"].as_i64().unwrap());
            }
            412 => {
                assert_problem(response, 412, "/problems/precondition-failed").await;
            }
            other => panic!("unexpected {other}"),
        }
    }
    versions.sort_unstable();
    let expected: Vec<i64> = (2..2 + versions.len() as i64).collect();
    assert_eq!(versions, expected, "one version per successful PATCH");
    let stored = contact::Entity::find_by_id(id)
        .one(&t.app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.version, 1 + versions.len() as i64);
    let mut logged: Vec<i64> = crm_activity::Entity::find()
        .filter(crm_activity::Column::SubjectType.eq("contact"))
        .filter(crm_activity::Column::SubjectId.eq(id))
        .filter(crm_activity::Column::Kind.eq("updated"))
        .all(&t.app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.detail.unwrap()["version"].as_i64().unwrap())
        .collect();
    logged.sort_unstable();
    assert_eq!(
        logged, versions,
        "one timeline row per write, with its version"
    );
}

/// Roles are checked before the body is read or parsed: a caller without
/// the role learns nothing about what it sent (no 415, 400 or 422).
async fn a_caller_without_the_role_is_refused_before_its_body_is_read(backend: Backend) {
    let t = Crm::new(backend).await;
    for (method, path) in [
        (reqwest::Method::POST, "/api/companies"),
        (reqwest::Method::PATCH, "/api/contacts/1"),
        (reqwest::Method::POST, "/api/deals/1/transitions"),
        (reqwest::Method::POST, "/api/leads/1/notes"),
    ] {
        let refused = t
            .intake
            .request(method.clone(), path)
            .body("text/plain", "{not json")
            .await;
        assert_problem(refused, 403, "/problems/forbidden").await;
        let malformed = t
            .sales
            .request(method, path)
            .body("application/json", "{not json")
            .key("k-malformed")
            .await;
        assert_problem(malformed, 400, "/problems/malformed-body").await;
    }
}

/// The CRM events of one kind or another, oldest first: (type, lead, data).
async fn crm_events(t: &Crm) -> Vec<(String, Option<i64>, Value)> {
    use sea_orm::{ExprTrait, QueryOrder};
    outbox_event::Entity::find()
        .filter(
            outbox_event::Column::EventType
                .like("contact.%")
                .or(outbox_event::Column::EventType.like("company.%"))
                .or(outbox_event::Column::EventType.eq("deal.created")),
        )
        .order_by_asc(outbox_event::Column::Id)
        .all(&t.app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.event_type, e.lead_id, e.payload))
        .collect()
}

async fn contacts_companies_and_deals_send_events_with_ids_not_personal_data(backend: Backend) {
    let t = Crm::new(backend).await;
    let company: Value = t
        .sales
        .create_crm(
            "companies",
            &json!({"name": "Acme", "domain": "acme.example"}),
        )
        .await
        .expect(201)
        .await;
    let company_id = company["id"].as_i64().unwrap();
    // A match creates nothing, so it sends nothing.
    t.sales
        .create_crm(
            "companies",
            &json!({"name": "ACME", "domain": "acme.example"}),
        )
        .await
        .expect(200)
        .await;
    let contact: Value = t
        .sales
        .create_crm(
            "contacts",
            &json!({"email": "zed@acme.example", "name": "Zed", "company_id": company_id}),
        )
        .await
        .expect(201)
        .await;
    let contact_id = contact["id"].as_i64().unwrap();
    let deal: Value = t
        .sales
        .create_crm(
            "deals",
            &json!({"name": "Acme: 40 vans", "amount_cents": 480_000, "currency": "EUR",
                    "contact_id": contact_id, "company_id": company_id}),
        )
        .key("deal-events-1")
        .await
        .expect(201)
        .await;
    let deal_id = deal["id"].as_i64().unwrap();
    t.sales
        .patch_crm(
            "contacts",
            contact_id,
            &json!({"name": "Zed Shaw", "phone": "+4930111"}),
        )
        .await
        .expect(200)
        .await;
    t.sales
        .patch_crm("companies", company_id, &json!({"name": "Acme GmbH"}))
        .await
        .expect(200)
        .await;

    let events = crm_events(&t).await;
    let types: Vec<&str> = events.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "company.created",
            "contact.created",
            "deal.created",
            "contact.updated",
            "company.updated"
        ]
    );
    assert_eq!(events[0].2, json!({"company_id": company_id, "version": 1}));
    assert_eq!(
        events[1].2,
        json!({"contact_id": contact_id, "company_id": company_id, "version": 1})
    );
    assert_eq!(
        events[2].2,
        json!({"deal_id": deal_id, "stage": "open", "amount_cents": 480_000, "currency": "EUR",
               "owner_id": deal["owner_id"], "contact_id": contact_id, "company_id": company_id,
               "lead_id": null, "version": 1})
    );
    assert_eq!(
        events[3].2,
        json!({"contact_id": contact_id, "fields": ["name", "phone"], "version": 2})
    );
    assert_eq!(
        events[4].2,
        json!({"company_id": company_id, "fields": ["name"], "version": 2})
    );
    let all = serde_json::to_string(&events).unwrap();
    for private in ["Zed", "zed@acme.example", "Acme", "40 vans", "+4930111"] {
        assert!(!all.contains(private), "{private} in an event: {all}");
    }

    // A conversion's deal is on its lead's stream.
    let lead = t.qualified_lead("e-1", "ada@engines.example", None).await;
    t.sales
        .convert_lead(
            lead,
            &json!({"deal": {"name": "Engine", "amount_cents": 100, "currency": "EUR"}}),
        )
        .key("convert-events-1")
        .await
        .expect(201)
        .await;
    let events = crm_events(&t).await;
    let (kind, lead_id, data) = events.last().unwrap();
    assert_eq!((kind.as_str(), *lead_id), ("deal.created", Some(lead)));
    assert_eq!(data["lead_id"], lead);

    // Listed, and a subscription may name them.
    let admin = t.app.api_as(Role::Admin, None).await;
    let listed = admin.get("/api/event-types").await.expect(200).await;
    let names: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let crm = [
        "contact.created",
        "contact.updated",
        "company.created",
        "company.updated",
        "deal.created",
        "deal.stage_changed",
    ];
    for name in crm {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    admin
        .new_subscription("https://crm.example.com/hooks", json!(crm))
        .await;
}
