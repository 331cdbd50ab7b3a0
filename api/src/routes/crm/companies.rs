//! `/api/companies`: matched by normalised domain (from `domain` or
//! `website`) or, lacking one, by normalised name.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, patch, post};
use domain::crm::company::{self, CompanyFilter, CompanyInput};
use domain::crm::timeline::Subject;

use super::matched;
use super::wire::Company;
use crate::http::auth::{Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply, ok_tagged};
use crate::http::list::{ListParams, WindowParams};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::companies::{CompanyIn, CompanyOut, CompanyPatch, Filter};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(create)
        .service(list)
        .service(get)
        .service(patch)
        .service(activities);
}

/// Create a company, or find the one that matches.
///
/// Matched by its normalised domain or, without one, by its normalised
/// name, through unique keys in the database: a repeat answers the existing
/// company (`200`, `outcome: matched`) and never duplicates it.
#[utoipa::path(
    operation_id = "create_company",
    tag = "crm",
    params(IdempotencyKey),
    request_body(content = CompanyIn, example = json!({"name": "Acme Logistics GmbH", "domain": "acme-logistics.de", "website": "https://acme-logistics.de"})),
    responses(
        (status = 201, description = "Created (`outcome: created`)", body = CompanyOut,
            headers(("Location" = String), ("ETag" = String)), example = json!(examples::company_created())),
        (status = 200, description = "An existing company matched (`outcome: matched`), unchanged", body = CompanyOut,
            headers(("Location" = String), ("ETag" = String)), example = json!(examples::company_matched())),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/companies")]
async fn create(caller: Caller<SalesUp>, write: Write<CompanyIn>) -> WriteResult {
    let author = caller.actor();
    let write = write.read().await?.try_map(|input| {
        Ok(CompanyInput {
            name: input.name,
            domain: input.domain.or(input.website),
        }
        .validate()?)
    })?;
    write
        .run(&caller, KeyRule::Optional, move |txn, new, _| {
            Box::pin(async move {
                let found = company::match_or_create(txn, &new, &author).await?;
                matched(found, "/api/companies", |company, outcome| CompanyOut {
                    company: company.into(),
                    outcome,
                })
            })
        })
        .await
}

/// One company.
#[utoipa::path(
    operation_id = "get_company",
    tag = "crm",
    params(("id" = i64, Path, description = "The company's id")),
    responses(
        (status = 200, description = "The company", body = CompanyOut, headers(("ETag" = String)), example = json!(examples::company())),
        (status = 404, description = "`/problems/not-found`: no such company"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/companies/{id}")]
async fn get(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let company = company::find(&state.db, id.into_inner().0).await?;
    Ok(ok_tagged(&CompanyOut::from(company)))
}

/// Change a company's name or domain.
#[utoipa::path(
    operation_id = "patch_company",
    tag = "crm",
    params(("id" = i64, Path, description = "The company's id"), IdempotencyKey, IfMatch),
    request_body(content = CompanyPatch, example = json!({"name": "Acme Logistics SE"})),
    responses(
        (status = 200, description = "The company after the change", body = CompanyOut, headers(("ETag" = String)), example = json!(examples::company_renamed())),
        (status = 404, description = "`/problems/not-found`: no such company"),
        (status = 409, description = "`/problems/conflict`: another company has this domain"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[patch("/api/companies/{id}")]
async fn patch(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<CompanyPatch>,
) -> WriteResult {
    let (id, author) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let company = company::update(txn, id, input, &if_match, &author).await?;
                Reply::tagged(StatusCode::OK, &CompanyOut::from(company))
            })
        })
        .await
}

/// List companies, newest first.
#[utoipa::path(
    operation_id = "list_companies",
    tag = "crm",
    params(Filter, WindowParams, ListParams),
    responses((status = 200, description = "A page of companies", body = super::CompanyPage, example = json!(examples::company_page()))),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/companies")]
async fn list(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
    window: web::Query<WindowParams>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let window = page.into_inner().window(&window)?;
    let Filter { q, domain } = filter.into_inner();
    let page = company::list(state.reads.db(), &CompanyFilter { q, domain }, &window).await?;
    Ok(HttpResponse::Ok().json(page.map(Company::from)))
}

/// A company's timeline, newest first.
#[utoipa::path(
    operation_id = "list_company_activities",
    tag = "crm",
    params(("id" = i64, Path, description = "The company's id"), ListParams),
    responses(
        (status = 200, description = "A page of the timeline", body = super::CrmActivityPage, example = json!(examples::company_activity_page())),
        (status = 404, description = "`/problems/not-found`: no such company"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/companies/{id}/activities")]
async fn activities(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    company::find(&state.db, id).await?;
    super::timeline_page(&state, Subject::Company, id, page.into_inner()).await
}
