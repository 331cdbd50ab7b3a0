//! The static front page (`frontend-stub/`: plain HTML, CSS and JavaScript,
//! no build step, no external resources), compiled into the binary.

use actix_web::HttpResponse;
use actix_web::get;
use actix_web::http::header;

use crate::routes::Routes;

const INDEX_HTML: &str = include_str!("../../../frontend-stub/index.html");
const APP_JS: &str = include_str!("../../../frontend-stub/app.js");
const APP_CSS: &str = include_str!("../../../frontend-stub/app.css");

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(index).service(app_js).service(app_css);
}

/// A static file. `no-cache`: the browser revalidates, so a new binary's
/// page is never mixed with an old script. `nosniff`, `Referrer-Policy` and
/// a deny-all Content-Security-Policy come from `startup::security_headers`.
fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(body)
}

/// The page's own policy: its script and style sheet from this origin and
/// nothing inline (so injected markup cannot run script), API calls to this
/// origin only, and no framing (clickjacking).
pub const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The front page: leads, their timelines and an ops panel, in the browser.
///
/// **Roles:** anyone may load the page; it asks for a token and calls the API
/// with it.
#[utoipa::path(
    operation_id = "front_page",
    tag = "meta",
    responses((status = 200, description = "The page", content_type = "text/html", body = String)),
)]
#[get("/")]
async fn index() -> HttpResponse {
    let mut response = asset("text/html; charset=utf-8", INDEX_HTML);
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(PAGE_CSP),
    );
    response
}

/// The front page's script.
///
/// **Roles:** anyone (no token).
#[utoipa::path(
    operation_id = "front_app_js",
    tag = "meta",
    responses((status = 200, description = "JavaScript", content_type = "text/javascript", body = String)),
)]
#[get("/app.js")]
async fn app_js() -> HttpResponse {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// The front page's style sheet.
///
/// **Roles:** anyone (no token).
#[utoipa::path(
    operation_id = "front_app_css",
    tag = "meta",
    responses((status = 200, description = "CSS", content_type = "text/css", body = String)),
)]
#[get("/app.css")]
async fn app_css() -> HttpResponse {
    asset("text/css; charset=utf-8", APP_CSS)
}
