//! Reconcile: pull what a sender changed since a cursor and send every record
//! through the same write path as its webhooks (`ingest`, origin
//! `reconcile`). When the webhooks worked it writes nothing but timeline
//! rows; what it has to create or update are deliveries the webhooks missed.
//!
//! This module holds the rules and the bookkeeping: the `reconcile_run`
//! rows ([`run`]), what one page does ([`page`]) and the records a page
//! rejected ([`rejected`]). A source's pull configuration and its cron ticks
//! are part of the source ([`crate::inbound::source::pull`],
//! [`crate::inbound::source::schedule`]).
//! Fetching over HTTP and scheduling live in `workers::reconcile`.

pub mod compare;
pub mod page;
pub mod rejected;
pub mod run;

pub use crate::inbound::source::pull::{PullAuth, PullConfig};
pub use page::{PageCounts, PulledPage};
