//! Turning a stored event into a lead. A caller claims it ([`claim`], or a
//! worker's batch claim), then [`apply`], and [`record_failure`] if that
//! failed. Each step is guarded by the row's state, so a second attempt at
//! the same event — an ops retry racing a worker, a worker whose lease ran
//! out — finds nothing to do.

use crate::actor::Actor;
use crate::inbound::source::state::held_source_names;
use crate::natural_key::KeyHasher;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter};

use super::InboxState;
use crate::entities::inbox_event::{self, Column, Model};
use crate::entities::lead_tombstone;
use crate::inbound::mapping::{map_record, record_in, source_ref_of};
use crate::inbound::source::{self, Source};
use crate::lead::ingest::Outcome;
use crate::lead::record::NewLead;
use crate::lead::tombstone::BatchKeys;
use crate::retry::{Decision, RetryPolicy};

pub use crate::retry::ProcessError;

/// What a successful attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Processed {
        outcome: Outcome,
        /// `None` when `suppressed` (the key was erased).
        lead_id: Option<i64>,
    },
    /// The source no longer allows this event type.
    Skipped,
    /// Another worker took the event over (our lease had expired); our
    /// changes were rolled back.
    LostClaim,
}

/// What [`record_failure`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureRecorded {
    RetryAt(DateTime<Utc>),
    Dead,
    LostClaim,
}

/// Takes the event for one attempt: `received`, `failed` and due, or
/// `processing` under an expired lease (its worker died). Returns the row as
/// claimed (its `attempts` now counts this attempt), or `None` when there is
/// nothing to do.
pub async fn claim<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    worker: &str,
    now: DateTime<Utc>,
    lease: Duration,
) -> Result<Option<Model>, crate::Error> {
    let claimed = inbox_event::Entity::update_many()
        .col_expr(Column::State, Expr::value(InboxState::Processing.as_str()))
        .col_expr(Column::Attempts, Expr::col(Column::Attempts).add(1))
        .col_expr(Column::LockedAt, Expr::value(now))
        .col_expr(Column::LockedBy, Expr::value(worker))
        .col_expr(Column::UpdatedAt, Expr::value(now))
        .filter(Column::Id.eq(id))
        .filter(claimable(now, lease))
        // A paused source's event waits, as in a batch's claim.
        .filter(Column::Source.not_in_subquery(held_source_names()))
        .exec_with_returning(conn)
        .await?;
    Ok(claimed.into_iter().next())
}

/// `received`, `failed` and due, or `processing` under an expired lease.
pub(super) fn claimable(now: DateTime<Utc>, lease: Duration) -> Condition {
    let lease_expired = now - chrono::Duration::from_std(lease).unwrap_or(chrono::TimeDelta::MAX);
    Condition::any()
        .add(Column::State.eq(InboxState::Received.as_str()))
        .add(
            Condition::all()
                .add(Column::State.eq(InboxState::Failed.as_str()))
                .add(
                    Condition::any()
                        .add(Column::NextAttemptAt.is_null())
                        .add(Column::NextAttemptAt.lte(now)),
                ),
        )
        .add(
            Condition::all()
                .add(Column::State.eq(InboxState::Processing.as_str()))
                .add(Column::LockedAt.lte(lease_expired)),
        )
}

/// What an event needs before the write: nothing (its type is skipped), or
/// its record ready for `ingest`.
pub(super) enum Prepared {
    Skip,
    Ingest(NewLead),
}

/// Maps and normalises the event's record under its source (`None`: the
/// source is gone). Every error here is permanent: the same body maps the
/// same way next time.
pub(super) fn prepare(source: Option<&Source>, event: &Model) -> Result<Prepared, ProcessError> {
    let source = source
        .ok_or_else(|| ProcessError::Permanent(format!("source '{}' is gone", event.source)))?;
    if !source.allows(event.event_type.as_deref()) {
        return Ok(Prepared::Skip);
    }
    let record = map_record(&source.name, &source.mapping, &event.body)
        .map_err(|e| ProcessError::Permanent(format!("mapping: {e}")))?;
    Ok(Prepared::Ingest(record.normalise()?))
}

pub(super) fn context_of(event: &Model) -> Actor {
    Actor {
        correlation_id: event.correlation_id.clone(),
        principal_id: None,
    }
}

/// Records a failed attempt: `dead` for a permanent error or when the
/// attempts are used up, else `failed` with the next attempt's time.
pub async fn record_failure<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    event: &Model,
    error: &ProcessError,
    policy: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<FailureRecorded, crate::Error> {
    let attempt = u32::try_from(event.attempts).unwrap_or(0);
    let (state, last_error, next_attempt_at) = match policy.decide(error, attempt, now) {
        Decision::Dead(reason) => (InboxState::Dead, reason, None),
        Decision::RetryAt(at) => (InboxState::Failed, error.to_string(), Some(at)),
    };
    let updated = owned(inbox_event::Entity::update_many(), event)
        .col_expr(Column::State, Expr::value(state.as_str()))
        .col_expr(Column::LastError, Expr::value(last_error))
        .col_expr(Column::NextAttemptAt, Expr::value(next_attempt_at))
        // Queued again: the row, due at `next_attempt_at`, is the retry.
        .col_expr(
            Column::EnqueuedAt,
            Expr::value(next_attempt_at.map(|_| now)),
        )
        .col_expr(Column::LockedAt, Expr::value(Option::<DateTime<Utc>>::None))
        .col_expr(Column::LockedBy, Expr::value(Option::<String>::None))
        .col_expr(Column::UpdatedAt, Expr::value(now))
        .exec(conn)
        .await?;
    Ok(match (updated.rows_affected, next_attempt_at) {
        (0, _) => FailureRecorded::LostClaim,
        (_, Some(at)) => FailureRecorded::RetryAt(at),
        (_, None) => {
            forget_if_erased(conn, hasher, event).await?;
            FailureRecorded::Dead
        }
    })
}

/// A dead event of an erased key keeps no body: nothing will process it
/// again, and the person's data must not come back through a broken
/// delivery.
async fn forget_if_erased<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    event: &Model,
) -> Result<(), crate::Error> {
    if of_erased_key(conn, hasher, event).await? {
        super::blank_inbox_bodies(conn, Column::Id.eq(event.id)).await?;
    }
    Ok(())
}

/// Whether the event's natural key is buried: by the key hash read on
/// receipt, or else by the key read from the body now, which also finds a
/// look-alike of an erased key (a key hash is of the key as sent).
async fn of_erased_key<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    event: &Model,
) -> Result<bool, crate::Error> {
    if let Some(hash) = &event.key_hash {
        let buried = lead_tombstone::Entity::find()
            .filter(
                Condition::any()
                    .add(lead_tombstone::Column::KeyHash.eq(hash))
                    .add(lead_tombstone::Column::FoldedHash.eq(hash)),
            )
            .one(conn)
            .await?;
        if buried.is_some() {
            return Ok(true);
        }
    }
    let Some(source) = source::find_without_secrets(conn, &event.source).await? else {
        return Ok(false);
    };
    let Ok(document) = serde_json::from_slice::<serde_json::Value>(&event.body) else {
        return Ok(false);
    };
    let Some(source_ref) = record_in(&source.mapping, &document)
        .and_then(|record| source_ref_of(&source.mapping, record))
    else {
        return Ok(false);
    };
    let keys = BatchKeys::of(hasher, [(event.source.as_str(), source_ref.as_str())]);
    Ok(!keys.buried(conn).await?.is_empty())
}

/// Ends an attempt that ingested its record: `processed` with the outcome;
/// a suppressed event (its key was erased) keeps no body either. False when
/// the claim was lost meanwhile.
pub(super) async fn finish_ingested<C: ConnectionTrait>(
    conn: &C,
    event: &Model,
    ingested: &crate::lead::ingest::Ingested,
    now: DateTime<Utc>,
) -> Result<bool, crate::Error> {
    let result = Some((ingested.outcome, ingested.lead_id()));
    if !finish(conn, event, InboxState::Processed, result, now).await? {
        return Ok(false);
    }
    if ingested.outcome == Outcome::Suppressed {
        // The person was erased: their data must not stay here either.
        super::blank_inbox_bodies(conn, Column::Id.eq(event.id)).await?;
    }
    Ok(true)
}

/// Ends a successful attempt; false when the claim was lost meanwhile.
pub(super) async fn finish<C: ConnectionTrait>(
    conn: &C,
    event: &Model,
    state: InboxState,
    result: Option<(Outcome, Option<i64>)>,
    now: DateTime<Utc>,
) -> Result<bool, crate::Error> {
    let updated = ended(owned(inbox_event::Entity::update_many(), event), now)
        .col_expr(Column::State, Expr::value(state.as_str()))
        .col_expr(
            Column::Outcome,
            Expr::value(result.map(|(o, _)| o.as_str())),
        )
        .col_expr(Column::LeadId, Expr::value(result.and_then(|(_, id)| id)))
        .exec(conn)
        .await?;
    Ok(updated.rows_affected == 1)
}

/// What every successful end writes besides its state and outcome: no
/// error, no retry, no claim, processed now.
pub(super) fn ended(
    update: sea_orm::UpdateMany<inbox_event::Entity>,
    now: DateTime<Utc>,
) -> sea_orm::UpdateMany<inbox_event::Entity> {
    update
        .col_expr(Column::LastError, Expr::value(Option::<String>::None))
        .col_expr(
            Column::NextAttemptAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(Column::LockedAt, Expr::value(Option::<DateTime<Utc>>::None))
        .col_expr(Column::LockedBy, Expr::value(Option::<String>::None))
        .col_expr(Column::ProcessedAt, Expr::value(now))
        .col_expr(Column::UpdatedAt, Expr::value(now))
}

/// Only the holder of the current claim may write: same attempt, still
/// `processing`.
fn owned(
    update: sea_orm::UpdateMany<inbox_event::Entity>,
    event: &Model,
) -> sea_orm::UpdateMany<inbox_event::Entity> {
    update
        .filter(Column::Id.eq(event.id))
        .filter(Column::State.eq(InboxState::Processing.as_str()))
        .filter(Column::Attempts.eq(event.attempts))
}
