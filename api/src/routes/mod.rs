//! One module per resource: its request/response types, handlers and routes.

use actix_web::web;

mod crm;
mod deliveries;
mod front;
mod health;
mod imports;
pub mod leads;
pub mod ops_inbox;
mod reconcile;
mod sources;
mod subscriptions;
mod trace;
mod webhooks;

pub fn configure(cfg: &mut web::ServiceConfig) {
    front::configure(cfg);
    health::configure(cfg);
    crate::metrics::configure(cfg);
    crm::configure(cfg);
    imports::configure(cfg);
    leads::configure(cfg);
    subscriptions::configure(cfg);
    deliveries::configure(cfg);
    trace::configure(cfg);
    sources::configure(cfg);
    webhooks::configure(cfg);
    ops_inbox::configure(cfg);
    reconcile::configure(cfg);
}
