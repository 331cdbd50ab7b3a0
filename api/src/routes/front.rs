//! The static front page (no build step), compiled into the binary.

use actix_web::{HttpResponse, web};

const INDEX_HTML: &str = include_str!("../../../frontend-stub/index.html");

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(index));
}

async fn index() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(INDEX_HTML)
}
