//! Operating the pipeline: inbox events, lead processing, outgoing
//! deliveries, reconcile runs and the records they rejected, traces and
//! stats.

pub mod deliveries;
pub mod inbox;
pub mod lead_processing;
pub mod reconcile;
pub mod reconcile_rejected;
pub mod stats;
pub mod stats_series;
pub mod trace;
