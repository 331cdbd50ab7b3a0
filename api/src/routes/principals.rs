//! `GET /api/me`, `GET /api/principals` and `PATCH /api/principals/{id}`:
//! who the caller is, the names behind the principal ids the API returns
//! (lead owners, note authors), and what routing knows about sales staff.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, patch};
use domain::auth::Role;
use domain::routing::staff;

use crate::http::auth::{AnyRole, Caller, SalesOrAdmin, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply, ok_tagged};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::principals::{PrincipalOut, PrincipalPatch};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(me);
    cfg.service(list);
    cfg.service(patch);
}

/// The caller, with its routing attributes.
#[utoipa::path(
    operation_id = "get_me",
    tag = "meta",
    responses((status = 200, description = "The principal the token belongs to", body = PrincipalOut,
        headers(("ETag" = String)), example = json!(examples::principal()))),
    security(("bearer" = ["intake", "sales", "ops", "admin"])),
)]
#[get("/api/me")]
async fn me(caller: Caller<AnyRole>, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    // Read from the primary: a rep who just marked itself away sees it.
    let record = staff::find(&state.db, caller.id).await?;
    Ok(ok_tagged(&PrincipalOut::from(record)))
}

/// Every principal's id, name, role and routing attributes, oldest first.
#[utoipa::path(
    operation_id = "list_principals",
    tag = "meta",
    responses((status = 200, description = "Every principal", body = Vec<PrincipalOut>, example = json!(examples::principals()))),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/principals")]
async fn list(_: Caller<SalesUp>, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let all: Vec<PrincipalOut> = staff::list(state.reads.db())
        .await?
        .into_iter()
        .map(PrincipalOut::from)
        .collect();
    Ok(HttpResponse::Ok().json(all))
}

/// Change what routing knows about a sales principal.
///
/// An admin may change `team`, `capacity`, `availability` and `away_until`;
/// a `sales` principal only its own `availability` and `away_until` (`403`
/// otherwise). `availability: "available"` clears `away_until`. A principal
/// who becomes able to take more leads (back, more capacity, another team)
/// gets the leads waiting for an owner routed again.
#[utoipa::path(
    operation_id = "patch_principal",
    tag = "meta",
    params(("id" = i64, Path, description = "The principal's id"), IdempotencyKey, IfMatch),
    request_body(content = PrincipalPatch, example = json!({"team": "inside-sales", "availability": "away", "away_until": "2026-12-14T08:00:00Z", "capacity": 25})),
    responses(
        (status = 200, description = "The principal after the change", body = PrincipalOut, headers(("ETag" = String)), example = json!(examples::principal_away())),
        (status = 403, description = "`/problems/forbidden`: a sales principal changing another principal, or its team or capacity"),
        (status = 404, description = "`/problems/not-found`: no such principal"),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names another version"),
        (status = 422, description = "`/problems/validation`: a value out of range, `away_until` without `away`, or a principal that is not `sales`"),
    ),
    security(("bearer" = ["sales", "admin"])),
)]
#[patch("/api/principals/{id}")]
async fn patch(
    caller: Caller<SalesOrAdmin>,
    id: web::Path<PathId>,
    write: Write<PrincipalPatch>,
) -> WriteResult {
    let id = id.into_inner().0;
    // Before the body is read: another's record is none of a rep's business.
    if caller.role == Role::Sales && caller.id != id {
        return Err(ApiError::Forbidden(
            "a sales principal may change only its own availability".into(),
        ));
    }
    let by = caller.principal().clone();
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let updated = staff::update(txn, id, input, &if_match, Some(&by)).await?;
                Reply::tagged(StatusCode::OK, &PrincipalOut::from(updated.record))
            })
        })
        .await
}
