//! leadpipe's model and rules. Free of HTTP and job-runtime types: every door
//! (REST intake, webhooks, reconcile, import) calls into this crate.

pub mod activity;
pub mod auth;
pub mod clock;
pub mod conversion;
pub mod crm;
pub mod db;
pub mod entities;
pub mod error;
pub mod idempotency;
pub mod import;
pub mod ingest;
pub mod lead_query;
pub mod outbox;
pub mod record;
pub mod sales;
pub mod signature;
pub mod status;

pub use error::{Error, FieldError};
