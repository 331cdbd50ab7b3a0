//! The static front page (no build step), compiled into the binary.

use actix_web::{HttpResponse, web};

const INDEX_HTML: &str = include_str!("../../../frontend-stub/index.html");

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(index));
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(index))]
pub struct Api;

/// The front page: leads, their timelines and an ops panel, in the browser.
///
/// **Roles:** anyone may load the page; it asks for a token and calls the API
/// with it.
#[utoipa::path(
    get,
    path = "/",
    operation_id = "front_page",
    tag = "meta",
    responses((status = 200, description = "The page", content_type = "text/html", body = String)),
)]
async fn index() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(INDEX_HTML)
}
