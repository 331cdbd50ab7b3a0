//! leadpipe's background work.

pub mod lead_processor;
pub mod publisher;
pub mod sweeper;
