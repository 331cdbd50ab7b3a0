//! The three timestamps of a lead's clock, written by the writes that
//! start and stop it: an owner set starts it (`assigned_at`,
//! `response_due_at`), the first human action stops it
//! (`first_response_at`).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, Func, SimpleExpr};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter};

use crate::entities::lead::{self, Column};
use crate::error::Error;
use crate::lead::speed_to_lead::team;
use crate::lifecycle::lead_status::LeadStatus;

/// When a lead given to `owner` at `now` must be answered: `None` when it
/// has no owner.
pub async fn due_for<C: ConnectionTrait>(
    conn: &C,
    owner: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, Error> {
    let Some(owner) = owner else {
        return Ok(None);
    };
    let target = team::target_for_owner(conn, owner).await?;
    Ok(Some(target.hours.add(now, target.target)))
}

/// Stops the clock of `lead_id` at `now` if it still runs: a person acted
/// on the lead (a note, a call, a status move, a task done, a conversion).
pub async fn responded<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    lead::Entity::update_many()
        .col_expr(Column::FirstResponseAt, Expr::val(now))
        .filter(Column::Id.eq(lead_id))
        .filter(Column::FirstResponseAt.is_null())
        .exec(conn)
        .await?;
    Ok(())
}

/// `first_response_at` set to `now` unless already set: for an update that
/// is a response itself (a status move).
pub fn response_expr(now: DateTime<Utc>) -> SimpleExpr {
    Func::coalesce([Expr::col(Column::FirstResponseAt), Expr::val(now)]).into()
}

/// The clock's columns when an unanswered `lead` changes hands at `now`
/// (`owned_at`: `now`, or `None` when it loses its owner) with the new
/// owner's `due` time: `assigned_at` keeps the first assignment, a due
/// time already passed is kept as the breach.
pub fn handed_over(
    lead: &lead::Model,
    owned_at: Option<DateTime<Utc>>,
    due: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<(Column, SimpleExpr)> {
    let mut change = vec![(Column::ResponseDueAt, Expr::val(due))];
    if let Some(at) = owned_at {
        change.push((
            Column::AssignedAt,
            Func::coalesce([Expr::col(Column::AssignedAt), Expr::val(at)]).into(),
        ));
    }
    if let Some(missed) = lead.response_due_at.filter(|due| *due < now) {
        change.push((
            Column::ResponseBreachedAt,
            Func::coalesce([Expr::col(Column::ResponseBreachedAt), Expr::val(missed)]).into(),
        ));
    }
    change
}

/// Open, owned, unanswered leads whose response was due before `now`.
pub fn overdue(now: DateTime<Utc>) -> Condition {
    let open = LeadStatus::ALL.into_iter().filter(|s| s.is_open());
    Condition::all()
        .add(Column::FirstResponseAt.is_null())
        .add(Column::ResponseDueAt.lt(now))
        .add(Column::OwnerId.is_not_null())
        .add(Column::MergedIntoId.is_null())
        .add(Column::Status.is_in(open))
}

/// How many leads are overdue (the `leadpipe_leads_response_overdue` gauge).
pub async fn overdue_count<C: ConnectionTrait>(conn: &C, now: DateTime<Utc>) -> Result<u64, Error> {
    Ok(lead::Entity::find()
        .filter(overdue(now))
        .count(conn)
        .await?)
}
