//! The `process_lead` job: what happens to a lead after it arrives or changes.
//! It assigns an unowned lead round-robin among active sales staff and links
//! possible duplicates from other sources. Idempotent by construction: it
//! records the lead version it processed and does nothing for a version it
//! has seen, and every write is conditional.

use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect,
};
use serde::Serialize;
use serde_json::json;

use crate::auth::Role;
use crate::clock;
use crate::db::begin_write;
use crate::entities::{
    activity as activity_entity, assignment_cursor, lead, lead_duplicate, principal,
};
use crate::error::Error;
use crate::lead::activity::{self, ActivityKind, NewActivity};
use crate::outbound::outbox;

const SALES_POOL: &str = "sales";
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
pub async fn backlog<C: ConnectionTrait>(conn: &C, limit: u64) -> Result<Vec<i64>, DbErr> {
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
    db: &DatabaseConnection,
    lead_id: i64,
    correlation_id: Option<String>,
) -> Result<Processed, Error> {
    let _turn = crate::db::write_turn(db).await;
    let txn = begin_write(db).await?;
    let done = process_lead_in(&txn, lead_id, correlation_id).await?;
    txn.commit().await?;
    Ok(done)
}

/// What [`process_batch`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchProcessed {
    /// Leads taken from the backlog.
    pub taken: usize,
    /// Leads whose processing failed for good and were given up.
    pub given_up: Vec<i64>,
    /// The first transient error, if any; those leads stay in the backlog.
    pub transient: Option<String>,
}

/// Processes up to `limit` leads from the backlog in one transaction, each
/// under its own savepoint so one failing lead never undoes the others. On
/// PostgreSQL the leads are taken `FOR UPDATE SKIP LOCKED`, so workers
/// running at once share the backlog without waiting on each other; on
/// SQLite the batch holds this process's write turn.
pub async fn process_batch(db: &DatabaseConnection, limit: u64) -> Result<BatchProcessed, Error> {
    let _turn = crate::db::write_turn(db).await;
    let txn = begin_write(db).await?;
    let mut query = lead::Entity::find()
        .select_only()
        .column(lead::Column::Id)
        .filter(Expr::col(lead::Column::ProcessedVersion).lt(Expr::col(lead::Column::Version)))
        .order_by_asc(lead::Column::Id)
        .limit(limit);
    if db.get_database_backend() == sea_orm::DbBackend::Postgres {
        query = query.lock_with_behavior(
            sea_orm::sea_query::LockType::Update,
            sea_orm::sea_query::LockBehavior::SkipLocked,
        );
    }
    let ids: Vec<i64> = query.into_tuple().all(&txn).await?;
    let mut done = BatchProcessed {
        taken: ids.len(),
        ..Default::default()
    };
    for lead_id in ids {
        let savepoint = sea_orm::TransactionTrait::begin(&txn).await?;
        match process_lead_in(&savepoint, lead_id, None).await {
            Ok(_) => savepoint.commit().await?,
            Err(err) => {
                savepoint.rollback().await?;
                if err.is_transient() {
                    done.transient.get_or_insert_with(|| err.to_string());
                } else {
                    tracing::error!(lead_id, error = %err, "processing a lead failed for good; skipping it");
                    give_up(&txn, lead_id).await?;
                    done.given_up.push(lead_id);
                }
            }
        }
    }
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
    let open = lead.status.is_open();
    let assigned = if lead.owner_id.is_none() && open {
        assign_round_robin(txn, &lead, &correlation_id).await?
    } else {
        None
    };
    let new_duplicates = link_duplicates(txn, &lead, &correlation_id).await?;
    lead::Entity::update_many()
        .col_expr(
            lead::Column::ProcessedVersion,
            Expr::col(lead::Column::Version),
        )
        .filter(lead::Column::Id.eq(lead_id))
        .exec(txn)
        .await?;
    Ok(Processed {
        assigned_to: assigned,
        new_duplicates,
        skipped: false,
    })
}

async fn latest_correlation_id<C: ConnectionTrait>(
    txn: &C,
    lead_id: i64,
) -> Result<Option<String>, DbErr> {
    let latest: Option<Option<String>> = activity_entity::Entity::find()
        .select_only()
        .column(activity_entity::Column::CorrelationId)
        .filter(activity_entity::Column::LeadId.eq(lead_id))
        .filter(activity_entity::Column::Kind.eq(ActivityKind::Ingest.as_str()))
        .order_by_desc(activity_entity::Column::Id)
        .into_tuple()
        .one(txn)
        .await?;
    Ok(latest.flatten())
}

/// Takes the next turn and gives the lead to whoever it falls on. The turn
/// counter is one row updated atomically, so concurrent jobs never share a
/// turn; a job that finds the lead already owned takes no turn at all.
async fn assign_round_robin<C: ConnectionTrait>(
    txn: &C,
    lead: &lead::Model,
    correlation_id: &Option<String>,
) -> Result<Option<i64>, Error> {
    let staff: Vec<i64> = principal::Entity::find()
        .select_only()
        .column(principal::Column::Id)
        .filter(principal::Column::Role.eq(Role::Sales.as_str()))
        .filter(principal::Column::Active.eq(true))
        .order_by_asc(principal::Column::Id)
        .into_tuple::<i64>()
        .all(txn)
        .await?;
    if staff.is_empty() {
        return Ok(None);
    }
    let mut take_turn = Query::insert();
    take_turn
        .into_table(assignment_cursor::Entity)
        .columns([
            assignment_cursor::Column::Pool,
            assignment_cursor::Column::Turn,
        ])
        .values([SALES_POOL.into(), 1i64.into()])
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
    let turn: i64 = row.try_get("", "turn")?;
    let index = usize::try_from((turn - 1).rem_euclid(staff.len() as i64)).unwrap_or(0);
    let owner = staff[index];

    let updated = lead::Entity::update_many()
        .col_expr(lead::Column::OwnerId, Expr::val(owner))
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
    activity::record(
        txn,
        NewActivity {
            lead_id: lead.id,
            kind: ActivityKind::Assigned,
            origin: None,
            outcome: None,
            author_id: None,
            detail: Some(json!({ "from": null, "to": owner, "by": "round_robin" })),
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

/// Marks a lead's current version processed without doing the work: for a
/// lead whose processing fails for good, so it cannot block the backlog.
pub async fn give_up<C: ConnectionTrait>(conn: &C, lead_id: i64) -> Result<(), DbErr> {
    lead::Entity::update_many()
        .col_expr(
            lead::Column::ProcessedVersion,
            Expr::col(lead::Column::Version),
        )
        .filter(lead::Column::Id.eq(lead_id))
        .exec(conn)
        .await?;
    Ok(())
}

/// A lead from another source with the same normalised email or phone:
/// possibly the same person, never merged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DuplicateHint {
    pub lead_id: i64,
    pub reason: String,
}

/// The possible duplicates linked to a lead.
pub async fn duplicates_of<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
) -> Result<Vec<DuplicateHint>, DbErr> {
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
