//! `GET /docs`: a human-readable API reference rendered in the browser by
//! RapiDoc from `GET /openapi.json`, the same document the tests check.
//! RapiDoc (MIT) is vendored in `api/vendor/rapidoc/` and compiled in: the
//! page loads nothing from another origin.

use actix_web::HttpResponse;
use actix_web::get;
use actix_web::http::header;

use crate::routes::Routes;

const RAPIDOC_JS: &str = include_str!("../../vendor/rapidoc/rapidoc-min.js");

const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leadpipe API reference</title>
<script type="module" src="/docs/rapidoc-min.js"></script>
</head>
<body>
<rapi-doc spec-url="/openapi.json" render-style="read" theme="light"
  show-header="false" allow-spec-url-load="false" allow-spec-file-load="false"
  allow-server-selection="false" allow-authentication="true"
  persist-auth="false" load-fonts="false"
  regular-font="system-ui, sans-serif" mono-font="ui-monospace, monospace"></rapi-doc>
</body>
</html>
"#;

/// The reference's own policy: script from this origin only, calls to this
/// origin only (the spec and "try it"), no framing. RapiDoc styles its
/// components inline; `load-fonts="false"` keeps it from fetching web fonts
/// (and `font-src` would refuse them).
pub const DOCS_CSP: &str = "default-src 'none'; script-src 'self'; \
style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(page);
    cfg.service(script);
}

/// The API reference, in the browser.
///
/// **Roles:** anyone (no token); "try it" asks for one.
#[utoipa::path(
    operation_id = "api_reference",
    tag = "meta",
    responses((status = 200, description = "The page", content_type = "text/html", body = String)),
)]
#[get("/docs")]
async fn page() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::CONTENT_SECURITY_POLICY, DOCS_CSP))
        .body(PAGE)
}

/// The vendored RapiDoc script the reference page loads.
///
/// **Roles:** anyone (no token).
#[utoipa::path(
    operation_id = "api_reference_js",
    tag = "meta",
    responses((status = 200, description = "JavaScript", content_type = "text/javascript", body = String)),
)]
#[get("/docs/rapidoc-min.js")]
async fn script() -> HttpResponse {
    // Changes only with the binary: a day's caching is safe behind `no-cache` HTML.
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=86400"))
        .body(RAPIDOC_JS)
}
