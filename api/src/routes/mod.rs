//! One module per resource: its request/response types, handlers and routes;
//! `ops/` for operating the pipeline. Each module's part of the OpenAPI
//! document is listed in `crate::openapi::parts`.

use actix_web::web;

pub mod crm;
pub mod docs;
pub mod event_types;
pub mod front;
pub mod health;
pub mod imports;
pub mod leads;
pub mod metrics;
pub mod ops;
pub mod sources;
pub mod subscriptions;
pub mod subscriptions_manage;
pub mod webhooks;

/// Every route; `/metrics` only when it is not on its own listener.
pub fn configure(cfg: &mut web::ServiceConfig, metrics: bool) {
    front::configure(cfg);
    docs::configure(cfg);
    health::configure(cfg);
    if metrics {
        metrics::configure(cfg);
    }
    crm::configure(cfg);
    imports::configure(cfg);
    leads::configure(cfg);
    subscriptions::configure(cfg);
    event_types::configure(cfg);
    ops::deliveries::configure(cfg);
    ops::stats::configure(cfg);
    ops::trace::configure(cfg);
    sources::configure(cfg);
    webhooks::configure(cfg);
    ops::inbox::configure(cfg);
    ops::reconcile::configure(cfg);
    crate::openapi::configure(cfg);
}
