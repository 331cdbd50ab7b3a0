//! One module per resource: its request/response types, handlers and routes;
//! `ops/` for operating the pipeline. A handler's method and path are
//! written once, in its route attribute (`#[get("/api/..")]`); registering
//! it with `Routes::service` serves it and adds its operation to the OpenAPI
//! document.

use actix_web::dev::HttpServiceFactory;
use actix_web::web;
use utoipa::openapi::path::Paths;
use utoipa::openapi::{RefOr, Schema};
use utoipa_actix_web::OpenApiFactory;

pub mod crm;
pub mod docs;
pub mod event_types;
pub mod front;
pub mod health;
pub mod imports;
pub mod lead_data;
pub mod leads;
pub mod metrics;
pub mod ops;
pub mod principals;
pub mod sources;
pub mod subscriptions;
pub mod subscriptions_manage;
pub mod webhooks;

/// Where a module registers its handlers: actix's `ServiceConfig`, also
/// collecting each handler's OpenAPI operation and the schemas it names.
pub struct Routes<'a> {
    cfg: &'a mut web::ServiceConfig,
    paths: Paths,
    schemas: Vec<(String, RefOr<Schema>)>,
}

impl<'a> Routes<'a> {
    pub fn new(cfg: &'a mut web::ServiceConfig) -> Self {
        Self {
            cfg,
            paths: Paths::new(),
            schemas: Vec::new(),
        }
    }

    /// Serves a handler (method and path from its route attribute) and
    /// describes it (its `#[utoipa::path]`).
    pub fn service<H>(&mut self, handler: H) -> &mut Self
    where
        H: HttpServiceFactory + OpenApiFactory + 'static,
    {
        self.paths.merge(handler.paths());
        handler.schemas(&mut self.schemas);
        self.cfg.service(handler);
        self
    }

    /// The operations registered, and every schema they name (a name may
    /// come more than once, from several handlers).
    pub fn into_parts(self) -> (Paths, Vec<(String, RefOr<Schema>)>) {
        (self.paths, self.schemas)
    }
}

/// Every route, in the order of the OpenAPI document; `/metrics` only when
/// it is not on its own listener. Each path is matched exactly (no scopes),
/// so the order matters only between a literal segment and a parameter in
/// one module (`/api/ops/inbox/retry` before `/api/ops/inbox/{id}`).
pub fn configure(cfg: &mut Routes<'_>, metrics: bool) {
    crate::openapi::configure(cfg);
    docs::configure(cfg);
    if metrics {
        metrics::configure(cfg);
    }
    front::configure(cfg);
    health::configure(cfg);
    crm::configure(cfg);
    imports::configure(cfg);
    lead_data::configure(cfg);
    leads::configure(cfg);
    principals::configure(cfg);
    subscriptions::configure(cfg);
    event_types::configure(cfg);
    ops::deliveries::configure(cfg);
    ops::stats::configure(cfg);
    ops::stats_series::configure(cfg);
    ops::trace::configure(cfg);
    sources::configure(cfg);
    webhooks::configure(cfg);
    ops::inbox::configure(cfg);
    ops::reconcile_rejected::configure(cfg);
    ops::reconcile::configure(cfg);
}
