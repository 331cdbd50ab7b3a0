//! The leads waiting for an owner: routing found everyone in their pool
//! away or at capacity. A lead enters once (so its timeline says so once),
//! leaves when it gets an owner, and the whole wait goes back to the lead
//! drain when someone may take more (`requeue`): the lead rows stay the
//! work, as for every other lead job.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};

use crate::entities::lead;
use crate::entities::lead_awaiting_owner::{self as awaiting, Column as W};
use crate::error::Error;
use crate::lifecycle::lead_status::LeadStatus;

/// Puts `lead_id` in the wait; true the first time.
pub async fn enter<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
    now: DateTime<Utc>,
) -> Result<bool, Error> {
    let mut insert = Query::insert();
    insert
        .into_table(awaiting::Entity)
        .columns([W::LeadId, W::Since])
        .values([lead_id.into(), now.into()])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(OnConflict::column(W::LeadId).do_nothing().to_owned());
    Ok(conn.execute(&insert).await?.rows_affected() == 1)
}

/// Which of `ids` are waiting.
pub async fn among<C: ConnectionTrait>(conn: &C, ids: &[i64]) -> Result<HashSet<i64>, Error> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let rows: Vec<i64> = awaiting::Entity::find()
        .select_only()
        .column(W::LeadId)
        .filter(W::LeadId.is_in(ids.iter().copied()))
        .into_tuple()
        .all(conn)
        .await?;
    Ok(rows.into_iter().collect())
}

/// Takes `ids` out of the wait (they got an owner).
pub async fn leave<C: ConnectionTrait>(conn: &C, ids: &[i64]) -> Result<(), Error> {
    if !ids.is_empty() {
        awaiting::Entity::delete_many()
            .filter(W::LeadId.is_in(ids.iter().copied()))
            .exec(conn)
            .await?;
    }
    Ok(())
}

/// Leads a statement names at most (bound parameters stay well under
/// either backend's limit).
const CHUNK: usize = 500;

/// Sends every waiting lead back to the lead drain (its current version
/// unprocessed again; its `version`, and so its `ETag`, unchanged). Leads a
/// person gave an owner or closed meanwhile leave the wait instead. Returns
/// how many were sent. With nobody waiting (the usual case) it is one
/// read of an empty table.
pub async fn requeue<C: ConnectionTrait>(conn: &C) -> Result<u64, Error> {
    let ids: Vec<i64> = awaiting::Entity::find()
        .select_only()
        .column(W::LeadId)
        .into_tuple()
        .all(conn)
        .await?;
    let mut sent = 0;
    for chunk in ids.chunks(CHUNK) {
        let leads: Vec<(i64, Option<i64>, LeadStatus)> = lead::Entity::find()
            .select_only()
            .column(lead::Column::Id)
            .column(lead::Column::OwnerId)
            .column(lead::Column::Status)
            .filter(lead::Column::Id.is_in(chunk.iter().copied()))
            // A merged lead waits for nothing: its survivor does.
            .filter(lead::Column::MergedIntoId.is_null())
            .into_tuple()
            .all(conn)
            .await?;
        let (still, settled): (Vec<_>, Vec<_>) = leads
            .into_iter()
            .partition(|(_, owner, status)| owner.is_none() && status.is_open());
        leave(conn, &settled.iter().map(|l| l.0).collect::<Vec<_>>()).await?;
        if still.is_empty() {
            continue;
        }
        sent += lead::Entity::update_many()
            .col_expr(
                lead::Column::ProcessedVersion,
                Expr::col(lead::Column::Version).sub(1),
            )
            .filter(lead::Column::Id.is_in(still.iter().map(|l| l.0)))
            .filter(Expr::col(lead::Column::ProcessedVersion).eq(Expr::col(lead::Column::Version)))
            .exec(conn)
            .await?
            .rows_affected;
    }
    if sent > 0 {
        metrics::counter!("leadpipe_leads_routed_again_total").increment(sent);
    }
    Ok(sent)
}
