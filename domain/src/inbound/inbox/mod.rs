//! The webhook inbox: every verified delivery is stored once per EVENT
//! (`UNIQUE(source, event_id)`) and answered; a worker's pass then claims it
//! and turns it into a lead through `ingest`. The row is the queue and the
//! source of truth for its state: a retry is a `failed` row whose
//! `next_attempt_at` came due, an abandoned attempt a `processing` row whose
//! lease ran out, and the next claim takes either like a new row.
//!
//! States: `received` → `processing` → `processed`, or `failed` (a transient
//! error; retried with backoff) → … → `dead` (a permanent error, or too many
//! attempts). `skipped`: an event type the source does not allow.

pub mod batch;
pub mod ops;
pub mod process;
pub mod receive;

use std::fmt;
use std::str::FromStr;

use sea_orm::sea_query::Expr;
use sea_orm::{ConnectionTrait, EntityTrait, QueryFilter};
use serde::Serialize;

use crate::entities::inbox_event;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InboxState {
    Received,
    Processing,
    Processed,
    Failed,
    Dead,
    Skipped,
}

impl InboxState {
    pub const ALL: [InboxState; 6] = [
        Self::Received,
        Self::Processing,
        Self::Processed,
        Self::Failed,
        Self::Dead,
        Self::Skipped,
    ];

    /// States ops may send back for processing. `received` and `processing`
    /// are already on their way.
    pub const RETRYABLE: [InboxState; 4] =
        [Self::Failed, Self::Dead, Self::Skipped, Self::Processed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Processing => "processing",
            Self::Processed => "processed",
            Self::Failed => "failed",
            Self::Dead => "dead",
            Self::Skipped => "skipped",
        }
    }
}

impl fmt::Display for InboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for InboxState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown inbox state '{s}' (received, processing, processed, failed, dead, skipped)"
                )
            })
    }
}

/// Empties the raw body and headers of the matching inbox events, keeping
/// the rows (their ids still make a late redelivery a duplicate).
pub async fn blank_inbox_bodies<C: ConnectionTrait>(
    conn: &C,
    which: impl sea_orm::sea_query::IntoCondition,
) -> Result<u64, crate::Error> {
    Ok(inbox_event::Entity::update_many()
        .col_expr(inbox_event::Column::Body, Expr::value(Vec::<u8>::new()))
        .col_expr(
            inbox_event::Column::Headers,
            Expr::value(serde_json::json!({})),
        )
        .col_expr(
            inbox_event::Column::LastError,
            Expr::value(Option::<String>::None),
        )
        .filter(which)
        .exec(conn)
        .await?
        .rows_affected)
}
