//! leadpipe's model and rules. Free of HTTP and job-runtime types: every door
//! (REST intake, webhooks, reconcile, import) calls into this crate.

pub mod activity;
pub mod auth;
pub mod entities;
pub mod error;
pub mod inbox;
pub mod ingest;
pub mod outbox;
pub mod record;
pub mod signature;
pub mod source;

pub use error::{Error, FieldError};
