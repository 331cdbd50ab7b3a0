//! What operators read about the pipeline itself: per-source numbers
//! ([`stats`]) and everything one correlation id set off ([`trace`]).

pub mod stats;
pub mod trace;
