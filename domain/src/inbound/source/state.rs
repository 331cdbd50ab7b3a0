//! A source's state. `active`: its events are processed as they come.
//! `paused`: deliveries are still verified, stored and answered, but the
//! inbox workers leave its events until it is resumed, then take them in
//! the order they arrived (as a gateway pauses a connection); its waiting
//! events are outside the backlog limit, so a paused source never makes
//! others' deliveries wait. `removed`: its secrets are gone, deliveries to
//! its name are refused as to an unknown name, and the intake tokens bound
//! to it are revoked; the row stays, holding the name its inbox events,
//! reconcile runs and leads carry, and a source created later under the
//! same name takes it over.

use std::fmt;
use std::str::FromStr;

use chrono::Utc;
use sea_orm::sea_query::{Expr, Query, SelectStatement};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use super::find_stored;
use crate::auth::Role;
use crate::entities::source::{self, Column};
use crate::entities::{inbox_event, principal};
use crate::error::Error;
use crate::inbound::inbox::InboxState;
use crate::precondition::IfMatch;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SourceState {
    Active,
    Paused,
    Removed,
}

impl SourceState {
    pub const ALL: [SourceState; 3] = [Self::Active, Self::Paused, Self::Removed];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Removed => "removed",
        }
    }
}

impl fmt::Display for SourceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SourceState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| format!("unknown source state '{s}' (active, paused, removed)"))
    }
}

/// The names of the sources whose events wait (paused or removed): the
/// inbox claim leaves their events, and the backlog does not count them.
pub fn held_source_names() -> SelectStatement {
    Query::select()
        .column(Column::Name)
        .from(source::Entity)
        .and_where(Column::State.ne(SourceState::Active.as_str()))
        .to_owned()
}

/// Pauses (`paused`) or resumes (`active`) the source `name`, at the
/// version `if_match` names. Asking for the state it is in changes nothing
/// (the version stays). Returns the stored row.
pub async fn set_state<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    to: SourceState,
    if_match: &IfMatch,
) -> Result<source::Model, Error> {
    debug_assert!(to != SourceState::Removed, "removing is `remove`");
    for _ in 0..3 {
        let stored = find_stored(conn, name).await?.ok_or(Error::NotFound)?;
        if_match.check(stored.version)?;
        if stored.state == to.as_str() {
            return Ok(stored);
        }
        let saved = source::Entity::update_many()
            .col_expr(Column::State, Expr::value(to.as_str()))
            .col_expr(Column::Version, Expr::value(stored.version + 1))
            .col_expr(Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(Column::Name.eq(name))
            .filter(Column::Version.eq(stored.version))
            .exec_with_returning(conn)
            .await?;
        if let Some(saved) = saved.into_iter().next() {
            return Ok(saved);
        }
    }
    let current = find_stored(conn, name).await?.ok_or(Error::NotFound)?;
    Err(Error::PreconditionFailed {
        current: current.version,
    })
}

/// What removing a source did besides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removal {
    /// Intake principals bound to the source, now revoked.
    pub revoked_intake_principals: u64,
    /// Its events that still waited, now `dead` ("the source was removed").
    pub abandoned_events: u64,
}

/// The reason a removed source's waiting events end `dead` with.
pub const REMOVED_ERROR: &str = "the source was removed";

/// Removes the source `name` at the version `if_match` names: its secrets
/// and pull settings are cleared, it turns `removed`, the intake principals
/// bound to it are revoked, and its events that still wait end `dead`. Run
/// it in one transaction. Its events and leads stay (under retention).
pub async fn remove<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    if_match: &IfMatch,
) -> Result<Removal, Error> {
    let now = Utc::now();
    // Without If-Match a concurrent change just means: read again.
    let mut cleared = false;
    for _ in 0..3 {
        let stored = find_stored(conn, name).await?.ok_or(Error::NotFound)?;
        if_match.check(stored.version)?;
        if clear(conn, name, stored.version, now).await? {
            cleared = true;
            break;
        }
    }
    if !cleared {
        let current = find_stored(conn, name).await?.ok_or(Error::NotFound)?;
        return Err(Error::PreconditionFailed {
            current: current.version,
        });
    }
    let revoked = principal::Entity::update_many()
        .col_expr(principal::Column::Active, Expr::value(false))
        .filter(principal::Column::Role.eq(Role::Intake.as_str()))
        .filter(principal::Column::Source.eq(name))
        .filter(principal::Column::Active.eq(true))
        .exec(conn)
        .await?;
    let abandoned = inbox_event::Entity::update_many()
        .col_expr(
            inbox_event::Column::State,
            Expr::value(InboxState::Dead.as_str()),
        )
        .col_expr(inbox_event::Column::LastError, Expr::value(REMOVED_ERROR))
        .col_expr(
            inbox_event::Column::NextAttemptAt,
            Expr::value(Option::<chrono::DateTime<Utc>>::None),
        )
        .col_expr(inbox_event::Column::UpdatedAt, Expr::value(now))
        .filter(inbox_event::Column::Source.eq(name))
        .filter(
            inbox_event::Column::State
                .is_in([InboxState::Received.as_str(), InboxState::Failed.as_str()]),
        )
        .exec(conn)
        .await?;
    Ok(Removal {
        revoked_intake_principals: revoked.rows_affected,
        abandoned_events: abandoned.rows_affected,
    })
}

/// Clears the source row at `version` (secrets, pull settings) and marks it
/// removed; false when its version moved meanwhile.
async fn clear<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    version: i64,
    now: chrono::DateTime<Utc>,
) -> Result<bool, Error> {
    let cleared = source::Entity::update_many()
        .col_expr(Column::State, Expr::value(SourceState::Removed.as_str()))
        .col_expr(Column::Secrets, Expr::value(serde_json::json!([])))
        .col_expr(Column::PullUrl, Expr::value(Option::<String>::None))
        .col_expr(Column::PullAuthHeader, Expr::value(Option::<String>::None))
        .col_expr(Column::PullAuthSecret, Expr::value(Option::<String>::None))
        .col_expr(Column::ReconcileCron, Expr::value(Option::<String>::None))
        .col_expr(Column::Version, Expr::value(version + 1))
        .col_expr(Column::UpdatedAt, Expr::value(now))
        .filter(Column::Name.eq(name))
        .filter(Column::Version.eq(version))
        .exec(conn)
        .await?;
    Ok(cleared.rows_affected == 1)
}
