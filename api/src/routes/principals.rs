//! `GET /api/me` and `GET /api/principals`: who the caller is, and the names
//! behind the principal ids the API returns (lead owners, note authors).

use actix_web::get;
use actix_web::{HttpResponse, web};
use domain::auth::{self};

use crate::http::auth::{AnyRole, Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::routes::Routes;
use crate::wire::principals::PrincipalOut;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(me);
    cfg.service(list);
}

/// The caller.
#[utoipa::path(
    operation_id = "get_me",
    tag = "meta",
    responses((status = 200, description = "The principal the token belongs to", body = PrincipalOut)),
    security(("bearer" = ["intake", "sales", "ops", "admin"])),
)]
#[get("/api/me")]
async fn me(caller: Caller<AnyRole>) -> HttpResponse {
    HttpResponse::Ok().json(PrincipalOut::new(caller.principal().clone(), true))
}

/// Every principal's id, name and role, oldest first.
#[utoipa::path(
    operation_id = "list_principals",
    tag = "meta",
    responses((status = 200, description = "Every principal", body = Vec<PrincipalOut>)),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/principals")]
async fn list(_: Caller<SalesUp>, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let all: Vec<PrincipalOut> = auth::list_principals(state.reads.db())
        .await?
        .into_iter()
        .map(|p| PrincipalOut::new(p.principal, p.active))
        .collect();
    Ok(HttpResponse::Ok().json(all))
}
