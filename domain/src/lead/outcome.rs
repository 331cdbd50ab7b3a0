//! What an ingest did and which door it came through: named by the write
//! path, its doors and the merged-key path alike.

use serde::Serialize;

/// Which door a record came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Api,
    Webhook,
    Reconcile,
    Import,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Webhook => "webhook",
            Self::Reconcile => "reconcile",
            Self::Import => "import",
        }
    }
}

/// What an ingest did to the stored lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = IngestOutcome)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
    Stale,
    /// The key was erased (a tombstone): nothing was written.
    Suppressed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Stale => "stale",
            Self::Suppressed => "suppressed",
        }
    }

    /// Whether downstream systems must hear about it.
    pub fn changed(self) -> bool {
        matches!(self, Self::Created | Self::Updated)
    }
}
