//! `POST /api/leads/{id}/convert` and `GET /api/leads/{id}/conversion`.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::conversion::{self, ConvertRequest, Converted};
use domain::entities::lead_conversion;
use domain::sales::Actor;
use serde::{Deserialize, Serialize};

use super::deals::DealIn;
use crate::auth::{Authenticated, SALES_AND_UP};
use crate::body::{parse_json, read_json_bytes};
use crate::correlation::CorrelationId;
use crate::error::ApiError;
use crate::idempotency::{self, KeyRule, Reply, if_match_version};
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/leads/{id}/convert").route(web::post().to(convert)))
        .service(web::resource("/api/leads/{id}/conversion").route(web::get().to(get_conversion)));
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ConvertIn {
    deal: Option<DealIn>,
}

#[derive(Serialize)]
struct ConvertOut {
    #[serde(flatten)]
    converted: Converted,
    conversion: Ids,
}

#[derive(Serialize)]
struct Ids {
    lead_id: i64,
    contact_id: i64,
    company_id: Option<i64>,
    deal_id: Option<i64>,
}

/// Converts a `qualified` lead in one transaction; `Idempotency-Key` required.
async fn convert(
    caller: Authenticated,
    correlation: CorrelationId,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<i64>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: ConvertIn = parse_json(&body)?;
    let if_match = if_match_version(&req)?;
    let id = id.into_inner();
    let principal = caller.0.clone();
    let actor = Actor {
        principal_id: caller.id,
        correlation_id: Some(correlation.0),
    };
    let request = ConvertRequest {
        deal: input.deal.map(DealIn::into_input),
    };
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Required,
        move |txn| {
            Box::pin(async move {
                let converted =
                    conversion::convert(txn, id, request, if_match, &principal, &actor).await?;
                let ids = Ids {
                    lead_id: converted.lead.id,
                    contact_id: converted.contact.id,
                    company_id: converted.company.as_ref().map(|c| c.id),
                    deal_id: converted.deal.as_ref().map(|d| d.id),
                };
                let etag = format!("\"{}\"", converted.lead.version);
                let out = ConvertOut {
                    converted,
                    conversion: ids,
                };
                Ok(Reply::new(StatusCode::CREATED, &out)?
                    .etag(etag)
                    .location(format!("/api/leads/{id}/conversion")))
            })
        },
    )
    .await
}

async fn get_conversion(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SALES_AND_UP)?;
    let found: Option<lead_conversion::Model> =
        conversion::find_conversion(&state.db, id.into_inner()).await?;
    let found = found.ok_or_else(|| ApiError::NotFound("this lead was not converted".into()))?;
    Ok(HttpResponse::Ok().json(found))
}
