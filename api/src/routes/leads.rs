//! `/api/leads`: intake upsert, the sales API (status, owner, notes) and reads.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{DateTime, Utc};
use domain::FieldError;
use domain::auth::Role;
use domain::entities::{activity, lead};
use domain::ingest::{self, IngestContext, Origin, Outcome};
use domain::lead_query::{self, LeadFilter, OwnerFilter, SortKey};
use domain::record::LeadRecord;
use domain::sales::{self, Actor};
use domain::status::LeadStatus;
use serde::{Deserialize, Deserializer, Serialize};

use crate::auth::{Authenticated, SALES_AND_UP};
use crate::body::{parse_json, read_json_bytes};
use crate::correlation::CorrelationId;
use crate::error::ApiError;
use crate::idempotency::{self, KeyRule, Reply, if_match_version};
use crate::startup::AppState;

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

/// A lead as the API shows it.
#[derive(Serialize)]
pub struct LeadOut {
    #[serde(flatten)]
    pub lead: lead::Model,
}

/// One lead with what only its own page shows.
#[derive(Serialize)]
struct LeadDetail {
    #[serde(flatten)]
    lead: LeadOut,
    /// Leads from other sources with the same email or phone (never merged).
    possible_duplicates: Vec<domain::processing::DuplicateHint>,
}

#[derive(Serialize)]
struct IngestOut {
    #[serde(flatten)]
    lead: LeadOut,
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

/// Upsert by the sender's natural key `(source, source_ref)`. Sales staff may
/// create `manual` leads; without a `source_ref` they need an Idempotency-Key
/// and the server assigns one.
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

/// `201` with `Location` for a new lead, `200` otherwise; the lead plus its outcome.
fn ingest_reply(done: ingest::Ingested) -> Result<Reply, ApiError> {
    let created = done.outcome == Outcome::Created;
    let location = format!("/api/leads/{}", done.lead.id);
    let tag = etag(&done.lead);
    let out = IngestOut {
        lead: LeadOut { lead: done.lead },
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

async fn get_lead(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let lead = sales::find_lead(&state.db, id.into_inner()).await?;
    let possible_duplicates = domain::processing::duplicates_of(&state.db, lead.id).await?;
    let tag = etag(&lead);
    let detail = LeadDetail {
        lead: LeadOut { lead },
        possible_duplicates,
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::ETAG, tag))
        .json(detail))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransitionIn {
    to: LeadStatus,
    reason: Option<String>,
}

/// Moves a lead along the status machine; honours `If-Match` and `Idempotency-Key`.
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
    let if_match = if_match_version(&req)?;
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
                    sales::transition(txn, id, input.to, input.reason, if_match, &actor).await?;
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LeadPatch {
    #[serde(default, deserialize_with = "present")]
    owner_id: Option<Option<i64>>,
}

/// Changes human-owned fields (the owner); honours `If-Match` and `Idempotency-Key`.
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
    let if_match = if_match_version(&req)?;
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
                    Some(owner_id) => sales::assign(txn, id, owner_id, if_match, &actor).await?,
                    None => sales::find_lead(txn, id).await?,
                };
                lead_reply(lead)
            })
        },
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoteIn {
    text: String,
}

/// Adds a note; `Idempotency-Key` required, since a note has no natural key.
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

#[derive(Deserialize)]
struct ListParams {
    status: Option<String>,
    owner: Option<String>,
    source: Option<String>,
    q: Option<String>,
    updated_since: Option<String>,
    sort: Option<String>,
    limit: Option<u64>,
    cursor: Option<String>,
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::Validation(vec![FieldError::new(field, message)])
}

impl ListParams {
    fn filter(&self, caller_id: i64) -> Result<LeadFilter, ApiError> {
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

#[derive(Serialize)]
struct LeadPage {
    data: Vec<LeadOut>,
    next_cursor: Option<String>,
}

/// Filtered, newest first, in pages that stay correct while leads arrive.
async fn list_leads(
    caller: Authenticated,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let filter = params.filter(caller.id)?;
    let limit = lead_query::clamp_limit(params.limit);
    let page = lead_query::list_leads(&state.db, &filter, limit, params.cursor.as_deref()).await?;
    Ok(HttpResponse::Ok().json(LeadPage {
        data: page.data.into_iter().map(|lead| LeadOut { lead }).collect(),
        next_cursor: page.next_cursor,
    }))
}

#[derive(Deserialize)]
struct PageParams {
    limit: Option<u64>,
    cursor: Option<String>,
}

#[derive(Serialize)]
struct ActivityPage {
    data: Vec<activity::Model>,
    next_cursor: Option<String>,
}

/// The lead's timeline, newest first.
async fn list_activities(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    params: web::Query<PageParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let id = id.into_inner();
    sales::find_lead(&state.db, id).await?;
    let limit = lead_query::clamp_limit(params.limit);
    let page = lead_query::list_activities(&state.db, id, limit, params.cursor.as_deref()).await?;
    Ok(HttpResponse::Ok().json(ActivityPage {
        data: page.data,
        next_cursor: page.next_cursor,
    }))
}
