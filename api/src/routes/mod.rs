//! One module per resource: its request/response types, handlers and routes.

use actix_web::web;

mod front;
mod health;
pub mod leads;
pub mod ops_inbox;
mod sources;
mod webhooks;

pub fn configure(cfg: &mut web::ServiceConfig) {
    front::configure(cfg);
    health::configure(cfg);
    leads::configure(cfg);
    sources::configure(cfg);
    webhooks::configure(cfg);
    ops_inbox::configure(cfg);
}
