//! The lead, from arrival to hand-off: the record a sender states and its
//! normalised form ([`record`]), the one write path every door ends in
//! ([`ingest`], batched by [`group_commit`]), the status machine
//! ([`crate::lifecycle::lead_status`]) and what sales staff do ([`sales`]), the timeline
//! ([`activity`]), reading ([`query`]) and the job that runs after each
//! change ([`processing`]). One folder, so a reader finds the lead's rules in
//! one place.

pub mod activity;
pub mod alias;
pub mod backlog;
pub mod export;
pub mod failures;
pub mod group_commit;
pub mod ingest;
pub mod intake;
pub mod merge;
pub mod outcome;
mod pg_batch;
pub mod processing;
pub mod query;
pub mod record;
pub mod sales;
pub mod speed_to_lead;
pub mod tombstone;
mod written;
