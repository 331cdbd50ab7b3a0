//! `/api/leads`: the intake upsert and reading a lead.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::auth::Role;
use domain::entities::lead;
use domain::ingest::{self, IngestContext, Origin, Outcome};
use domain::record::LeadRecord;
use sea_orm::EntityTrait;
use serde::Serialize;

use crate::auth::{Authenticated, SALES_AND_UP};
use crate::body::read_json;
use crate::correlation::CorrelationId;
use crate::error::ApiError;
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/leads")
            .route("", web::post().to(create_or_update))
            .route("/{id}", web::get().to(get_lead)),
    );
}

/// A lead as the API shows it.
#[derive(Serialize)]
pub struct LeadOut {
    #[serde(flatten)]
    pub lead: lead::Model,
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

/// Upsert by the sender's natural key `(source, source_ref)`.
async fn create_or_update(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(&[Role::Intake, Role::Admin])?;
    let record: LeadRecord = read_json(&req, body, state.http.max_body_bytes).await?;
    if !caller.may_ingest_for(record.source.trim()) {
        return Err(ApiError::Forbidden(format!(
            "this token may not post leads for source '{}'",
            record.source.trim()
        )));
    }
    let ctx = IngestContext {
        correlation_id: Some(correlation.0),
        author_id: Some(caller.id),
    };
    let done = ingest::ingest(&state.db, record, Origin::Api, &ctx).await?;
    let mut response = if done.outcome == Outcome::Created {
        let mut created = HttpResponse::Created();
        created.insert_header((header::LOCATION, format!("/api/leads/{}", done.lead.id)));
        created
    } else {
        HttpResponse::Ok()
    };
    Ok(response
        .insert_header((header::ETAG, etag(&done.lead)))
        .json(IngestOut {
            lead: LeadOut { lead: done.lead },
            outcome: done.outcome,
        }))
}

async fn get_lead(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let id = id.into_inner();
    let lead = lead::Entity::find_by_id(id)
        .one(&state.db)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no lead {id}")))?;
    Ok(HttpResponse::Ok()
        .insert_header((header::ETAG, etag(&lead)))
        .json(LeadOut { lead }))
}
