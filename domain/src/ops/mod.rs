//! What operators read about the pipeline itself: per-source numbers
//! ([`stats`]), the same over time ([`series`]) and everything one
//! correlation id set off ([`trace`]).

pub mod rhythm;
pub mod series;
pub mod stats;
pub mod trace;
