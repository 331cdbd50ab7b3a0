//! Operating the pipeline: inbox events, outgoing deliveries, reconcile
//! runs, traces and stats.

pub mod deliveries;
pub mod inbox;
pub mod reconcile;
pub mod stats;
pub mod stats_series;
pub mod trace;
