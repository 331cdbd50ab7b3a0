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
pub mod merges;
pub mod metrics;
pub mod openapi_json;
pub mod ops;
pub mod principals;
pub mod routing_rules;
pub mod session;
pub mod sources;
pub mod subscriptions;
pub mod subscriptions_manage;
pub mod teams;
pub mod tokens;
pub mod users;
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
    openapi_json::configure(cfg);
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
    merges::configure(cfg);
    principals::configure(cfg);
    session::configure(cfg);
    users::configure(cfg);
    tokens::configure(cfg);
    routing_rules::configure(cfg);
    teams::configure(cfg);
    subscriptions::configure(cfg);
    event_types::configure(cfg);
    ops::deliveries::configure(cfg);
    ops::stats::configure(cfg);
    ops::stats_series::configure(cfg);
    ops::trace::configure(cfg);
    sources::configure(cfg);
    webhooks::configure(cfg);
    ops::inbox::configure(cfg);
    ops::lead_processing::configure(cfg);
    ops::reconcile_rejected::configure(cfg);
    ops::reconcile::configure(cfg);
}

/// The operations every route registers, and the schemas they name: what
/// the OpenAPI document describes.
pub fn registered() -> crate::openapi::Registered {
    registered_with(true)
}

/// What `configure(.., metrics)` registers.
pub fn registered_with(metrics: bool) -> crate::openapi::Registered {
    let mut parts = None;
    let _ = actix_web::App::new().configure(|cfg| {
        let mut routes = Routes::new(cfg);
        configure(&mut routes, metrics);
        parts = Some(routes.into_parts());
    });
    parts.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document keeps one schema of a name, so two handlers' types with
    /// one name would silently share a schema.
    #[test]
    fn no_two_handlers_name_different_schemas_alike() {
        let mut seen = std::collections::BTreeMap::new();
        for (name, schema) in registered().1 {
            let schema = serde_json::to_value(&schema).expect("schema serialises");
            if let Some(earlier) = seen.insert(name.clone(), schema.clone()) {
                assert_eq!(
                    earlier, schema,
                    "two different schemas are named {name}: rename one with #[schema(as = …)]"
                );
            }
        }
    }

    #[test]
    fn operation_ids_are_unique() {
        let doc = crate::openapi::build(registered());
        let mut seen = std::collections::HashSet::new();
        for item in doc.paths.paths.values() {
            for op in [&item.get, &item.post, &item.put, &item.patch, &item.delete]
                .into_iter()
                .flatten()
            {
                let id = op.operation_id.clone().unwrap_or_default();
                assert!(!id.is_empty(), "an operation has no operationId");
                assert!(seen.insert(id.clone()), "operationId {id} is used twice");
            }
        }
    }
}
