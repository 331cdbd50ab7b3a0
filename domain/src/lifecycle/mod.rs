//! The states a lead, a deal and a task move through, and the moves allowed between
//! them, and the kinds of a note: a leaf every concept may name (entities, events, errors) without
//! naming the concept's folder.

pub mod deal_stage;
pub mod lead_status;
pub mod note;
pub mod task;
