//! leadpipe's model and rules. Free of HTTP and job-runtime types: every door
//! (REST intake, webhooks, reconcile, import) calls into this crate.

pub mod auth;
pub mod clock;
pub mod crm;
pub mod db;
pub mod entities;
pub mod error;
pub mod idempotency;
pub mod import;
pub mod inbound;
pub mod lead;
pub mod ops;
pub mod outbound;
pub mod page;
pub mod precondition;
pub mod reconcile;
pub mod redact;
pub mod retention;
pub mod retry;
pub mod sealed;

pub use error::{Error, FieldError};
