//! `POST /api/leads/{id}/convert` and `GET /api/leads/{id}/conversion`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, post};
use domain::crm::conversion::{self, ConvertRequest};
use domain::entities::lead_conversion;

use crate::http::auth::{Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply};
use crate::http::params::{IdempotencyKeyRequired, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::convert::{ConvertIn, ConvertOut, Ids};
use crate::wire::deals::DealIn;
use crate::wire::leads::LeadConversionOut;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(convert).service(get_conversion);
}

/// Convert a `qualified` lead into a contact, a company and, when asked, a deal.
///
/// In one transaction: the lead moves `qualified → converted`; the company
/// is matched or created (by the email's domain unless free mail, else by
/// the lead's `company`); the contact is matched by email or created; the
/// deal is created when the body has `deal`; timeline entries and the
/// outbox event `lead.converted` are written. `Idempotency-Key` is
/// required: a retry with the same key replays the answer, a conversion
/// with another key is `409 /problems/already-converted`.
#[utoipa::path(
    operation_id = "convert_lead",
    tag = "crm",
    params(("id" = i64, Path, description = "The lead's id"), IdempotencyKeyRequired, IfMatch),
    request_body(content = ConvertIn, example = json!({"deal": {"name": "Acme: fleet tracking, 40 vans", "amount_cents": 1850000, "currency": "EUR"}})),
    responses(
        (status = 201, description = "Converted; `ETag` is the lead's new version", body = ConvertOut,
            headers(("Location" = String), ("ETag" = String)), example = json!(examples::conversion())),
        (status = 404, description = "`/problems/not-found`: no such lead"),
        (status = 409, description = "`/problems/illegal-transition` (the lead is not `qualified`; `allowed` lists its legal moves) or `/problems/already-converted` (`conversion` names the earlier conversion's ids)."),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/leads/{id}/convert")]
async fn convert(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<ConvertIn>,
) -> WriteResult {
    let (id, actor) = (id.into_inner().0, caller.actor());
    let principal = caller.principal().clone();
    write
        .run(&caller, KeyRule::Required, move |txn, input, if_match| {
            Box::pin(async move {
                let request = ConvertRequest {
                    deal: input.deal.map(DealIn::into_input),
                };
                let converted =
                    conversion::convert(txn, id, request, &if_match, &principal, &actor).await?;
                let ids = Ids {
                    lead_id: converted.lead.id,
                    contact_id: converted.contact.id,
                    company_id: converted.company.as_ref().map(|c| c.id),
                    deal_id: converted.deal.as_ref().map(|d| d.id),
                };
                let out = ConvertOut {
                    converted: converted.into(),
                    conversion: ids,
                };
                Ok(Reply::tagged(StatusCode::CREATED, &out)?
                    .location(format!("/api/leads/{id}/conversion")))
            })
        })
        .await
}

/// The conversion of a lead.
#[utoipa::path(
    operation_id = "get_lead_conversion",
    tag = "crm",
    params(("id" = i64, Path, description = "The lead's id")),
    responses(
        (status = 200, description = "The conversion's ids", body = LeadConversionOut, example = json!(examples::lead_conversion())),
        (status = 404, description = "`/problems/not-found`: no such lead, or it was not converted"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/leads/{id}/conversion")]
async fn get_conversion(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let found: Option<lead_conversion::Model> =
        conversion::find_conversion(&state.db, id.into_inner().0).await?;
    let found = found.ok_or_else(|| ApiError::NotFound("this lead was not converted".into()))?;
    Ok(HttpResponse::Ok().json(LeadConversionOut::from(found)))
}
