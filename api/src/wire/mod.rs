//! What the API and the CLI take and show, one module per resource: the
//! shapes clients see, apart from the tables (`domain::entities`) and from
//! the handlers (`routes`) and the HTTP layer (`http`) that use them.

pub mod about;
pub mod companies;
pub mod contacts;
pub mod convert;
pub mod crm;
pub mod deals;
pub mod deliveries;
pub mod event_types;
pub mod imports;
pub mod inbox;
pub mod lead_data;
pub mod lead_processing;
pub mod leads;
pub mod merges;
pub mod principals;
pub mod reconcile;
pub mod reconcile_rejected;
pub mod routing_rules;
pub mod sources;
pub mod stats;
pub mod subscriptions;
pub mod tasks;
pub mod teams;
pub mod tokens;
pub mod trace;
pub mod users;
pub mod versioned;

#[cfg(test)]
mod check;
#[cfg(test)]
mod round_trip;
