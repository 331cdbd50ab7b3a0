//! Correlation ids: taken from `X-Request-Id` or generated, returned on every
//! response and recorded on the request's span, so one id follows a lead from
//! the request to its activity and outbox rows.

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpMessage, HttpRequest};
use futures::future::{Ready, ready};
use tracing::Instrument;

pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrelationId(pub String);

fn acceptable(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let id = req
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string());
    req.extensions_mut().insert(CorrelationId(id.clone()));
    // The path only: query strings may carry personal data (`q=`).
    let span = tracing::info_span!(
        "http.request",
        method = %req.method(),
        path = %req.path(),
        correlation_id = %id,
        principal = tracing::field::Empty,
    );
    let started = Instant::now();
    let mut res = next.call(req).instrument(span.clone()).await?;
    if let Ok(value) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(X_REQUEST_ID, value);
    }
    let route = route_of(res.request());
    let labels = [
        ("method", res.request().method().to_string()),
        ("route", route),
        ("status", res.status().as_u16().to_string()),
    ];
    metrics::counter!("leadpipe_http_requests_total", &labels).increment(1);
    metrics::histogram!("leadpipe_http_request_duration_seconds", &labels)
        .record(started.elapsed().as_secs_f64());
    span.in_scope(|| {
        tracing::info!(
            status = res.status().as_u16(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
            "request finished"
        )
    });
    Ok(res)
}

thread_local! {
    /// Paths that are their own route pattern (no `{param}`), seen on this
    /// worker: bounded by the routes, and known ones skip the router's
    /// pattern matching (regexes), which showed in intake's profile.
    static STATIC_ROUTES: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

/// The matched route pattern for the metrics' `route` label.
fn route_of(req: &HttpRequest) -> String {
    let path = req.path();
    if STATIC_ROUTES.with(|known| known.borrow().contains(path)) {
        return path.to_owned();
    }
    match req.match_pattern() {
        Some(pattern) => {
            if pattern == path {
                STATIC_ROUTES.with(|known| known.borrow_mut().insert(pattern.clone()));
            }
            pattern
        }
        None => "unmatched".to_owned(),
    }
}

impl FromRequest for CorrelationId {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let id = req.extensions().get::<CorrelationId>().cloned();
        ready(Ok(id.unwrap_or_else(|| {
            CorrelationId(uuid::Uuid::now_v7().simple().to_string())
        })))
    }
}
