//! Speed to lead: when a lead got its owner (`assigned_at`), when a person
//! first acted on it (`first_response_at`), and when that was due
//! (`response_due_at`) by the owner's team's response target counted in the
//! team's working hours ([`team`]). Overdue leads are counted for the
//! metrics and escalated ([`escalation`]); [`report`] sums it all up.

pub mod clock;
pub mod escalation;
pub mod report;
pub mod team;
