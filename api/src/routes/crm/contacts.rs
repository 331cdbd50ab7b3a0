//! `/api/contacts`: matched by normalised email. A contact without an email
//! cannot be matched, so creating one requires an `Idempotency-Key`.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::crm::contact::{self, ContactFilter, ContactInput, ContactPatch};
use domain::crm::timeline::Subject;
use domain::entities::contact as entity;
use serde::{Deserialize, Serialize};

use super::{MatchOutcome, PageParams, author, get_tagged, invalid, present, tagged, window};
use crate::auth::{Authenticated, SALES_AND_UP};
use crate::body::{parse_json, read_json_bytes};
use crate::correlation::CorrelationId;
use crate::error::ApiError;
use crate::idempotency::{self, KeyRule, if_match_version};
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/contacts")
            .route("", web::post().to(create))
            .route("", web::get().to(list))
            .route("/{id}", web::get().to(get))
            .route("/{id}", web::patch().to(patch))
            .route("/{id}/activities", web::get().to(activities)),
    );
}

#[derive(Serialize)]
struct ContactOut {
    #[serde(flatten)]
    contact: entity::Model,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<MatchOutcome>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContactIn {
    email: Option<String>,
    name: Option<String>,
    phone: Option<String>,
    company_id: Option<i64>,
}

/// Creates the contact, or answers the one with the same email (`200`,
/// `"outcome": "matched"`, left as it is).
async fn create(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: ContactIn = parse_json(&body)?;
    let new = ContactInput {
        email: input.email,
        name: input.name,
        phone: input.phone,
        company_id: input.company_id,
    }
    .validate()?;
    if new.email.is_none() && new.name.is_none() && new.phone.is_none() {
        return Err(invalid(
            "email",
            "a contact needs an email, a name or a phone",
        ));
    }
    let rule = if new.email.is_some() {
        KeyRule::Optional
    } else {
        KeyRule::Required
    };
    let author = author(&caller, correlation);
    idempotency::run(&state, &caller, &req, &body, rule, move |txn| {
        Box::pin(async move {
            let found = contact::match_or_create(txn, &new, &author).await?;
            let outcome = MatchOutcome::of(found.created);
            let version = found.model.version;
            let location = format!("/api/contacts/{}", found.model.id);
            let out = ContactOut {
                contact: found.model,
                outcome: Some(outcome),
            };
            Ok(tagged(outcome.status(), &out, version)?.location(location))
        })
    })
    .await
}

async fn get(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let contact = contact::find(&state.db, id.into_inner()).await?;
    let version = contact.version;
    Ok(get_tagged(
        &ContactOut {
            contact,
            outcome: None,
        },
        version,
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchIn {
    #[serde(default, deserialize_with = "present")]
    email: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    phone: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    company_id: Option<Option<i64>>,
}

async fn patch(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: PatchIn = parse_json(&body)?;
    let if_match = if_match_version(&req)?;
    let (id, author) = (id.into_inner(), author(&caller, correlation));
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Optional,
        move |txn| {
            Box::pin(async move {
                let patch = ContactPatch {
                    email: input.email,
                    name: input.name,
                    phone: input.phone,
                    company_id: input.company_id,
                };
                let contact = contact::update(txn, id, patch, if_match, &author).await?;
                let version = contact.version;
                tagged(
                    StatusCode::OK,
                    &ContactOut {
                        contact,
                        outcome: None,
                    },
                    version,
                )
            })
        },
    )
    .await
}

#[derive(Deserialize)]
struct ListParams {
    q: Option<String>,
    email: Option<String>,
    company_id: Option<i64>,
    updated_since: Option<String>,
    sort: Option<String>,
    limit: Option<u64>,
    cursor: Option<String>,
}

#[derive(Serialize)]
struct ContactPage {
    data: Vec<entity::Model>,
    next_cursor: Option<String>,
}

async fn list(
    caller: Authenticated,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let params = params.into_inner();
    let window = window(
        params.updated_since.as_deref(),
        params.sort.as_deref(),
        params.limit,
        params.cursor,
    )?;
    let filter = ContactFilter {
        q: params.q,
        email: params.email,
        company_id: params.company_id,
    };
    let page = contact::list(&state.db, &filter, &window).await?;
    Ok(HttpResponse::Ok().json(ContactPage {
        data: page.data,
        next_cursor: page.next_cursor,
    }))
}

async fn activities(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    params: web::Query<PageParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let id = id.into_inner();
    contact::find(&state.db, id).await?;
    super::timeline_page(&state, Subject::Contact, id, &params).await
}
