//! What the batch writers (inbox events, leads) share.

/// How a batch was written, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchPath {
    /// The whole batch in one go.
    Whole,
    /// The whole write failed; redone one savepoint per item.
    Split,
}

impl BatchPath {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Whole => "whole",
            Self::Split => "split",
        }
    }
}
