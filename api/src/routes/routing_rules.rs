//! `/api/routing-rules`: which team gets which leads, replaced whole under
//! `If-Match`, and a preview of who would get a lead.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, post, put};
use domain::routing::{router, rules};

use crate::http::auth::{AdminOnly, Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply, ok_tagged};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::routing_rules::{PreviewIn, PreviewOut, RoutingRulesIn, RoutingRulesOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(get).service(replace).service(preview);
}

/// The routing rules, first match first.
#[utoipa::path(
    operation_id = "get_routing_rules",
    tag = "crm",
    responses((status = 200, description = "The rules", body = RoutingRulesOut, headers(("ETag" = String)), example = json!(examples::routing_rules()))),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/routing-rules")]
async fn get(_: Caller<SalesUp>, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let set = rules::load(&state.db).await?;
    Ok(ok_tagged(&RoutingRulesOut::from(set)))
}

/// Replace the routing rules.
///
/// The whole list at once; send `If-Match` with the `ETag` of the list you
/// changed, so two admins do not undo each other (`412` if it changed
/// since). Each rule takes the leads of its `source` (any if absent) whose
/// payload meets every condition, and shares them among the active sales
/// principals of its `team`, `round_robin` or `weighted`. The leads waiting
/// for an owner are routed again under the new rules.
#[utoipa::path(
    operation_id = "put_routing_rules",
    tag = "crm",
    params(IdempotencyKey, IfMatch),
    request_body(content = RoutingRulesIn, example = json!({"rules": [{"source": "webform", "conditions": [{"pointer": "/employees", "gte": 100}], "team": "enterprise", "strategy": "round_robin"}, {"team": "inside-sales", "strategy": "round_robin"}]})),
    responses(
        (status = 200, description = "The rules after the change", body = RoutingRulesOut, headers(("ETag" = String)), example = json!(examples::routing_rules())),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names another version"),
        (status = 422, description = "`/problems/validation`: every bad field, named like `rules[2].team`"),
    ),
    security(("bearer" = ["admin"])),
)]
#[put("/api/routing-rules")]
async fn replace(caller: Caller<AdminOnly>, write: Write<RoutingRulesIn>) -> WriteResult {
    let by = caller.id;
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let set = rules::replace(txn, input.rules, &if_match, Some(by)).await?;
                Reply::tagged(StatusCode::OK, &RoutingRulesOut::from(set))
            })
        })
        .await
}

/// Who would get a lead, and why.
///
/// Give a stored lead (`lead_id`) or describe one (`source`, `payload`).
/// Answers the rule that matched, the pool, who the next turn gives it to
/// and whom it passes by (`away`, `at_capacity`); takes no turn and writes
/// nothing.
#[utoipa::path(
    operation_id = "preview_routing",
    tag = "crm",
    request_body(content = PreviewIn, example = json!({"source": "webform", "payload": {"country": "DE", "employees": 120}})),
    responses(
        (status = 200, description = "Who would get it", body = PreviewOut, example = json!(examples::routing_preview())),
        (status = 404, description = "`/problems/not-found`: no such lead"),
        (status = 422, description = "`/problems/validation`: neither or both of `lead_id` and `source`"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/routing-rules/preview")]
async fn preview(_: Caller<SalesUp>, write: Write<PreviewIn>) -> Result<HttpResponse, ApiError> {
    let parsed = write.read().await?;
    let state = parsed.state();
    let input = parsed.input;
    let (source, payload, routed) = match (input.lead_id, input.source) {
        (Some(id), None) => {
            if input.payload.is_some() {
                return Err(ApiError::invalid(
                    "payload",
                    "give a payload with a source, not with a lead_id",
                ));
            }
            let lead = domain::lead::sales::find_lead(&state.db, id).await?;
            let routed = lead.owner_id.is_none() && lead.status.is_open();
            (lead.source, lead.payload, routed)
        }
        (None, Some(source)) => (
            source,
            input.payload.unwrap_or_else(|| serde_json::json!({})),
            true,
        ),
        _ => {
            return Err(ApiError::invalid(
                "lead_id",
                "give either lead_id or source (with its payload)",
            ));
        }
    };
    let preview = router::preview(&state.db, &source, &payload).await?;
    Ok(HttpResponse::Ok().json(PreviewOut::new(preview, routed)))
}
