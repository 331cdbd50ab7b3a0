//! `GET /openapi.json`: the document `crate::openapi` builds from the
//! routes' own registration.

use actix_web::{HttpResponse, get};

use crate::openapi::examples;
use crate::routes::Routes;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(serve);
}

/// This document: the OpenAPI 3.1 description of the API.
///
/// **Roles:** anyone (no token).
///
/// The same document is committed as `api/openapi.json`.
#[utoipa::path(
    operation_id = "openapi",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object, example = json!(examples::openapi_document()))),
)]
#[get("/openapi.json")]
async fn serve() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(crate::openapi::document(super::registered))
}
