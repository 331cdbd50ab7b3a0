//! `GET /metrics`: on the public listener with an ops or admin token, or on
//! a listener of its own (`LEADPIPE_METRICS_BIND`) without one.

use actix_web::get;
use std::sync::Arc;

use actix_web::{HttpResponse, web};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::metrics;
use crate::http::security_headers::security_headers;
use crate::http::state::AppState;
use crate::routes::Routes;

/// On the public listener: needs an ops or admin token.
pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(scrape);
}

/// A listener that serves `/metrics` and nothing else, without a token, for
/// `LEADPIPE_METRICS_BIND`: an address only the scraper can reach. `serve`
/// and `work` both open one, so every process's counters are scraped.
pub fn metrics_only_server(
    listener: std::net::TcpListener,
    gauges: Arc<metrics::Gauges>,
) -> std::io::Result<actix_web::dev::Server> {
    let gauges = web::Data::new(gauges);
    Ok(actix_web::HttpServer::new(move || {
        actix_web::App::new()
            .app_data(gauges.clone())
            .configure(configure_open)
            .default_service(web::to(|| async {
                Err::<HttpResponse, _>(ApiError::NotFound("no such route".into()))
            }))
            .wrap(security_headers())
    })
    .workers(1)
    .listen(listener)?
    .shutdown_timeout(10)
    .run())
}

/// On the metrics listener (`LEADPIPE_METRICS_BIND`): no token, reachable
/// only by whoever can reach that address.
pub fn configure_open(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(scrape_open));
}

/// Prometheus metrics.
///
/// With `LEADPIPE_METRICS_BIND` set, `/metrics` is served on that address
/// instead, without a token, and this listener answers `404`.
///
/// Never queries the database: the gauges read from it (backlogs, ages) are
/// refreshed in the background; `leadpipe_metrics_gauges_age_seconds` says
/// how old they are.
#[utoipa::path(
    operation_id = "metrics",
    tag = "meta",
    responses(
        (status = 200, description = "The Prometheus text exposition format", content_type = "text/plain; version=0.0.4", body = String),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/metrics")]
pub async fn scrape(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    Ok(metrics::render(&state.gauges))
}

async fn scrape_open(gauges: web::Data<Arc<metrics::Gauges>>) -> HttpResponse {
    metrics::render(&gauges)
}
