//! leadpipe's background jobs, run by apalis. There is no job store: the
//! rows that are the work (inbox events, leads to process, outbox
//! deliveries, reconcile schedules) are the only queue, and writing one is
//! enqueuing it. Each apalis worker runs passes over its table from one
//! backend (`drain_backend`), when woken ([`wake`]) or on its poll; a pass
//! claims what is claimable (new rows, retries come due, expired leases),
//! so a pass that runs twice, late or never costs nothing (see
//! `domain::inbound::inbox`). apalis types stay inside this crate: the API
//! runs workers through [`runtime::run`].

mod drain_backend;
pub mod housekeeping;
pub mod inbox_job;
pub mod lead_processor;
pub mod outbound;
pub mod publisher;
pub mod reconcile;
pub mod runtime;
pub mod settings;
mod shutdown;
pub mod wake;

pub use settings::WorkerSettings;
