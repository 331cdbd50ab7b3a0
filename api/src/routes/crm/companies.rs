//! `/api/companies`: matched by normalised domain (from `domain` or
//! `website`) or, lacking one, by normalised name.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::crm::company::{self, CompanyFilter, CompanyInput, CompanyPatch};
use domain::crm::timeline::Subject;
use domain::entities::company as entity;
use serde::{Deserialize, Serialize};

use super::{MatchOutcome, PageParams, author, get_tagged, present, tagged, window};
use crate::auth::{Authenticated, SALES_AND_UP};
use crate::body::{parse_json, read_json_bytes};
use crate::correlation::CorrelationId;
use crate::error::ApiError;
use crate::idempotency::{self, KeyRule, if_match_version};
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/companies")
            .route("", web::post().to(create))
            .route("", web::get().to(list))
            .route("/{id}", web::get().to(get))
            .route("/{id}", web::patch().to(patch))
            .route("/{id}/activities", web::get().to(activities)),
    );
}

#[derive(Serialize)]
struct CompanyOut {
    #[serde(flatten)]
    company: entity::Model,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<MatchOutcome>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompanyIn {
    name: Option<String>,
    domain: Option<String>,
    /// A URL; its host becomes the domain when `domain` is absent.
    website: Option<String>,
}

/// Creates the company, or answers the one that already matches (`200`,
/// `"outcome": "matched"`): a repeat never duplicates.
async fn create(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: CompanyIn = parse_json(&body)?;
    let new = CompanyInput {
        name: input.name,
        domain: input.domain.or(input.website),
    }
    .validate()?;
    let author = author(&caller, correlation);
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Optional,
        move |txn| {
            Box::pin(async move {
                let found = company::match_or_create(txn, &new, &author).await?;
                let outcome = MatchOutcome::of(found.created);
                let version = found.model.version;
                let location = format!("/api/companies/{}", found.model.id);
                let out = CompanyOut {
                    company: found.model,
                    outcome: Some(outcome),
                };
                Ok(tagged(outcome.status(), &out, version)?.location(location))
            })
        },
    )
    .await
}

async fn get(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let company = company::find(&state.db, id.into_inner()).await?;
    let version = company.version;
    Ok(get_tagged(
        &CompanyOut {
            company,
            outcome: None,
        },
        version,
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchIn {
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    domain: Option<Option<String>>,
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
                let patch = CompanyPatch {
                    name: input.name,
                    domain: input.domain,
                };
                let company = company::update(txn, id, patch, if_match, &author).await?;
                let version = company.version;
                tagged(
                    StatusCode::OK,
                    &CompanyOut {
                        company,
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
    domain: Option<String>,
    updated_since: Option<String>,
    sort: Option<String>,
    limit: Option<u64>,
    cursor: Option<String>,
}

#[derive(Serialize)]
struct CompanyPage {
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
    let filter = CompanyFilter {
        q: params.q,
        domain: params.domain,
    };
    let page = company::list(&state.db, &filter, &window).await?;
    Ok(HttpResponse::Ok().json(CompanyPage {
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
    company::find(&state.db, id).await?;
    super::timeline_page(&state, Subject::Company, id, &params).await
}
