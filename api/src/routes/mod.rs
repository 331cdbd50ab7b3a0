//! One module per resource: its request/response types, handlers and routes.

use actix_web::web;

mod crm;
mod front;
mod health;
mod imports;
pub mod leads;

pub fn configure(cfg: &mut web::ServiceConfig) {
    front::configure(cfg);
    health::configure(cfg);
    crm::configure(cfg);
    imports::configure(cfg);
    leads::configure(cfg);
}
