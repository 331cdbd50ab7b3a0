//! What the API and the CLI take and show, one module per resource: the
//! shapes clients see, apart from the tables (`domain::entities`) and from
//! the handlers (`routes`) and the HTTP layer (`http`) that use them.

pub mod about;
pub mod crm;
pub mod deliveries;
pub mod imports;
pub mod leads;
pub mod reconcile;
pub mod sources;
pub mod versioned;

#[cfg(test)]
mod check;
