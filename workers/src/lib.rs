//! leadpipe's background jobs, on apalis with its storage in the app's own
//! database (SQLite by default, PostgreSQL in production). apalis types stay
//! inside this crate: the API pushes jobs through [`queue::InboxQueue`] and
//! runs workers through [`runtime::run`].
//!
//! The inbox row holds an event's state, so a batch or job that runs twice,
//! late or never costs nothing (see `domain::inbound::inbox`). apalis
//! workers drain inbox batches when woken ([`wake`]) or on their poll, from
//! a backend over the inbox table itself (`drain_backend`), and on every
//! apalis inbox job (retries, sweeper and ops re-enqueues).

mod drain_backend;
pub mod housekeeping;
pub mod inbox_job;
pub mod lead_processor;
pub mod outbound;
mod poll;
pub mod publisher;
pub mod queue;
pub mod reconcile;
pub mod runtime;
pub mod settings;
mod shutdown;
pub mod storage;
pub mod sweeper;
pub mod wake;

pub use queue::InboxQueue;
pub use settings::WorkerSettings;
