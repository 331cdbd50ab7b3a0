//! The `process_lead` job: what happens to a lead after it arrives or changes.
//! It assigns an unowned lead round-robin in its routing pool, passing by
//! whoever is away or at capacity (`routing`), and links possible
//! duplicates from other sources. Idempotent by construction: it
//! records the lead version it processed and does nothing for a version it
//! has seen, and every write is conditional.

use crate::store::Store;
use std::collections::{HashMap, HashSet};

use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::clock;
use crate::entities::{activity as activity_entity, assignment_cursor, lead, lead_duplicate};
use crate::error::Error;
use crate::lead::activity::{self, ActivityKind, NewActivity};
use crate::outbound::outbox;
use crate::routing::router::Router;
use crate::routing::{choice, waiting};
/// Bounds the work for a very common email or phone (a shared switchboard).
const MAX_DUPLICATE_CANDIDATES: u64 = 20;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Processed {
    pub assigned_to: Option<i64>,
    pub new_duplicates: usize,
    /// The lead was gone or its version already processed.
    pub skipped: bool,
}

/// Leads whose current version has not been processed yet, oldest first.
pub async fn backlog<C: ConnectionTrait>(conn: &C, limit: u64) -> Result<Vec<i64>, Error> {
    let rows = lead::Entity::find()
        .select_only()
        .column(lead::Column::Id)
        .filter(Expr::col(lead::Column::ProcessedVersion).lt(Expr::col(lead::Column::Version)))
        .order_by_asc(lead::Column::Id)
        .limit(limit)
        .into_tuple::<i64>()
        .all(conn)
        .await?;
    Ok(rows)
}

pub async fn process_lead(
    db: &Store,
    lead_id: i64,
    correlation_id: Option<String>,
) -> Result<Processed, Error> {
    let txn = db.begin_write().await?;
    let done = process_lead_in(&txn, lead_id, correlation_id).await?;
    txn.commit().await?;
    Ok(done)
}

/// Processes one lead on the caller's transaction.
pub async fn process_lead_in<C: ConnectionTrait>(
    txn: &C,
    lead_id: i64,
    correlation_id: Option<String>,
) -> Result<Processed, Error> {
    // Row-locked, so an ingest cannot slip a new version in between our read
    // and our marking it processed.
    let Some(lead) = lead::Entity::find_by_id(lead_id)
        .lock_exclusive()
        .one(txn)
        .await?
    else {
        return Ok(Processed {
            skipped: true,
            ..Default::default()
        });
    };
    if lead.processed_version >= lead.version {
        return Ok(Processed {
            skipped: true,
            ..Default::default()
        });
    }
    // Work done for a lead carries the correlation id of the change that caused it.
    let correlation_id = match correlation_id {
        Some(id) => Some(id),
        None => latest_correlation_id(txn, lead_id).await?,
    };
    let router = Router::load(txn).await?;
    lock_pools(txn, &router.pools_to_lock([&lead])).await?;
    let waits = !waiting::among(txn, &[lead_id]).await?.is_empty();
    let done = work_on(txn, &lead, &correlation_id, &router, true, waits).await?;
    mark_processed(txn, &[lead_id]).await?;
    Ok(done)
}

/// The work itself, on a lead read under a lock (or the write turn):
/// assignment of an open unowned lead in its pool, and duplicate hints
/// (searched for only if `may_have_duplicates`). `waits`: the lead is
/// waiting for an owner already. The caller marks the version processed.
pub(crate) async fn work_on<C: ConnectionTrait>(
    txn: &C,
    lead: &lead::Model,
    correlation_id: &Option<String>,
    router: &Router,
    may_have_duplicates: bool,
    waits: bool,
) -> Result<Processed, Error> {
    // A merged lead is its survivor's now: nothing to route or link.
    if lead.merged_into_id.is_some() {
        return Ok(Processed::default());
    }
    let assigned = if lead.owner_id.is_none() && lead.status.is_open() {
        assign_round_robin(txn, lead, correlation_id, router, waits).await?
    } else {
        None
    };
    let new_duplicates = if may_have_duplicates {
        link_duplicates(txn, lead, correlation_id).await?
    } else {
        0
    };
    Ok(Processed {
        assigned_to: assigned,
        new_duplicates,
        skipped: false,
    })
}

/// Marks the current versions of `ids` processed, in one statement.
pub(crate) async fn mark_processed<C: ConnectionTrait>(conn: &C, ids: &[i64]) -> Result<(), Error> {
    lead::Entity::update_many()
        .col_expr(
            lead::Column::ProcessedVersion,
            Expr::col(lead::Column::Version),
        )
        .filter(lead::Column::Id.is_in(ids.iter().copied()))
        .exec(conn)
        .await?;
    Ok(())
}

/// Which of `leads` may have duplicates: those whose email or phone more
/// than one lead has. Two statements for the batch, so the leads with a
/// contact of their own (most) skip the search.
pub(crate) async fn may_have_duplicates<C: ConnectionTrait>(
    conn: &C,
    leads: &[lead::Model],
) -> Result<HashSet<i64>, Error> {
    let emails = shared_values(conn, lead::Column::Email, leads.iter().map(|l| &l.email)).await?;
    let phones = shared_values(conn, lead::Column::Phone, leads.iter().map(|l| &l.phone)).await?;
    let shared = |value: &Option<String>, set: &HashSet<String>| {
        value.as_ref().is_some_and(|v| set.contains(v))
    };
    Ok(leads
        .iter()
        .filter(|l| shared(&l.email, &emails) || shared(&l.phone, &phones))
        .map(|l| l.id)
        .collect())
}

/// The values among `values` that more than one lead has in `column`.
async fn shared_values<'a, C: ConnectionTrait>(
    conn: &C,
    column: lead::Column,
    values: impl Iterator<Item = &'a Option<String>>,
) -> Result<HashSet<String>, DbErr> {
    let values: HashSet<&str> = values.filter_map(|v| v.as_deref()).collect();
    if values.is_empty() {
        return Ok(HashSet::new());
    }
    let shared: Vec<String> = lead::Entity::find()
        .select_only()
        .column(column)
        .filter(column.is_in(values))
        .group_by(column)
        .having(Expr::col(lead::Column::Id).count().gt(1))
        .into_tuple()
        .all(conn)
        .await?;
    Ok(shared.into_iter().collect())
}

async fn latest_correlation_id<C: ConnectionTrait>(
    txn: &C,
    lead_id: i64,
) -> Result<Option<String>, Error> {
    Ok(latest_correlation_ids(txn, &[lead_id])
        .await?
        .remove(&lead_id)
        .flatten())
}

/// The correlation id of each lead's latest ingest, in two statements
/// whatever the number of leads.
pub(crate) async fn latest_correlation_ids<C: ConnectionTrait>(
    txn: &C,
    lead_ids: &[i64],
) -> Result<HashMap<i64, Option<String>>, Error> {
    let latest = Query::select()
        .expr(Expr::col(activity_entity::Column::Id).max())
        .from(activity_entity::Entity)
        .and_where(activity_entity::Column::LeadId.is_in(lead_ids.iter().copied()))
        .and_where(activity_entity::Column::Kind.eq(ActivityKind::Ingest.as_str()))
        .group_by_col(activity_entity::Column::LeadId)
        .to_owned();
    let rows: Vec<(i64, Option<String>)> = activity_entity::Entity::find()
        .select_only()
        .column(activity_entity::Column::LeadId)
        .column(activity_entity::Column::CorrelationId)
        .filter(activity_entity::Column::Id.in_subquery(latest))
        .into_tuple()
        .all(txn)
        .await?;
    Ok(rows.into_iter().collect())
}

/// Locks the turn counters `pools` (sorted, `Router::pools_to_lock`) until
/// the caller commits, taking no turn. Not with one writer (SQLite): its
/// write turn already keeps batches apart.
pub(crate) async fn lock_pools<C: ConnectionTrait>(txn: &C, pools: &[String]) -> Result<(), Error> {
    if crate::store::Dialect::of(txn).has_one_writer() {
        return Ok(());
    }
    for pool in pools {
        let mut lock = Query::insert();
        lock.into_table(assignment_cursor::Entity)
            .columns([
                assignment_cursor::Column::Pool,
                assignment_cursor::Column::Turn,
            ])
            .values([pool.into(), 0i64.into()])
            .map_err(|e| DbErr::Custom(e.to_string()))?
            .on_conflict(
                OnConflict::column(assignment_cursor::Column::Pool)
                    .value(
                        assignment_cursor::Column::Turn,
                        Expr::col((assignment_cursor::Entity, assignment_cursor::Column::Turn)),
                    )
                    .to_owned(),
            );
        txn.execute(&lock).await?;
    }
    Ok(())
}

/// Takes the pool's next turn number: one row updated atomically, so
/// concurrent jobs never share a turn; the row stays locked until the job
/// commits, so jobs of one pool count its open leads one after the other.
async fn take_turn<C: ConnectionTrait>(txn: &C, pool: &str) -> Result<i64, Error> {
    let mut take_turn = Query::insert();
    take_turn
        .into_table(assignment_cursor::Entity)
        .columns([
            assignment_cursor::Column::Pool,
            assignment_cursor::Column::Turn,
        ])
        .values([pool.into(), 1i64.into()])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(
            OnConflict::column(assignment_cursor::Column::Pool)
                .value(
                    assignment_cursor::Column::Turn,
                    Expr::col((assignment_cursor::Entity, assignment_cursor::Column::Turn)).add(1),
                )
                .to_owned(),
        )
        .returning_col(assignment_cursor::Column::Turn);
    let row = txn
        .query_one(&take_turn)
        .await?
        .ok_or_else(|| DbErr::Custom("taking a turn returned nothing".into()))?;
    Ok(row.try_get("", "turn")?)
}

/// Takes the pool's next turn and gives the lead to whoever it falls on,
/// passing by whoever is away or at capacity; a job that finds the lead
/// already owned takes no turn at all. When everyone is passed by, the lead
/// waits for an owner: its timeline says so once, and it is routed again
/// when someone can take it (`routing::waiting`).
async fn assign_round_robin<C: ConnectionTrait>(
    txn: &C,
    lead: &lead::Model,
    correlation_id: &Option<String>,
    router: &Router,
    waits: bool,
) -> Result<Option<i64>, Error> {
    let pool = router.pool_for(&lead.source, &lead.payload);
    // No sales staff at all is a setup without routing: the lead stays
    // unowned, as ever. A rule's team with nobody in it waits for someone.
    if pool.order.is_empty() && pool.rule.is_none() {
        return Ok(None);
    }
    let now = clock::now();
    let chosen = if pool.order.is_empty() {
        choice::Choice::default()
    } else {
        let turn = take_turn(txn, &pool.key).await?;
        let start = usize::try_from((turn - 1).rem_euclid(pool.order.len() as i64)).unwrap_or(0);
        let open = choice::open_leads(txn, &choice::limited(&pool.order)).await?;
        choice::choose(&pool.order, start, &open, now)
    };
    let Some(owner) = chosen.owner else {
        if waiting::enter(txn, lead.id, now).await? {
            metrics::counter!("leadpipe_leads_awaiting_owner_total").increment(1);
            activity::record(
                txn,
                NewActivity {
                    lead_id: lead.id,
                    kind: ActivityKind::AwaitingOwner,
                    origin: None,
                    outcome: None,
                    author_id: None,
                    detail: Some(json!({
                        "rule": pool.rule, "pool": pool.key, "skipped": chosen.skipped,
                    })),
                    correlation_id: correlation_id.clone(),
                },
            )
            .await?;
        }
        return Ok(None);
    };

    let due = crate::lead::speed_to_lead::clock::due_for(txn, Some(owner), now).await?;
    let updated = lead::Entity::update_many()
        .col_expr(lead::Column::OwnerId, Expr::val(owner))
        .col_expr(
            lead::Column::AssignedAt,
            sea_orm::sea_query::Func::coalesce([
                Expr::col(lead::Column::AssignedAt),
                Expr::val(now),
            ])
            .into(),
        )
        .col_expr(lead::Column::ResponseDueAt, Expr::val(due))
        .col_expr(
            lead::Column::Version,
            Expr::col(lead::Column::Version).add(1),
        )
        .col_expr(lead::Column::UpdatedAt, Expr::val(clock::now()))
        .filter(lead::Column::Id.eq(lead.id))
        .filter(lead::Column::OwnerId.is_null())
        .exec(txn)
        .await?;
    if updated.rows_affected == 0 {
        return Ok(None);
    }
    if waits {
        waiting::leave(txn, &[lead.id]).await?;
    }
    let mut detail = json!({ "from": null, "to": owner, "by": "round_robin" });
    if let Some(rule) = pool.rule {
        detail["rule"] = json!(rule);
        detail["pool"] = json!(pool.key);
    }
    if !chosen.skipped.is_empty() {
        detail["skipped"] = json!(chosen.skipped);
    }
    activity::record(
        txn,
        NewActivity {
            lead_id: lead.id,
            kind: ActivityKind::Assigned,
            origin: None,
            outcome: None,
            author_id: None,
            detail: Some(detail),
            correlation_id: correlation_id.clone(),
        },
    )
    .await?;
    let payload = crate::outbound::events::LeadAssigned {
        lead_id: lead.id,
        from: None,
        to: Some(owner),
        version: lead.version + 1,
    };
    outbox::enqueue_event(txn, Some(lead.id), &payload, correlation_id.clone()).await?;
    Ok(Some(owner))
}

/// Links leads from other sources that share the normalised email or phone.
/// Never merges: people decide.
async fn link_duplicates<C: ConnectionTrait>(
    txn: &C,
    lead: &lead::Model,
    correlation_id: &Option<String>,
) -> Result<usize, Error> {
    let mut same = Condition::any();
    if let Some(email) = &lead.email {
        same = same.add(lead::Column::Email.eq(email.as_str()));
    }
    if let Some(phone) = &lead.phone {
        same = same.add(lead::Column::Phone.eq(phone.as_str()));
    }
    if lead.email.is_none() && lead.phone.is_none() {
        return Ok(0);
    }
    let others = lead::Entity::find()
        .filter(same)
        .filter(lead::Column::Id.ne(lead.id))
        .filter(lead::Column::Source.ne(lead.source.as_str()))
        // A merged lead is its survivor now, not a duplicate of it.
        .filter(lead::Column::MergedIntoId.is_null())
        .order_by_asc(lead::Column::Id)
        .limit(MAX_DUPLICATE_CANDIDATES)
        .all(txn)
        .await?;
    let mut linked = 0;
    for other in others {
        let reason = if lead.email.is_some() && lead.email == other.email {
            "email"
        } else {
            "phone"
        };
        let now = clock::now();
        let mut inserted = 0;
        for (a, b) in [(lead.id, other.id), (other.id, lead.id)] {
            let mut insert = Query::insert();
            insert
                .into_table(lead_duplicate::Entity)
                .columns([
                    lead_duplicate::Column::LeadId,
                    lead_duplicate::Column::OtherLeadId,
                    lead_duplicate::Column::Reason,
                    lead_duplicate::Column::CreatedAt,
                ])
                .values([a.into(), b.into(), reason.into(), now.into()])
                .map_err(|e| DbErr::Custom(e.to_string()))?
                .on_conflict(
                    OnConflict::columns([
                        lead_duplicate::Column::LeadId,
                        lead_duplicate::Column::OtherLeadId,
                    ])
                    .do_nothing()
                    .to_owned(),
                );
            inserted += txn.execute(&insert).await?.rows_affected();
        }
        if inserted == 0 {
            continue;
        }
        linked += 1;
        for (on, to) in [(lead.id, other.id), (other.id, lead.id)] {
            activity::record(
                txn,
                NewActivity {
                    lead_id: on,
                    kind: ActivityKind::DuplicateHint,
                    origin: None,
                    outcome: None,
                    author_id: None,
                    detail: Some(json!({ "other_lead_id": to, "reason": reason })),
                    correlation_id: correlation_id.clone(),
                },
            )
            .await?;
        }
    }
    Ok(linked)
}

/// A lead from another source with the same normalised email or phone:
/// possibly the same person, never merged by itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplicateHint {
    pub lead_id: i64,
    pub reason: String,
}

/// The possible duplicates linked to a lead.
pub async fn duplicates_of<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
) -> Result<Vec<DuplicateHint>, Error> {
    let rows = lead_duplicate::Entity::find()
        .filter(lead_duplicate::Column::LeadId.eq(lead_id))
        .order_by_asc(lead_duplicate::Column::OtherLeadId)
        .all(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| DuplicateHint {
            lead_id: r.other_lead_id,
            reason: r.reason,
        })
        .collect())
}
