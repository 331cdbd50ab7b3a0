//! Who did a write: named on the timeline, in the activity and in the
//! outbox event's correlation. One type for every door: a person through
//! the API, or nobody (a sender's delivery, a scheduled run).

/// Who acts, and the correlation id their request (or run) carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Actor {
    /// The principal behind an API request; `None` for a sender's
    /// delivery, a reconcile run or an import from the command line.
    pub principal_id: Option<i64>,
    pub correlation_id: Option<String>,
}
