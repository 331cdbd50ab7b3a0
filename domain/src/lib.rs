//! leadpipe's model and rules. Free of HTTP and job-runtime types: every door
//! (REST intake, webhooks, reconcile, import) calls into this crate.

pub mod activity;
pub mod auth;
pub mod clock;
pub mod conversion;
pub mod crm;
pub mod db;
pub mod delivery;
pub mod entities;
pub mod error;
pub mod group_commit;
pub mod idempotency;
pub mod import;
pub mod inbox;
pub mod ingest;
pub mod lead_query;
pub mod net_guard;
pub mod outbox;
pub mod precondition;
pub mod processing;
pub mod reconcile;
pub mod record;
pub mod redact;
pub mod retry;
pub mod sales;
pub mod sealed;
pub mod signature;
pub mod source;
pub mod stats;
pub mod status;
pub mod subscription;
pub mod trace;

pub use error::{Error, FieldError};
