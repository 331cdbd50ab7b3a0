//! `/api/leads`: intake upsert, the sales API (status, owner, notes) and reads.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{DateTime, Utc};
use domain::FieldError;
use domain::auth::Role;
use domain::entities::{activity, lead};
use domain::lead::ingest::{self, IngestContext, Origin, Outcome};
use domain::lead::query::{self, LeadFilter, OwnerFilter};
use domain::lead::record::LeadRecord;
use domain::lead::sales::{self, Actor};
use domain::lead::status::LeadStatus;
use domain::page::{self, SortKey};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::auth::{Authenticated, SALES_AND_UP};
use crate::http::body::{parse_json, read_json_bytes};
use crate::http::correlation::CorrelationId;
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, Reply, if_match_version};
use crate::http::params::{IdempotencyKey, IdempotencyKeyRequired, IfMatch};
use crate::http::state::AppState;

/// The source of leads that sales staff create by hand.
pub const MANUAL_SOURCE: &str = "manual";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/leads")
            .route("", web::post().to(create_or_update))
            .route("", web::get().to(list_leads))
            .route("/{id}", web::get().to(get_lead))
            .route("/{id}", web::patch().to(patch_lead))
            .route("/{id}/transitions", web::post().to(transition))
            .route("/{id}/notes", web::post().to(add_note))
            .route("/{id}/activities", web::get().to(list_activities)),
    );
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(
    create_or_update,
    list_leads,
    get_lead,
    patch_lead,
    transition,
    add_note,
    list_activities
))]
pub struct Api;

/// A lead as the API shows it: in the OpenAPI document it *is* the `Lead`
/// schema (a `$ref`, not a one-element `allOf` that client generators turn
/// into a second copy of `Lead` and its inline models).
#[derive(Serialize)]
pub struct LeadOut {
    #[serde(flatten)]
    pub lead: lead::Model,
}

impl utoipa::PartialSchema for LeadOut {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        <lead::Model as utoipa::PartialSchema>::schema()
    }
}

impl ToSchema for LeadOut {
    fn name() -> std::borrow::Cow<'static, str> {
        <lead::Model as ToSchema>::name()
    }

    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::Schema>)>) {
        <lead::Model as ToSchema>::schemas(schemas);
    }
}

/// One lead with what only its own page shows.
#[derive(Serialize, ToSchema)]
struct LeadDetail {
    #[serde(flatten)]
    lead: LeadOut,
    /// Leads from other sources with the same email or phone (never merged).
    possible_duplicates: Vec<domain::lead::processing::DuplicateHint>,
}

/// The lead after an intake upsert, and what the upsert did.
#[derive(Serialize, ToSchema)]
struct IngestOut {
    #[serde(flatten)]
    lead: LeadOut,
    /// `created` (`201`), `updated`, `unchanged` or `stale` (`200`).
    outcome: Outcome,
}

/// The answer for a natural key that was erased: nothing was written.
#[derive(Serialize, ToSchema)]
#[schema(as = IngestSuppressed)]
struct SuppressedOut {
    /// Always `suppressed`.
    outcome: Outcome,
}

pub fn etag(lead: &lead::Model) -> String {
    format!("\"{}\"", lead.version)
}

fn lead_reply(lead: lead::Model) -> Result<Reply, ApiError> {
    let tag = etag(&lead);
    Ok(Reply::new(StatusCode::OK, &LeadOut { lead })?.etag(tag))
}

fn actor(caller: &Authenticated, correlation: CorrelationId) -> Actor {
    Actor {
        principal_id: caller.id,
        correlation_id: Some(correlation.0),
    }
}

/// Upsert a lead by the sender's natural key `(source, source_ref)`.
///
/// **Roles:** intake (for its own source only), sales (source `manual`
/// only), admin (any source).
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
    post,
    path = "/api/leads",
    operation_id = "upsert_lead",
    tag = "leads",
    params(IdempotencyKey),
    request_body = LeadRecord,
    responses(
        (status = 201, description = "A new lead (`outcome: created`)", body = IngestOut,
            headers(("Location" = String), ("ETag" = String))),
        (status = 200, description = "An existing lead: `updated`, `unchanged` or `stale`; or \
            `{\"outcome\": \"suppressed\"}` alone when the key was erased (nothing written)",
            body = IngestOut, headers(("ETag" = String))),
    ),
    security(("bearer" = [])),
)]
async fn create_or_update(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(&[Role::Intake, Role::Sales, Role::Admin])?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let mut record: LeadRecord = parse_json(&body)?;
    let source = record.source.trim().to_owned();
    let mut rule = KeyRule::Optional;
    if caller.role == Role::Sales {
        if source != MANUAL_SOURCE {
            return Err(ApiError::Forbidden(format!(
                "sales staff may only create leads with source '{MANUAL_SOURCE}'"
            )));
        }
        if record
            .source_ref
            .as_deref()
            .is_none_or(|r| r.trim().is_empty())
        {
            rule = KeyRule::Required;
            record.source_ref = Some(format!("man_{}", uuid::Uuid::now_v7().simple()));
        }
    } else if !caller.may_ingest_for(&source) {
        return Err(ApiError::Forbidden(format!(
            "this token may not post leads for source '{source}'"
        )));
    }
    let ctx = IngestContext {
        correlation_id: Some(correlation.0),
        author_id: Some(caller.id),
    };
    // Without a key, concurrent intake shares transactions (group commit);
    // a keyed request must commit its stored response with its write.
    let keyless = rule == KeyRule::Optional && !idempotency::has_key(&req);
    if let (Some(group), true) = (&state.group_commit, keyless) {
        let done = group.ingest(record, Origin::Api, ctx).await?;
        return Ok(ingest_reply(done)?.into_response(None));
    }
    let new = record.normalise()?;
    idempotency::run(&state, &caller, &req, &body, rule, move |txn| {
        Box::pin(
            async move { ingest_reply(ingest::ingest_in(txn, &new, Origin::Api, &ctx).await?) },
        )
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
    let tag = etag(&lead);
    let out = IngestOut {
        lead: LeadOut { lead },
        outcome: done.outcome,
    };
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let reply = Reply::new(status, &out)?.etag(tag);
    Ok(if created {
        reply.location(location)
    } else {
        reply
    })
}

/// One lead, with its possible duplicates.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/leads/{id}",
    operation_id = "get_lead",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id")),
    responses(
        (status = 200, description = "The lead", body = LeadDetail, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such lead"),
    ),
    security(("bearer" = [])),
)]
async fn get_lead(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let lead = sales::find_lead(&state.db, id.into_inner()).await?;
    let possible_duplicates = domain::lead::processing::duplicates_of(&state.db, lead.id).await?;
    let tag = etag(&lead);
    let detail = LeadDetail {
        lead: LeadOut { lead },
        possible_duplicates,
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::ETAG, tag))
        .json(detail))
}

/// A move of the lead status machine.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = LeadTransition)]
struct TransitionIn {
    /// The status to move to.
    to: LeadStatus,
    /// Why; required when moving to `lost` (at most 1000 characters).
    reason: Option<String>,
}

/// Move a lead along the status machine.
///
/// **Roles:** sales, ops, admin.
///
/// `new → contacted → qualified`; any open status (`new`, `contacted`,
/// `qualified`) → `lost` with a `reason`; `lost → new` (recycle). A
/// `qualified` lead becomes `converted` (final) only through `POST
/// /api/leads/{id}/convert`, which records what it became: `to: converted`
/// here is `422`. Writes a timeline entry and the outbox event
/// `lead.status_changed` in the same transaction.
#[utoipa::path(
    post,
    path = "/api/leads/{id}/transitions",
    operation_id = "transition_lead",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), IdempotencyKey, IfMatch),
    request_body = TransitionIn,
    responses(
        (status = 200, description = "The lead after the move", body = LeadOut, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such lead"),
        (status = 409, description = "`/problems/illegal-transition`: the status machine forbids the move; `allowed` lists the legal targets."),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names an old version; `current_version` is the current one"),
    ),
    security(("bearer" = [])),
)]
async fn transition(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: TransitionIn = parse_json(&body)?;
    let if_match = if_match_version(&req);
    let (id, actor) = (id.into_inner(), actor(&caller, correlation));
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Optional,
        move |txn| {
            Box::pin(async move {
                let lead =
                    sales::transition(txn, id, input.to, input.reason, &if_match, &actor).await?;
                lead_reply(lead)
            })
        },
    )
    .await
}

/// `null` and absent are different things in a PATCH.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Human-owned fields of a lead; absent fields stay as they are.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct LeadPatch {
    /// An active `sales` principal's id, or `null` for no owner.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    owner_id: Option<Option<i64>>,
}

/// Change a lead's owner.
///
/// **Roles:** sales, ops, admin.
///
/// Only active `sales` principals may own leads (else `422`). Writes a
/// timeline entry and the outbox event `lead.assigned`.
#[utoipa::path(
    patch,
    path = "/api/leads/{id}",
    operation_id = "patch_lead",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), IdempotencyKey, IfMatch),
    request_body = LeadPatch,
    responses(
        (status = 200, description = "The lead after the change", body = LeadOut, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such lead"),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names an old version; `current_version` is the current one"),
    ),
    security(("bearer" = [])),
)]
async fn patch_lead(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let patch: LeadPatch = parse_json(&body)?;
    let if_match = if_match_version(&req);
    let (id, actor) = (id.into_inner(), actor(&caller, correlation));
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Optional,
        move |txn| {
            Box::pin(async move {
                let lead = match patch.owner_id {
                    Some(owner_id) => sales::assign(txn, id, owner_id, &if_match, &actor).await?,
                    None => sales::find_lead(txn, id).await?,
                };
                lead_reply(lead)
            })
        },
    )
    .await
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NoteIn)]
struct NoteIn {
    /// 1–10,000 characters.
    text: String,
}

/// Add a note to a lead's timeline.
///
/// **Roles:** sales, ops, admin.
///
/// A note has no natural key, so `Idempotency-Key` is required. Writes the
/// outbox event `lead.note_added`.
#[utoipa::path(
    post,
    path = "/api/leads/{id}/notes",
    operation_id = "add_lead_note",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), IdempotencyKeyRequired),
    request_body = NoteIn,
    responses(
        (status = 201, description = "The timeline entry of the note", body = activity::Model),
        (status = 404, description = "`/problems/not-found`: no such lead"),
    ),
    security(("bearer" = [])),
)]
async fn add_note(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let note: NoteIn = parse_json(&body)?;
    let (id, actor) = (id.into_inner(), actor(&caller, correlation));
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Required,
        move |txn| {
            Box::pin(async move {
                let activity = sales::add_note(txn, id, &note.text, &actor).await?;
                Reply::new(StatusCode::CREATED, &activity)
            })
        },
    )
    .await
}

#[derive(Deserialize, IntoParams)]
pub(crate) struct ListParams {
    /// Only leads in this status.
    #[param(value_type = Option<LeadStatus>)]
    status: Option<String>,
    /// A principal id, `me` or `none` (no owner).
    owner: Option<String>,
    /// Only leads from this source.
    source: Option<String>,
    /// Case-insensitive text in name, email or company.
    q: Option<String>,
    /// Only leads changed at or after this time (RFC 3339).
    #[param(format = DateTime)]
    updated_since: Option<String>,
    /// `updated_at` (default) or `created_at`.
    #[param(pattern = "^(updated_at|created_at)$")]
    sort: Option<String>,
    /// Page size, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::Validation(vec![FieldError::new(field, message)])
}

impl ListParams {
    pub(crate) fn filter(&self, caller_id: i64) -> Result<LeadFilter, ApiError> {
        let status = self
            .status
            .as_deref()
            .map(|s| s.parse::<LeadStatus>().map_err(|e| invalid("status", &e)))
            .transpose()?;
        let owner = match self.owner.as_deref() {
            None => None,
            Some("none") => Some(OwnerFilter::Unassigned),
            Some("me") => Some(OwnerFilter::Id(caller_id)),
            Some(id) => Some(OwnerFilter::Id(id.parse().map_err(|_| {
                invalid("owner", "must be a principal id, 'me' or 'none'")
            })?)),
        };
        let updated_since = self
            .updated_since
            .as_deref()
            .map(|t| {
                DateTime::parse_from_rfc3339(t)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| invalid("updated_since", "must be an RFC 3339 timestamp"))
            })
            .transpose()?;
        let sort = match self.sort.as_deref() {
            None | Some("updated_at") => SortKey::UpdatedAt,
            Some("created_at") => SortKey::CreatedAt,
            Some(_) => return Err(invalid("sort", "must be 'updated_at' or 'created_at'")),
        };
        Ok(LeadFilter {
            status,
            owner,
            source: self.source.clone(),
            q: self.q.clone(),
            updated_since,
            sort,
        })
    }
}

/// A page of leads.
#[derive(Serialize, ToSchema)]
struct LeadPage {
    data: Vec<LeadOut>,
    next_cursor: Option<String>,
}

/// List leads, filtered, newest first.
///
/// **Roles:** sales, ops, admin.
///
/// Pages continue strictly after the last row of the previous page in
/// `(timestamp, id)` order, so leads arriving while a client pages never
/// shift a page.
#[utoipa::path(
    get,
    path = "/api/leads",
    operation_id = "list_leads",
    tag = "leads",
    params(ListParams),
    responses((status = 200, description = "A page of leads", body = LeadPage)),
    security(("bearer" = [])),
)]
async fn list_leads(
    caller: Authenticated,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let filter = params.filter(caller.id)?;
    let limit = page::clamp_limit(params.limit);
    let page = query::list_leads(&state.db, &filter, limit, params.cursor.as_deref()).await?;
    Ok(HttpResponse::Ok().json(LeadPage {
        data: page.data.into_iter().map(|lead| LeadOut { lead }).collect(),
        next_cursor: page.next_cursor,
    }))
}

#[derive(Deserialize, IntoParams)]
struct PageParams {
    /// Page size, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// A page of a lead's timeline.
#[derive(Serialize, ToSchema)]
#[schema(as = LeadActivityPage)]
struct ActivityPage {
    data: Vec<activity::Model>,
    next_cursor: Option<String>,
}

/// A lead's timeline, newest first.
///
/// **Roles:** sales, ops, admin.
///
/// Every intake call, status move, owner change, note, duplicate hint and
/// conversion, with its author and correlation id.
#[utoipa::path(
    get,
    path = "/api/leads/{id}/activities",
    operation_id = "list_lead_activities",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), PageParams),
    responses(
        (status = 200, description = "A page of the timeline", body = ActivityPage),
        (status = 404, description = "`/problems/not-found`: no such lead"),
    ),
    security(("bearer" = [])),
)]
async fn list_activities(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    params: web::Query<PageParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let id = id.into_inner();
    sales::find_lead(&state.db, id).await?;
    let limit = page::clamp_limit(params.limit);
    let page = query::list_activities(&state.db, id, limit, params.cursor.as_deref()).await?;
    Ok(HttpResponse::Ok().json(ActivityPage {
        data: page.data,
        next_cursor: page.next_cursor,
    }))
}
