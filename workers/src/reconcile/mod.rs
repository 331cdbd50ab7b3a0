//! Reconcile's moving parts: the pull client (HTTP), the run executor, and
//! the scheduler that starts runs by each source's cron in every worker
//! process. The rules and the run rows are `domain::reconcile`.

pub mod pull;
pub mod runner;
pub mod scheduler;

pub use runner::{ExecuteError, Progress, Reconciler};

pub use crate::settings::ReconcileSettings;
