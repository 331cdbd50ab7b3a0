//! `POST /api/leads/{id}/convert` and `GET /api/leads/{id}/conversion`.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::crm::conversion::{self, ConvertRequest, Converted};
use domain::entities::lead_conversion;
use domain::lead::sales::Actor;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::deals::DealIn;
use crate::http::auth::{Authenticated, SALES_AND_UP};
use crate::http::body::{parse_json, read_json_bytes};
use crate::http::correlation::CorrelationId;
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, Reply, if_match_version};
use crate::http::params::{IdempotencyKeyRequired, IfMatch};
use crate::http::state::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/leads/{id}/convert").route(web::post().to(convert)))
        .service(web::resource("/api/leads/{id}/conversion").route(web::get().to(get_conversion)));
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(convert, get_conversion))]
pub(super) struct Api;

/// What to convert the lead into besides a contact and a company.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
struct ConvertIn {
    /// Also create a deal; its owner defaults to the lead's owner, else a
    /// `sales` caller.
    deal: Option<DealIn>,
}

/// The converted lead and the records it became.
#[derive(Serialize, ToSchema)]
struct ConvertOut {
    #[serde(flatten)]
    converted: Converted,
    conversion: Ids,
}

/// The ids of one conversion.
#[derive(Serialize, ToSchema)]
#[schema(as = ConversionIds)]
struct Ids {
    lead_id: i64,
    contact_id: i64,
    company_id: Option<i64>,
    deal_id: Option<i64>,
}

/// Convert a `qualified` lead into a contact, a company and, when asked, a deal.
///
/// **Roles:** sales, ops, admin.
///
/// In one transaction: the lead moves `qualified → converted`; the company
/// is matched or created (by the email's domain unless free mail, else by
/// the lead's `company`); the contact is matched by email or created; the
/// deal is created when the body has `deal`; timeline entries and the
/// outbox event `lead.converted` are written. `Idempotency-Key` is
/// required: a retry with the same key replays the answer, a conversion
/// with another key is `409 /problems/already-converted`.
#[utoipa::path(
    post,
    path = "/api/leads/{id}/convert",
    operation_id = "convert_lead",
    tag = "crm",
    params(("id" = i64, Path, description = "The lead's id"), IdempotencyKeyRequired, IfMatch),
    request_body = ConvertIn,
    responses(
        (status = 201, description = "Converted; `ETag` is the lead's new version", body = ConvertOut,
            headers(("Location" = String), ("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such lead"),
        (status = 409, description = "`/problems/illegal-transition` (the lead is not `qualified`; `allowed` lists its legal moves) or `/problems/already-converted` (`conversion` names the earlier conversion's ids)."),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names an old version; `current_version` is the current one"),
    ),
    security(("bearer" = [])),
)]
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
    let if_match = if_match_version(&req);
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
                    conversion::convert(txn, id, request, &if_match, &principal, &actor).await?;
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

/// The conversion of a lead.
///
/// **Roles:** sales, ops, admin.
#[utoipa::path(
    get,
    path = "/api/leads/{id}/conversion",
    operation_id = "get_lead_conversion",
    tag = "crm",
    params(("id" = i64, Path, description = "The lead's id")),
    responses(
        (status = 200, description = "The conversion's ids", body = lead_conversion::Model),
        (status = 404, description = "`/problems/not-found`: no such lead, or it was not converted"),
    ),
    security(("bearer" = [])),
)]
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
