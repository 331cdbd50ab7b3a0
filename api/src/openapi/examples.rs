//! The example answers `/docs` shows, one story throughout: Ada Lovelace
//! fills in the web form (lead 118), Alice Martin (principal 7, sales) calls
//! her back, a partner CRM sends her again (lead 131), and she becomes
//! contact 31 of company 12 with deal 45. Shapes many operations share are
//! built once here and named from `#[utoipa::path]` (`example =
//! json!(examples::lead())`); `with` varies one for a particular answer.
//! The `openapi` tests check that each fits its schema.

use serde_json::{Value, json};

/// `base` with the top-level fields of `changes` set over it.
pub fn with(mut base: Value, changes: Value) -> Value {
    if let (Some(fields), Value::Object(changes)) = (base.as_object_mut(), changes) {
        fields.extend(changes);
    }
    base
}

/// A page of a list: `data` and the cursor of the next page.
fn page(data: Value, next_cursor: &str) -> Value {
    json!({"data": data, "next_cursor": next_cursor})
}

// Cursors as the API makes them: base64url JSON of the last row's sort key
// and id (`{"s":"updated_at","t":"2026-11-30T10:28:05Z","i":118}`), of its
// id alone for timelines (`{"i":2317}`), the plain id for the ops lists.
const LEAD_CURSOR: &str = "eyJzIjoidXBkYXRlZF9hdCIsInQiOiIyMDI2LTExLTMwVDEwOjI4OjA1WiIsImkiOjExOH0";
const TIMELINE_CURSOR: &str = "eyJpIjoyMzE3fQ";

// Correlation ids: the request's `X-Request-Id`, by default a UUIDv7.
const INTAKE_REQUEST: &str = "01a22bf3687071e8ac476cfa9054f316";
const CALL_REQUEST: &str = "01a22bfefd487c52a2be26ae75f0f666";
const TRANSITION_REQUEST: &str = "01a22bff5b087f66a04e9773276de04e";
const WEBHOOK_REQUEST: &str = "01a230a01fd07b21a93c6d0e8f5b2c71";
const CONVERSION_REQUEST: &str = "01a23b2d72e079bbaf619c64f53d23ec";

// --- Leads --------------------------------------------------------------

/// Lead 118 from the web form, owned by Alice Martin and called back.
pub fn lead() -> Value {
    json!({
        "id": 118,
        "source": "webform",
        "source_ref": "form-4711",
        "email": "ada@example.com",
        "phone": "+49 30 1234567",
        "name": "Ada Lovelace",
        "company": "Acme Logistics GmbH",
        "payload": {"country": "DE", "employees": 35, "message": "Fleet tracking for 40 vans?"},
        "source_updated_at": "2026-11-30T10:15:00Z",
        "status": "contacted",
        "owner_id": 7,
        "version": 3,
        "created_at": "2026-11-30T10:15:02Z",
        "updated_at": "2026-11-30T10:28:05Z"
    })
}

/// Lead 131: the same person, sent by the partner CRM a day later.
pub fn partner_lead() -> Value {
    json!({
        "id": 131,
        "source": "partner",
        "source_ref": "crm-88213",
        "email": "ada@example.com",
        "phone": "+49 30 7654321",
        "name": "Ada Lovelace",
        "company": "Acme Logistics",
        "payload": {"campaign": "winter-fleet"},
        "source_updated_at": "2026-12-01T08:02:09Z",
        "status": "new",
        "owner_id": 8,
        "version": 2,
        "created_at": "2026-12-01T08:02:10Z",
        "updated_at": "2026-12-01T08:02:11Z"
    })
}

/// The answer to a first intake: the lead, new and not yet routed.
pub fn lead_created() -> Value {
    with(
        lead(),
        json!({"status": "new", "owner_id": null, "version": 1,
               "updated_at": "2026-11-30T10:15:02Z", "outcome": "created"}),
    )
}

/// The answer to a later intake of the same key with a changed field.
pub fn lead_updated() -> Value {
    with(
        lead(),
        json!({"phone": "+49 30 1234568", "source_updated_at": "2026-11-30T16:40:00Z",
               "version": 4, "updated_at": "2026-11-30T16:40:01Z", "outcome": "updated"}),
    )
}

pub fn lead_page() -> Value {
    page(json!([partner_lead(), lead()]), LEAD_CURSOR)
}

/// `GET /api/leads/{id}`: the lead, its possible duplicate and its clock.
pub fn lead_detail() -> Value {
    with(
        lead(),
        json!({
            "possible_duplicates": [{
                "lead_id": 131,
                "reason": "email",
                "merge": {"method": "POST", "href": "/api/leads/118/merge",
                          "body": {"lead_ids": [131], "fields": {}}}
            }],
            "speed_to_lead": {
                "assigned_at": "2026-11-30T10:15:03Z",
                "first_response_at": "2026-11-30T10:27:41Z",
                "response_due_at": "2026-11-30T10:30:03Z",
                "overdue": false
            },
            "merged_leads": [{
                "id": 109,
                "source": "import",
                "source_ref": "trade-fair-2026-0042",
                "name": "A. Lovelace",
                "email": "ada@example.com"
            }]
        }),
    )
}

/// The call Alice Martin logged on lead 118.
pub fn call_logged() -> Value {
    json!({
        "id": 2317,
        "lead_id": 118,
        "kind": "call",
        "origin": null,
        "outcome": null,
        "author_id": 7,
        "detail": {"text": "Wants a quote for 40 vans by Friday"},
        "correlation_id": CALL_REQUEST,
        "created_at": "2026-11-30T10:27:41Z"
    })
}

/// Lead 118 moved from `new` to `contacted`.
pub fn status_changed() -> Value {
    json!({
        "id": 2318,
        "lead_id": 118,
        "kind": "status_changed",
        "origin": null,
        "outcome": null,
        "author_id": 7,
        "detail": {"from": "new", "to": "contacted", "reason": "Called back, demo booked for Friday"},
        "correlation_id": TRANSITION_REQUEST,
        "created_at": "2026-11-30T10:28:05Z"
    })
}

/// Lead 118's first timeline entry: its intake through the API.
pub fn ingested() -> Value {
    json!({
        "id": 2301,
        "lead_id": 118,
        "kind": "ingest",
        "origin": "api",
        "outcome": "created",
        "author_id": 4,
        "detail": {"version": 1},
        "correlation_id": INTAKE_REQUEST,
        "created_at": "2026-11-30T10:15:02Z"
    })
}

pub fn lead_activity_page() -> Value {
    page(json!([status_changed(), call_logged()]), TIMELINE_CURSOR)
}

/// The audit record of lead 118's erasure (no personal data in it).
pub fn erasure() -> Value {
    json!({
        "erasure": {
            "id": 3,
            "lead_id": 118,
            "key_hash": "9f2b6c0e4d1a8b7355e0c2f1a6d9e8b4c3a2f1e0d9c8b7a6f5e4d3c2b1a09f8e",
            "erased_by": 1,
            "reason": "Subject asked for erasure (ticket DPO-2041)",
            "counts": {
                "activity": 4, "deal_unlinked": 0, "idempotency_key": 2,
                "import_applied_row": 0, "import_row": 0, "inbox_event": 0,
                "lead": 1, "lead_conversion": 0, "lead_duplicate": 1, "lead_merge": 0,
                "outbox_delivery": 6, "outbox_event": 3, "reconcile_rejected": 0, "task": 1
            },
            "erased_at": "2026-12-09T11:20:37Z"
        },
        "repeated": false
    })
}

// --- Merges -------------------------------------------------------------

/// Lead 131 merged into lead 118, keeping 131's phone.
pub fn merge() -> Value {
    let from = |lead_id: i64, rule: &str| {
        let source = if lead_id == 118 { "webform" } else { "partner" };
        json!({"lead_id": lead_id, "source": source, "rule": rule})
    };
    json!({
        "id": 23,
        "survivor_id": 118,
        "merged_ids": [131],
        "merged_by": 7,
        "merged_at": "2026-12-02T15:40:12Z",
        "fields": {
            "email": from(131, "latest"),
            "phone": from(131, "chosen"),
            "name": from(131, "latest"),
            "company": from(131, "latest"),
            "status": from(118, "survivor"),
            "owner_id": from(118, "survivor")
        },
        "undone_at": null,
        "undone_by": null
    })
}

/// Lead 118 after the merge.
fn merged_survivor() -> Value {
    with(
        lead(),
        json!({"phone": "+49 30 7654321", "company": "Acme Logistics", "version": 4,
               "updated_at": "2026-12-02T15:40:12Z"}),
    )
}

pub fn merge_result() -> Value {
    json!({"merge": merge(), "lead": merged_survivor()})
}

pub fn undo_result() -> Value {
    json!({
        "merge": with(merge(), json!({"undone_at": "2026-12-02T16:05:51Z", "undone_by": 7})),
        "lead": with(lead(), json!({"version": 5, "updated_at": "2026-12-02T16:05:51Z"})),
        "restored": [with(partner_lead(), json!({"version": 3, "updated_at": "2026-12-02T16:05:51Z"}))]
    })
}

// --- CRM ----------------------------------------------------------------

pub fn company() -> Value {
    json!({
        "id": 12,
        "name": "Acme Logistics GmbH",
        "domain": "example.com",
        "version": 1,
        "created_at": "2026-12-03T09:12:44Z",
        "updated_at": "2026-12-03T09:12:44Z"
    })
}

/// The answer to a create that made the company.
pub fn company_created() -> Value {
    with(company(), json!({"outcome": "created"}))
}

/// The answer to a create that found it by its domain.
pub fn company_matched() -> Value {
    with(company(), json!({"outcome": "matched"}))
}

/// The company after `PATCH` renamed it.
pub fn company_renamed() -> Value {
    with(
        company(),
        json!({"name": "Acme Logistics SE", "version": 2, "updated_at": "2026-12-07T11:20:02Z"}),
    )
}

pub fn contact() -> Value {
    json!({
        "id": 31,
        "email": "ada@example.com",
        "name": "Ada Lovelace",
        "phone": "+49 30 1234567",
        "company_id": 12,
        "version": 1,
        "created_at": "2026-12-03T09:12:44Z",
        "updated_at": "2026-12-03T09:12:44Z"
    })
}

pub fn contact_created() -> Value {
    with(contact(), json!({"outcome": "created"}))
}

/// The answer to a create that found the contact by its email.
pub fn contact_matched() -> Value {
    with(contact(), json!({"outcome": "matched"}))
}

/// The contact after `PATCH` changed the phone.
pub fn contact_changed() -> Value {
    with(
        contact(),
        json!({"phone": "+49 30 7654321", "version": 2, "updated_at": "2026-12-05T10:11:00Z"}),
    )
}

pub fn deal() -> Value {
    json!({
        "id": 45,
        "name": "Acme: fleet tracking, 40 vans",
        "stage": "open",
        "amount_cents": 1850000,
        "currency": "EUR",
        "owner_id": 7,
        "contact_id": 31,
        "company_id": 12,
        "lead_id": 118,
        "lost_reason": null,
        "closed_at": null,
        "version": 1,
        "created_at": "2026-12-03T09:12:44Z",
        "updated_at": "2026-12-03T09:12:44Z"
    })
}

/// The deal, won (after the change below).
pub fn deal_won() -> Value {
    with(
        deal_changed(),
        json!({"stage": "won", "closed_at": DEAL_WON.0, "version": 3,
               "updated_at": DEAL_WON.0}),
    )
}

/// The deal, after `PATCH` gave it a bigger amount and another owner.
pub fn deal_changed() -> Value {
    with(
        deal(),
        json!({"amount_cents": 2100000, "owner_id": 9, "version": 2,
               "updated_at": "2026-12-07T11:26:18Z"}),
    )
}

pub fn company_page() -> Value {
    page(
        json!([company()]),
        "eyJzIjoidXBkYXRlZF9hdCIsInQiOiIyMDI2LTEyLTAzVDA5OjEyOjQ0WiIsImkiOjEyfQ",
    )
}

pub fn contact_page() -> Value {
    page(
        json!([contact()]),
        "eyJzIjoidXBkYXRlZF9hdCIsInQiOiIyMDI2LTEyLTAzVDA5OjEyOjQ0WiIsImkiOjMxfQ",
    )
}

pub fn deal_page() -> Value {
    page(
        json!([deal()]),
        "eyJzIjoidXBkYXRlZF9hdCIsInQiOiIyMDI2LTEyLTAzVDA5OjEyOjQ0WiIsImkiOjQ1fQ",
    )
}

/// When a request was made, and its correlation id.
type Request = (&'static str, &'static str);
const CONVERSION: Request = ("2026-12-03T09:12:44Z", CONVERSION_REQUEST);
const DEAL_WON: Request = ("2026-12-18T14:03:27Z", "01a28976ff987a52b4d06c8e1f3a5b7d");

/// A timeline entry of a contact, company or deal, written by Alice Martin.
fn crm_activity(id: i64, subject: (&str, i64), kind: &str, detail: Value, at: Request) -> Value {
    json!({
        "id": id, "subject_type": subject.0, "subject_id": subject.1, "kind": kind,
        "author_id": 7, "detail": detail, "correlation_id": at.1, "created_at": at.0
    })
}

/// What a conversion writes on each record it touched.
fn converted_ids() -> Value {
    json!({"lead_id": 118, "contact_id": 31, "company_id": 12, "deal_id": 45})
}

pub fn company_activity_page() -> Value {
    let at = CONVERSION;
    page(
        json!([
            crm_activity(873, ("company", 12), "lead_converted", converted_ids(), at),
            crm_activity(
                869,
                ("company", 12),
                "created",
                json!({"name": "Acme Logistics GmbH", "domain": "example.com"}),
                at
            )
        ]),
        "eyJpIjo4Njl9",
    )
}

pub fn contact_activity_page() -> Value {
    let at = CONVERSION;
    page(
        json!([
            crm_activity(872, ("contact", 31), "lead_converted", converted_ids(), at),
            crm_activity(
                870,
                ("contact", 31),
                "created",
                json!({"company_id": 12}),
                at
            )
        ]),
        "eyJpIjo4NzB9",
    )
}

/// The deal won, and the conversion that created it.
pub fn deal_activity_page() -> Value {
    page(
        json!([
            crm_activity(
                904,
                ("deal", 45),
                "stage_changed",
                json!({"from": "open", "to": "won",
                                "reason": "Signed the annual contract"}),
                DEAL_WON
            ),
            crm_activity(
                874,
                ("deal", 45),
                "lead_converted",
                converted_ids(),
                CONVERSION
            )
        ]),
        "eyJpIjo4NzR9",
    )
}

/// Lead 118 converted into contact 31, company 12 and deal 45.
pub fn conversion() -> Value {
    json!({
        "lead": with(lead(), json!({"status": "converted", "version": 7,
                                    "updated_at": "2026-12-03T09:12:44Z"})),
        "contact": contact(),
        "contact_created": true,
        "company": company(),
        "company_created": true,
        "deal": deal(),
        "conversion": {"lead_id": 118, "contact_id": 31, "company_id": 12, "deal_id": 45}
    })
}

pub fn lead_conversion() -> Value {
    json!({
        "lead_id": 118,
        "contact_id": 31,
        "company_id": 12,
        "deal_id": 45,
        "converted_by": 7,
        "correlation_id": CONVERSION_REQUEST,
        "created_at": "2026-12-03T09:12:44Z"
    })
}

pub fn task() -> Value {
    json!({
        "id": 57,
        "subject_type": "lead",
        "subject_id": 118,
        "title": "Send the quote for 40 vans",
        "description": "Pricing from the fleet sheet",
        "owner_id": 7,
        "due_at": "2026-12-04T16:00:00Z",
        "status": "open",
        "completed_at": null,
        "completed_by": null,
        "created_by": 7,
        "version": 1,
        "created_at": "2026-11-30T10:29:12Z",
        "updated_at": "2026-11-30T10:29:12Z"
    })
}

pub fn task_page() -> Value {
    page(
        json!([task()]),
        "eyJkIjoiMjAyNi0xMi0wNFQxNjowMDowMFoiLCJpIjo1N30",
    )
}

/// The task, done.
pub fn task_done() -> Value {
    with(
        task(),
        json!({"status": "done", "completed_at": "2026-12-03T15:47:09Z", "completed_by": 7,
               "version": 2, "updated_at": "2026-12-03T15:47:09Z"}),
    )
}

// --- Ops ----------------------------------------------------------------

/// The partner CRM's webhook that became lead 131, without its body.
pub fn inbox_event() -> Value {
    json!({
        "id": 5120,
        "source": "partner",
        "event_id": "5f0c8e9a-3d1b-4c7e-9a2f-6b8d0e1c4a73",
        "event_id_from": "header",
        "event_type": "lead.created",
        "state": "processed",
        "deliveries": 1,
        "attempts": 1,
        "retries": 0,
        "last_error": null,
        "next_attempt_at": null,
        "locked_by": null,
        "outcome": "created",
        "lead_id": 131,
        "correlation_id": WEBHOOK_REQUEST,
        "received_at": "2026-12-01T08:02:10Z",
        "last_delivery_at": "2026-12-01T08:02:10Z",
        "processed_at": "2026-12-01T08:02:10Z",
        "updated_at": "2026-12-01T08:02:10Z"
    })
}

/// The same event with its kept headers (never a signature) and its body.
pub fn inbox_event_detail() -> Value {
    with(
        inbox_event(),
        json!({
            "headers": {
                "content-type": "application/json",
                "user-agent": "Partner-Hookshot/2.4",
                "x-github-delivery": "5f0c8e9a-3d1b-4c7e-9a2f-6b8d0e1c4a73",
                "x-github-event": "lead.created"
            },
            "body": {
                "action": "created",
                "lead": {
                    "id": "crm-88213",
                    "contact": {"email": "ada@example.com", "name": "Ada Lovelace"},
                    "updated_at": "2026-12-01T08:02:09Z"
                }
            }
        }),
    )
}

/// An event given up: its body has no record where the source looks.
pub fn dead_inbox_event() -> Value {
    with(
        inbox_event(),
        json!({
            "id": 5133, "event_id": "a71e4c02-98b3-4f6d-b1e5-0c3d7f29e8a4",
            "state": "dead", "outcome": null, "lead_id": null,
            "last_error": "mapping: no record at \"/lead\"",
            "correlation_id": "01a230e231e07d93b8f05a6c2e4d1b97",
            "received_at": "2026-12-01T09:14:20Z", "last_delivery_at": "2026-12-01T09:14:20Z",
            "processed_at": null, "updated_at": "2026-12-01T09:14:20Z"
        }),
    )
}

pub fn inbox_page() -> Value {
    page(json!([dead_inbox_event(), inbox_event()]), "5120")
}

/// That event back in line after an ops retry (its source fixed).
pub fn inbox_event_requeued() -> Value {
    with(
        dead_inbox_event(),
        json!({"state": "received", "attempts": 0, "retries": 1,
               "updated_at": "2026-12-01T10:02:31Z"}),
    )
}

/// A dry run of a bulk retry: what matched, by state; nothing retried.
pub fn inbox_retry_counted() -> Value {
    json!({"dry_run": true, "matched": 3, "skipped_erased": 0, "by_state": {"dead": 3},
           "retried": 0, "results": {}})
}

/// The `lead.created` event of lead 131.
pub fn outbox_event() -> Value {
    json!({
        "id": 6120,
        "event_id": "evt_01a230a020127c44b2e93f6d0a8c5e17",
        "event_type": "lead.created",
        "lead_id": 131,
        "payload": partner_lead(),
        "correlation_id": WEBHOOK_REQUEST,
        "target_subscription_id": null,
        "state": "published",
        "created_at": "2026-12-01T08:02:10Z",
        "published_at": "2026-12-01T08:02:10Z"
    })
}

/// Its delivery to the sales CRM (subscription 3).
pub fn delivery() -> Value {
    json!({
        "id": 8841,
        "outbox_event_id": 6120,
        "subscription_id": 3,
        "lead_id": 131,
        "state": "delivered",
        "attempts": 1,
        "next_attempt_at": "2026-12-01T08:02:10Z",
        "locked_until": null,
        "last_status": 200,
        "last_error": null,
        "last_duration_ms": 84,
        "delivered_at": "2026-12-01T08:02:11Z",
        "created_at": "2026-12-01T08:02:10Z",
        "updated_at": "2026-12-01T08:02:11Z"
    })
}

/// A delivery given up after its last attempt.
fn dead_delivery() -> Value {
    with(
        delivery(),
        json!({"id": 8852, "outbox_event_id": 6124, "lead_id": 118, "state": "dead",
               "attempts": 8, "next_attempt_at": "2026-12-01T20:41:07Z", "last_status": 503,
               "last_error": "HTTP 503: Service Unavailable", "last_duration_ms": 212,
               "delivered_at": null, "created_at": "2026-12-01T08:40:02Z",
               "updated_at": "2026-12-01T20:41:07Z"}),
    )
}

pub fn delivery_page() -> Value {
    page(json!([dead_delivery(), delivery()]), "8841")
}

/// One dead delivery put back in line.
pub fn delivery_retried() -> Value {
    json!({"matched": 1, "retried": 1, "dry_run": false})
}

/// A dry run: the dead deliveries to one subscription, counted.
pub fn deliveries_counted() -> Value {
    json!({"matched": 4, "retried": 0, "dry_run": true})
}

pub fn lead_processing_failure_page() -> Value {
    page(
        json!([{
            "lead_id": 140,
            "version": 1,
            "state": "dead",
            "attempts": 5,
            "last_error": "routing: team enterprise has no active sales principal",
            "next_attempt_at": null,
            "updated_at": "2026-12-01T11:48:30Z"
        }]),
        "140",
    )
}

/// A dry run: the dead leads a retry would take, counted.
pub fn lead_processing_retry_counted() -> Value {
    json!({"dry_run": true, "matched": 1, "retried": 0, "results": {}})
}

/// A reconcile run of the partner source, finished.
pub fn reconcile_run() -> Value {
    json!({
        "id": 412,
        "source": "partner",
        "state": "done",
        "dry_run": false,
        "trigger": "schedule",
        "cursor_start": "2026-12-01T07:45:00Z",
        "cursor": "2026-12-01T08:00:00Z",
        "pages": 2,
        "fetched": 214,
        "created": 3,
        "updated": 11,
        "unchanged": 198,
        "stale": 0,
        "suppressed": 0,
        "rejected": 2,
        "missed": 1,
        "error": null,
        "started_by": null,
        "started_at": "2026-12-01T08:00:00Z",
        "heartbeat_at": "2026-12-01T08:00:06Z",
        "finished_at": "2026-12-01T08:00:06Z"
    })
}

/// A dry run an ops principal just started.
pub fn reconcile_run_started() -> Value {
    with(
        reconcile_run(),
        json!({"id": 413, "state": "running", "dry_run": true, "trigger": "api",
               "cursor_start": "2026-12-01T08:00:00Z", "pages": 0, "fetched": 0, "created": 0,
               "updated": 0, "unchanged": 0, "rejected": 0, "missed": 0, "started_by": 2,
               "started_at": "2026-12-01T08:07:19Z", "heartbeat_at": "2026-12-01T08:07:19Z",
               "finished_at": null}),
    )
}

pub fn reconcile_run_page() -> Value {
    page(json!([reconcile_run()]), "412")
}

pub fn reconcile_rejected_page() -> Value {
    page(
        json!([{
            "id": 77,
            "source": "partner",
            "run_id": 412,
            "record": {"id": "crm-88240", "contact": {"name": "Charles Babbage"},
                       "updated_at": "2026-12-01T07:58:12Z"},
            "reason": "no email, phone or name at /contact/email, /contact/name",
            "state": "rejected",
            "retries": 0,
            "lead_id": null,
            "created_at": "2026-12-01T08:00:04Z",
            "updated_at": "2026-12-01T08:00:04Z",
            "resolved_at": null
        }]),
        "77",
    )
}

/// The partner's rejected records, retried after its mapping was fixed.
pub fn reconcile_rejected_retried() -> Value {
    json!({"retried": 2, "resolved": 1, "still_rejected": 1})
}

/// An import of a CSV file, finished.
pub fn import_run() -> Value {
    json!({
        "id": 19,
        "source": "trade-fair",
        "file_name": "fair-2026-11.csv",
        "format": "csv",
        "file_hash": "4b1e8f0c9a2d7e6b5c3f1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c",
        "mapping": {"source_ref": "Badge", "email": "E-Mail", "name": "Name",
                    "company": "Company"},
        "dry_run": false,
        "state": "done",
        "rows": 250,
        "created": 231,
        "updated": 12,
        "unchanged": 4,
        "stale": 0,
        "suppressed": 1,
        "rejected": 2,
        "bytes_total": 48213,
        "bytes_read": 48213,
        "error": null,
        "started_by": 2,
        "started_at": "2026-12-02T13:05:41Z",
        "updated_at": "2026-12-02T13:05:44Z",
        "finished_at": "2026-12-02T13:05:44Z",
        "report_url": "/api/imports/19/report.csv"
    })
}

/// The same import, just accepted.
pub fn import_started() -> Value {
    with(
        import_run(),
        json!({"state": "running", "rows": 0, "created": 0, "updated": 0, "unchanged": 0,
               "suppressed": 0, "rejected": 0, "bytes_read": 0,
               "updated_at": "2026-12-02T13:05:41Z", "finished_at": null}),
    )
}

pub fn import_run_page() -> Value {
    page(json!([import_run()]), "19")
}

// --- Configuration ------------------------------------------------------

/// The partner CRM's source: GitHub-style signatures, pulled every 15 minutes.
pub fn source() -> Value {
    json!({
        "name": "partner",
        "scheme": "github",
        "secret_count": 1,
        "tolerance_secs": 300,
        "signature_header": null,
        "event_id_header": "x-github-delivery",
        "event_id_pointer": null,
        "event_type_header": "x-github-event",
        "event_type_pointer": null,
        "allowed_event_types": ["lead.created", "lead.updated"],
        "record_pointer": "/lead",
        "source_ref_pointer": "/id",
        "email_pointer": "/contact/email",
        "name_pointer": "/contact/name",
        "phone_pointer": null,
        "company_pointer": null,
        "updated_at_pointer": "/updated_at",
        "created_at": "2026-11-02T14:20:31Z",
        "updated_at": "2026-11-02T14:20:31Z",
        "pull_url": "https://api.partner.example/v1/leads",
        "pull_auth_header": "authorization",
        "pull_auth_configured": true,
        "pull_page_size": 200,
        "cron": "0 */15 * * * *",
        "reconcile_cursor": "2026-12-01T08:00:00Z",
        "expected_interval": null,
        "events_pointer": null,
        "verify_token_set": false,
        "version": 1,
        "state": "active"
    })
}

/// The source while paused: its deliveries are answered and kept, not processed.
pub fn source_paused() -> Value {
    with(source(), json!({"state": "paused"}))
}

/// What removing a source took with it.
pub fn source_removed() -> Value {
    json!({"name": "partner", "revoked_intake_principals": 1, "abandoned_events": 0})
}

pub fn subscription() -> Value {
    json!({
        "id": 3,
        "url": "https://crm.example.com/hooks/leadpipe",
        "description": "Sales CRM sync",
        "event_types": ["lead.created", "lead.updated"],
        "state": "active",
        "disabled_reason": null,
        "version": 1,
        "failing_since": null,
        "rate_limit": null,
        "created_at": "2026-11-02T14:25:10Z"
    })
}

/// A subscription its failures disabled, then enabled again.
pub fn subscription_enabled() -> Value {
    with(subscription(), json!({"version": 3}))
}

/// What `recover` sent again.
pub fn recovery() -> Value {
    json!({"dead": 12, "failed": 3})
}

pub fn source_list() -> Value {
    json!({"data": [source()]})
}

/// The source after `PATCH` allowed one more event type and a wider clock skew.
pub fn source_changed() -> Value {
    with(
        source(),
        json!({"allowed_event_types": ["lead.created", "lead.updated", "lead.deleted"],
               "tolerance_secs": 600, "version": 2, "updated_at": "2026-11-20T10:03:44Z"}),
    )
}

/// The answer to a create: the only one that shows the signing secret.
pub fn subscription_created() -> Value {
    with(subscription(), json!({"secret": SIGNING_SECRET}))
}

pub fn subscription_list() -> Value {
    json!({"data": [subscription()]})
}

/// The subscription after `PATCH` added an event type.
pub fn subscription_changed() -> Value {
    with(
        subscription(),
        json!({"event_types": ["lead.created", "lead.updated", "deal.stage_changed"],
               "version": 2}),
    )
}

/// A new secret; the old one is still accepted for a day.
pub fn rotated_secret() -> Value {
    json!({
        "secret": "whsec_ZXhhbXBsZS1vbmx5LWEtcm90YXRlZC1zZWNyZXQtMDA=",
        "previous_secret_valid_until": "2026-12-16T09:00:00Z"
    })
}

/// The id of the `ping` event queued for one subscription.
pub fn test_event() -> Value {
    json!({"event_id": "evt_01a278ee1a807e15b9c2d4f60a8e3b51"})
}

/// The partner's webhook, stored and queued.
pub fn webhook_queued() -> Value {
    json!({"id": 5120, "event_id": "5f0c8e9a-3d1b-4c7e-9a2f-6b8d0e1c4a73",
           "state": "received", "duplicate": false})
}

/// The same webhook sent again, after the first was processed.
pub fn webhook_duplicate() -> Value {
    json!({"id": 5120, "event_id": "5f0c8e9a-3d1b-4c7e-9a2f-6b8d0e1c4a73",
           "state": "processed", "duplicate": true})
}

/// The start of the document this server serves (`/openapi.json`).
pub fn openapi_document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "leadpipe", "version": env!("CARGO_PKG_VERSION"),
                 "license": {"name": "MIT"}},
        "paths": {"/healthz": {"get": {
            "tags": ["meta"],
            "summary": "Liveness: the process is up.",
            "description": "**Roles:** anyone (no token).",
            "operationId": "healthz",
            "responses": {"200": {"description": "Up"}}
        }}}
    })
}

/// A webhook signing secret in its real shape (`whsec_` and base64 of 32
/// bytes); these bytes spell out that it is an example.
pub const SIGNING_SECRET: &str = "whsec_ZXhhbXBsZS1vbmx5LW5vdC1hLXJlYWwtc2VjcmV0MDA=";

/// A bearer token in its real shape (`lp_` and 43 characters); an example.
pub const TOKEN: &str = "lp_ZXhhbXBsZS1vbmx5LW5vdC1hLXJlYWwtdG9rZW4tMDA";

pub fn team() -> Value {
    json!({
        "name": "inside-sales",
        "time_zone": "Europe/Berlin",
        "work_days": ["mon", "tue", "wed", "thu", "fri"],
        "work_start": "09:00",
        "work_end": "17:30",
        "response_target_minutes": 15,
        "escalation": {"to": "next_available"},
        "version": 2,
        "updated_at": "2026-11-02T15:02:48Z"
    })
}

/// The teams, by name: the enterprise team escalates to its lead.
pub fn team_list() -> Value {
    json!({"data": [
        {"name": "enterprise", "time_zone": "Europe/Berlin",
         "work_days": ["mon", "tue", "wed", "thu", "fri"], "work_start": "08:00",
         "work_end": "18:00", "response_target_minutes": 30,
         "escalation": {"to": "principal", "principal_id": 12}, "version": 1,
         "updated_at": "2026-11-02T15:00:12Z"},
        team()
    ]})
}

/// The same team, just created.
pub fn team_created() -> Value {
    with(team(), json!({"version": 1}))
}

pub fn routing_rules() -> Value {
    json!({
        "rules": [
            {"source": "webform", "conditions": [{"pointer": "/employees", "gte": 100.0}],
             "team": "enterprise", "strategy": "round_robin"},
            {"team": "inside-sales", "strategy": "round_robin"}
        ],
        "version": 4,
        "updated_at": "2026-11-20T09:41:16Z",
        "updated_by": 1
    })
}

/// Alice Martin as the principals API shows her.
pub fn principal() -> Value {
    json!({
        "id": 7,
        "name": "Alice Martin",
        "role": "sales",
        "active": true,
        "team": "inside-sales",
        "availability": "available",
        "away_until": null,
        "capacity": 25,
        "version": 3
    })
}

/// A web form lead from a company of 120 people: the enterprise team's
/// next turn passes Bob Okafor (away) and falls on principal 12.
pub fn routing_preview() -> Value {
    json!({
        "rule": 0,
        "team": "enterprise",
        "pool": "team:enterprise",
        "candidates": [9, 12],
        "owner_id": 12,
        "skipped": [{"principal_id": 9, "reason": "away"}],
        "routed": true
    })
}

/// Alice Martin after `PATCH` marked her away.
pub fn principal_away() -> Value {
    with(
        principal(),
        json!({"availability": "away", "away_until": "2026-12-14T08:00:00Z", "version": 4}),
    )
}

/// The web form's intake token's principal: it writes for its source only.
pub fn intake_principal() -> Value {
    json!({
        "id": 4,
        "name": "webform",
        "role": "intake",
        "source": "webform",
        "active": true,
        "team": null,
        "availability": "available",
        "away_until": null,
        "capacity": null,
        "version": 1
    })
}

pub fn principals() -> Value {
    json!([intake_principal(), principal()])
}

pub fn user() -> Value {
    json!({
        "id": 7,
        "name": "Alice Martin",
        "email": "alice.martin@example.com",
        "role": "sales",
        "team": "inside-sales",
        "active": true,
        "disabled_at": null,
        "created_at": "2026-11-02T15:10:03Z"
    })
}

/// Alice Martin as first added, in team `east`.
pub fn user_added() -> Value {
    with(user(), json!({"team": "east"}))
}

pub fn users() -> Value {
    json!([user()])
}

/// Alice Martin, disabled: she can no longer sign in.
pub fn user_disabled() -> Value {
    with(
        user(),
        json!({"active": false, "disabled_at": "2026-12-20T17:45:12Z"}),
    )
}

pub fn issued_token() -> Value {
    json!({
        "id": 16,
        "name": "laptop script",
        "token": TOKEN,
        "created_at": "2026-12-01T08:30:00Z",
        "expires_at": "2026-12-31T08:30:00Z"
    })
}

/// The same token after a rotation: a new secret under its id and name.
pub fn rotated_token() -> Value {
    with(
        issued_token(),
        json!({"token": "lp_ZXhhbXBsZS1vbmx5LWEtcm90YXRlZC10b2tlbi0wMDA",
               "created_at": "2026-12-15T09:00:00Z", "expires_at": "2027-01-14T09:00:00Z"}),
    )
}

pub fn tokens() -> Value {
    json!([{
        "id": 16,
        "name": "laptop script",
        "created_at": "2026-12-01T08:30:00Z",
        "expires_at": "2026-12-31T08:30:00Z",
        "last_used_at": "2026-12-01T09:02:57Z"
    }])
}

pub fn session() -> Value {
    json!({
        "principal_id": 7,
        "name": "Alice Martin",
        "role": "sales",
        // Its real shape (43 characters of base64url); these spell "example".
        "csrf_token": "ZXhhbXBsZS1vbmx5LW5vdC1hLWNzcmYtdG9rZW4tMDA",
        "expires_at": "2026-12-08T08:30:00Z",
        "idle_expires_at": "2026-12-01T20:30:00Z"
    })
}

// --- Reports ------------------------------------------------------------

/// The figures of one group of leads in a speed-to-lead report.
fn figures(leads: u64, delay: (f64, f64), rep: (f64, f64), breaches: u64) -> Value {
    json!({
        "leads": leads,
        "assigned": leads,
        "responded": leads - breaches,
        "system_delay_seconds": {"p50": delay.0, "p90": delay.1},
        "rep_delay_seconds": {"p50": rep.0, "p90": rep.1},
        "within_target": leads - breaches,
        "breaches": breaches
    })
}

pub fn speed_to_lead_report() -> Value {
    json!({
        "window": "7d",
        "since": "2026-11-24T12:00:00Z",
        "generated_at": "2026-12-01T12:00:00Z",
        "total": figures(42, (1.2, 3.8), (540.0, 1320.0), 3),
        "by_source": [
            with(figures(30, (1.1, 2.9), (480.0, 1260.0), 2), json!({"source": "webform"})),
            with(figures(12, (1.6, 4.4), (660.0, 1500.0), 1), json!({"source": "partner"}))
        ],
        "by_owner": [
            with(figures(23, (1.2, 3.5), (410.0, 1140.0), 1), json!({"owner_id": 7})),
            with(figures(19, (1.3, 4.0), (700.0, 1410.0), 2), json!({"owner_id": 9}))
        ]
    })
}

pub fn stats() -> Value {
    json!({
        "generated_at": "2026-12-01T12:00:00Z",
        "sources": [{
            "source": "partner",
            "inbox": {"dead": 1, "failed": 1, "processed": 1873, "skipped": 14},
            "all_time": {"events": 1889, "deliveries": 1952, "duplicates": 63,
                         "duplicate_rate": 0.0323, "reconciled": 1934, "missed": 45,
                         "missed_rate": 0.0233},
            "last_hour": {"events": 12, "deliveries": 12, "duplicates": 0,
                          "duplicate_rate": 0.0, "reconciled": 13, "missed": 1,
                          "missed_rate": 0.0769},
            "last_day": {"events": 240, "deliveries": 247, "duplicates": 7,
                         "duplicate_rate": 0.0283, "reconciled": 244, "missed": 4,
                         "missed_rate": 0.0164},
            "oldest_unprocessed_age_seconds": 9860.4,
            "leads": 1512,
            "last_received_at": "2026-12-01T11:56:12Z",
            "quiet_seconds": 228.0,
            "usual_gap_seconds": 312.5
        }],
        "outbox": {"events_pending": 0, "deliveries": {"dead": 1, "failed": 2, "held": 0},
                   "oldest_undelivered_age_seconds": 41033.2},
        "subscriptions": [{"subscription_id": 3, "delivered": 611, "dead": 1, "attempts": 640,
                           "success_rate": 0.9547, "avg_latency_ms": 91.5}],
        "leads_processing_backlog": 2,
        "lead_processing": {"backlog": 2, "failed": 0, "dead": 1,
                            "oldest_unprocessed_age_seconds": 1.8},
        "leads_response_overdue": 1
    })
}

pub fn stats_series() -> Value {
    let bucket = |start: &str, received: u64, processed: u64, deliveries: u64, rate: f64| {
        json!({"start": start, "received": received, "processed": processed,
               "deliveries": deliveries, "duplicate_rate": rate,
               "reconciled": 0, "missed": 0, "missed_rate": 0.0})
    };
    json!({
        "window": "1h",
        "source": null,
        "bucket_seconds": 60,
        "from": "2026-12-01T11:00:00Z",
        "to": "2026-12-01T12:00:00Z",
        "buckets": [
            with(bucket("2026-12-01T11:00:00Z", 4, 4, 6, 0.0),
                 json!({"reconciled": 13, "missed": 1, "missed_rate": 0.0769})),
            bucket("2026-12-01T11:01:00Z", 7, 7, 10, 0.125)
        ]
    })
}

/// Everything correlated with the partner webhook that became lead 131.
pub fn trace() -> Value {
    let summary = json!({
        "id": 5120, "source": "partner", "event_id": "5f0c8e9a-3d1b-4c7e-9a2f-6b8d0e1c4a73",
        "event_type": "lead.created", "state": "processed", "deliveries": 1, "attempts": 1,
        "outcome": "created", "lead_id": 131, "last_error": null,
        "processed_at": "2026-12-01T08:02:10Z"
    });
    let ingest = with(
        ingested(),
        json!({"id": 2405, "lead_id": 131, "origin": "webhook", "author_id": null,
               "correlation_id": WEBHOOK_REQUEST, "created_at": "2026-12-01T08:02:10Z"}),
    );
    json!({
        "correlation_id": WEBHOOK_REQUEST,
        "leads": [partner_lead()],
        "entries": [
            {"kind": "inbox_event", "at": "2026-12-01T08:02:10Z", "event": summary},
            {"kind": "activity", "at": "2026-12-01T08:02:10Z", "activity": ingest},
            {"kind": "outbox_event", "at": "2026-12-01T08:02:10Z", "event": outbox_event()},
            {"kind": "delivery", "at": "2026-12-01T08:02:11Z", "delivery": delivery()}
        ]
    })
}

/// Everything stored about lead 131 (subject access).
pub fn subject_export() -> Value {
    json!({
        "lead": partner_lead(),
        "timeline": [with(ingested(), json!({"id": 2405, "lead_id": 131, "origin": "webhook",
                                              "author_id": null,
                                              "correlation_id": WEBHOOK_REQUEST,
                                              "created_at": "2026-12-01T08:02:10Z"}))],
        "inbox_events": [inbox_event_detail()],
        "reconcile_rejected": [],
        "outbox_events": [outbox_event()],
        "deliveries": [delivery()],
        "import_rows": [],
        "possible_duplicates": [{"other_lead_id": 118, "reason": "email",
                                 "created_at": "2026-12-01T08:02:11Z"}],
        "conversion": null,
        "contact": null,
        "tasks": [],
        "merged_leads": [],
        "exported_at": "2026-12-01T12:30:00Z"
    })
}

/// Two of the event types, with the schemas of their `data`.
pub fn event_types() -> Value {
    json!({"data": [
        {
            "name": "lead.assigned",
            "description": "A lead's owner changed.",
            "schema": {
                "type": "object",
                "description": "A lead's owner changed; `null` is no owner.",
                "required": ["lead_id", "version"],
                "properties": {
                    "lead_id": {"type": "integer", "format": "int64"},
                    "from": {"type": ["integer", "null"], "format": "int64"},
                    "to": {"type": ["integer", "null"], "format": "int64"},
                    "version": {"type": "integer", "format": "int64"}
                }
            }
        },
        {
            "name": "ping",
            "description": "A test event, sent only by POST /api/subscriptions/{id}/test.",
            "schema": {
                "type": "object",
                "description": "Sent by `POST /api/subscriptions/{id}/test` to that subscription only.",
                "required": ["subscription_id"],
                "properties": {"subscription_id": {"type": "integer", "format": "int64"}}
            }
        }
    ]})
}
