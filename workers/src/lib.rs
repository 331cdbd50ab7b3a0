//! leadpipe's background work.

pub mod sweeper;
