//! `/api/leads`: intake upsert, the sales API (status, owner, notes) and reads.

use crate::wire::leads as wire;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, patch, post};
use domain::entities::lead;
use domain::ids::PrincipalId;
use domain::lead::ingest::{self, Origin, Outcome};
use domain::lead::intake::{self, KeyNeed};
use domain::lead::query::{self, LeadFilter, OwnerFilter};
use domain::lead::record::LeadRecord;
use domain::lead::sales;
use domain::lifecycle::lead_status::LeadStatus;

use crate::http::auth::{Caller, LeadWriters, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, Reply, ok_tagged};
use crate::http::list::{ListParams, WindowParams, listed};
use crate::http::params::{IdempotencyKey, IdempotencyKeyRequired, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::merges::MergedOut;
use wire::ActivityOut;
pub use wire::LeadOut;
use wire::{
    Filter, IngestOrSuppressed, IngestOut, LeadDetail, LeadPatch, NoteIn, SuppressedOut,
    TransitionIn,
};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(create_or_update)
        .service(list_leads)
        .service(get_lead)
        .service(patch_lead)
        .service(transition)
        .service(add_note)
        .service(list_activities);
}

/// `308` to the survivor of a merged lead (`tail`: the sub-resource).
fn merged_redirect(lead_id: i64, survivor_id: i64, tail: &str) -> HttpResponse {
    HttpResponse::PermanentRedirect()
        .insert_header((
            actix_web::http::header::LOCATION,
            format!("/api/leads/{survivor_id}{tail}"),
        ))
        .json(MergedOut {
            lead_id,
            survivor_id,
        })
}

fn lead_reply(lead: lead::Model) -> Result<Reply, ApiError> {
    Reply::tagged(StatusCode::OK, &LeadOut::from(lead))
}

/// Upsert a lead by the sender's natural key `(source, source_ref)`.
///
/// An intake token writes for its own source only, a sales token for source
/// `manual` only, an admin token for any source.
///
/// In one transaction: **created** (`201`, `Location`) — a new lead with
/// status `new`; **updated** (`200`) — the record differs and is not older:
/// only sender-owned fields change and `version` goes up; **unchanged**
/// (`200`) — the same content again; **stale** (`200`) — `source_updated_at`
/// is older than the stored one. Status, owner and notes are never touched
/// by intake. **suppressed** (`200`, body `{"outcome": "suppressed"}` only) — the
/// key was erased (a tombstone): nothing is written. A sales caller without `source_ref` must send an
/// `Idempotency-Key`; the server assigns a `source_ref` (`man_…`).
#[utoipa::path(
    operation_id = "upsert_lead",
    tag = "leads",
    params(IdempotencyKey),
    request_body(content = LeadRecord, example = json!({"source": "webform", "source_ref": "form-2026-11-30-0042", "email": "ada.lovelace@acme-logistics.de", "phone": "+49 30 1234567", "name": "Ada Lovelace", "company": "Acme Logistics GmbH", "source_updated_at": "2026-11-30T10:15:00Z", "payload": {"country": "DE", "employees": 120, "message": "Fleet tracking for 40 vans?"}})),
    responses(
        (status = 201, description = "A new lead (`outcome: created`)", body = IngestOut,
            headers(("Location" = String), ("ETag" = String)), example = json!(examples::lead_created())),
        (status = 200, description = "An existing lead: `updated`, `unchanged` or `stale`; or \
            `{\"outcome\": \"suppressed\"}` alone when the key was erased (nothing written)",
            body = IngestOrSuppressed, headers(("ETag" = String)), example = json!(examples::lead_updated())),
    ),
    security(("bearer" = ["intake", "sales", "admin"])),
)]
#[post("/api/leads")]
async fn create_or_update(caller: Caller<LeadWriters>, write: Write<LeadRecord>) -> WriteResult {
    let mut write = write.read().await?;
    let rule = match intake::admit(&caller, &mut write.input)? {
        KeyNeed::Optional => KeyRule::Optional,
        KeyNeed::Required => KeyRule::Required,
    };
    let state = write.state();
    let actor = caller.actor();
    if rule == KeyRule::Optional && !idempotency::has_key(write.request()) {
        let done =
            intake::submit(&state.db, state.group_commit.as_ref(), write.input, actor).await?;
        return Ok(ingest_reply(done)?.into_response(None));
    }
    // A keyed post: its answer is stored for replay in the transaction
    // that writes the lead.
    let hasher = state.db.hasher().clone();
    let write = write.try_map(|record| Ok(record.normalise()?))?;
    write
        .run(&caller, rule, move |txn, new, _| {
            Box::pin(async move {
                let done = ingest::ingest_in(txn, &hasher, &new, Origin::Api, &actor).await?;
                ingest_reply(done)
            })
        })
        .await
}

/// `201` with `Location` for a new lead, `200` otherwise; the lead plus its
/// outcome, or only `outcome: suppressed` for an erased key.
fn ingest_reply(done: ingest::Ingested) -> Result<Reply, ApiError> {
    let Some(lead) = done.lead else {
        return Reply::new(
            StatusCode::OK,
            &SuppressedOut {
                outcome: done.outcome,
            },
        );
    };
    let created = done.outcome == Outcome::Created;
    let location = format!("/api/leads/{}", lead.id);
    let out = IngestOut {
        lead: LeadOut::from(lead),
        outcome: done.outcome,
    };
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let reply = Reply::tagged(status, &out)?;
    Ok(if created {
        reply.location(location)
    } else {
        reply
    })
}

/// One lead, with its possible duplicates.
#[utoipa::path(
    operation_id = "get_lead",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id")),
    responses(
        (status = 200, description = "The lead", body = LeadDetail, headers(("ETag" = String)), example = json!(examples::lead_detail())),
        (status = 308, description = "The lead was merged into another: `Location` is the survivor", body = MergedOut,
            headers(("Location" = String))),
        (status = 404, description = "`/problems/not-found`: no such lead"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/leads/{id}")]
async fn get_lead(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let lead = sales::find_lead(&state.db, id.into_inner().0).await?;
    if let Some(survivor_id) = lead.merged_into_id {
        return Ok(merged_redirect(lead.id, survivor_id, ""));
    }
    let possible_duplicates = domain::lead::processing::duplicates_of(&state.db, lead.id)
        .await?
        .into_iter()
        .map(|hint| wire::DuplicateOut::of(lead.id, hint))
        .collect();
    let merged_leads = domain::lead::merge::merged_leads(&state.db, lead.id)
        .await?
        .into_iter()
        .map(wire::MergedLeadOut::from)
        .collect();
    let detail = LeadDetail {
        speed_to_lead: crate::wire::teams::ClockOut::of(&lead, domain::clock::now()),
        merged_leads,
        lead: LeadOut::from(lead),
        possible_duplicates,
    };
    Ok(ok_tagged(&detail))
}

/// Move a lead along the status machine.
///
/// `new → contacted → qualified`; any open status (`new`, `contacted`,
/// `qualified`) → `lost` with a `reason`; `lost → new` (recycle). A
/// `qualified` lead becomes `converted` (final) only through `POST
/// /api/leads/{id}/convert`, which records what it became: `to: converted`
/// here is `422`. Writes a timeline entry and the outbox event
/// `lead.status_changed` in the same transaction.
#[utoipa::path(
    operation_id = "transition_lead",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), IdempotencyKey, IfMatch),
    request_body(content = TransitionIn, example = json!({"to": "contacted", "reason": "Called back, demo booked for Friday"})),
    responses(
        (status = 200, description = "The lead after the move", body = LeadOut, headers(("ETag" = String)), example = json!(examples::lead())),
        (status = 404, description = "`/problems/not-found`: no such lead"),
        (status = 409, description = "`/problems/illegal-transition`: the status machine forbids the move; `allowed` lists the legal targets."),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/leads/{id}/transitions")]
async fn transition(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<TransitionIn>,
) -> WriteResult {
    let (id, actor) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let lead =
                    sales::transition(txn, id, input.to, input.reason, &if_match, &actor).await?;
                lead_reply(lead)
            })
        })
        .await
}

/// Change a lead's owner.
///
/// Only active `sales` principals may own leads (else `422`). Writes a
/// timeline entry and the outbox event `lead.assigned`.
#[utoipa::path(
    operation_id = "patch_lead",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), IdempotencyKey, IfMatch),
    request_body(content = LeadPatch, example = json!({"owner_id": 7})),
    responses(
        (status = 200, description = "The lead after the change", body = LeadOut, headers(("ETag" = String)), example = json!(examples::lead())),
        (status = 404, description = "`/problems/not-found`: no such lead"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[patch("/api/leads/{id}")]
async fn patch_lead(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<LeadPatch>,
) -> WriteResult {
    let (id, actor) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Optional, move |txn, patch, if_match| {
            Box::pin(async move {
                let lead = match patch.owner_id.change() {
                    Some(owner_id) => {
                        let owner_id = owner_id.map(PrincipalId);
                        sales::assign(txn, id, owner_id, &if_match, &actor).await?
                    }
                    None => sales::find_lead_for_write(txn, id).await?,
                };
                lead_reply(lead)
            })
        })
        .await
}

/// Add a note, or log a call, on a lead's timeline.
///
/// A note has no natural key, so `Idempotency-Key` is required. Writes the
/// outbox event `lead.note_added` (with its `kind`). The first note or call
/// is the lead's first response (speed to lead).
#[utoipa::path(
    operation_id = "add_lead_note",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), IdempotencyKeyRequired),
    request_body(content = NoteIn, example = json!({"text": "Wants a quote for 40 vans by Friday", "kind": "call"})),
    responses(
        (status = 201, description = "The timeline entry of the note", body = ActivityOut, example = json!(examples::call_logged())),
        (status = 404, description = "`/problems/not-found`: no such lead"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/leads/{id}/notes")]
async fn add_note(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<NoteIn>,
) -> WriteResult {
    let (id, actor) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Required, move |txn, note, _| {
            Box::pin(async move {
                let activity = sales::add_note(txn, id, &note.text, note.kind, &actor).await?;
                Reply::new(StatusCode::CREATED, &ActivityOut::from(activity))
            })
        })
        .await
}

impl Filter {
    pub(crate) fn parse(
        self,
        caller_id: i64,
        window: &WindowParams,
    ) -> Result<LeadFilter, ApiError> {
        let status = self
            .status
            .as_deref()
            .map(|s| {
                s.parse::<LeadStatus>()
                    .map_err(|e| ApiError::invalid("status", e))
            })
            .transpose()?;
        let owner = match self.owner.as_deref() {
            None => None,
            Some("none") => Some(OwnerFilter::Unassigned),
            Some("me") => Some(OwnerFilter::Id(caller_id)),
            Some(id) => Some(OwnerFilter::Id(id.parse().map_err(|_| {
                ApiError::invalid("owner", "must be a principal id, 'me' or 'none'")
            })?)),
        };
        let window = ListParams::default().window(window)?;
        Ok(LeadFilter {
            status,
            owner,
            source: self.source,
            q: self.q,
            updated_since: window.updated_since,
            sort: window.sort,
        })
    }
}

listed! {
    "A page of leads." type LeadPage = Page<LeadOut>;
    "A page of a lead's timeline." type LeadActivityPage = Page<ActivityOut>;
}

/// List leads, filtered, newest first.
///
/// Pages continue strictly after the last row of the previous page in
/// `(timestamp, id)` order, so leads arriving while a client pages never
/// shift a page.
#[utoipa::path(
    operation_id = "list_leads",
    tag = "leads",
    params(Filter, WindowParams, ListParams),
    responses((status = 200, description = "A page of leads", body = LeadPage, example = json!(examples::lead_page()))),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/leads")]
async fn list_leads(
    caller: Caller<SalesUp>,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
    window: web::Query<WindowParams>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let filter = filter.into_inner().parse(caller.id, &window)?;
    let page = query::list_leads(
        state.reads.db(),
        &filter,
        page.limit(),
        page.cursor.as_deref(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(page.map(LeadOut::from)))
}

/// A lead's timeline, newest first.
///
/// Every intake call, status move, owner change, note, duplicate hint and
/// conversion, with its author and correlation id.
#[utoipa::path(
    operation_id = "list_lead_activities",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), ListParams),
    responses(
        (status = 200, description = "A page of the timeline", body = LeadActivityPage, example = json!(examples::lead_activity_page())),
        (status = 308, description = "The lead was merged into another: `Location` is the survivor's timeline", body = MergedOut,
            headers(("Location" = String))),
        (status = 404, description = "`/problems/not-found`: no such lead"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/leads/{id}/activities")]
async fn list_activities(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    let lead = sales::find_lead(state.reads.db(), id).await?;
    if let Some(survivor_id) = lead.merged_into_id {
        return Ok(merged_redirect(id, survivor_id, "/activities"));
    }
    let page =
        query::list_activities(state.reads.db(), id, page.limit(), page.cursor.as_deref()).await?;
    Ok(HttpResponse::Ok().json(page.map(ActivityOut::from)))
}
