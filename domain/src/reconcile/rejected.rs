//! Dead letters of reconcile: records a page could not map to a lead. The
//! cursor moves past them (one bad record must not stop a source for ever),
//! so each is kept — source, run, the raw record, the reason — in the page's
//! own transaction, and can be re-applied through the same write path once
//! the mapping is fixed. One row per distinct record of a source, so a page
//! read again adds none; a retried record that now applies is `resolved`.

use crate::actor::Actor;
use crate::natural_key::KeyHasher;
use crate::page::{self, IdWindow, Page};
use crate::store::Store;
use crate::store::Work;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::entities::reconcile_rejected::{self, Column, Model};
use crate::inbound::mapping::{key_hash_of, map_object, source_ref_of};
use crate::inbound::source::{self, Source};
use crate::lead::ingest::{Origin, ingest_in};
use crate::lead::record::NewLead;

pub const REJECTED: &str = "rejected";
pub const RESOLVED: &str = "resolved";

/// A record a page rejected, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub record: Value,
    pub reason: String,
    /// The record's `source_ref`, when it could be read (see
    /// [`source_ref_of`]): kept only as its keyed hash.
    pub source_ref: Option<String>,
}

impl Rejection {
    /// Why `record` does not map, with whatever key it has.
    pub fn new(source: &Source, record: &Value, reason: String) -> Self {
        Self {
            record: storable(record),
            reason,
            source_ref: source_ref_of(&source.mapping, record),
        }
    }
}

/// The record as kept for ops, a NUL in a string or key shown as U+FFFD and
/// a number too long to write out kept as its text
/// ([`crate::json_number::storable`]): PostgreSQL's `jsonb` refuses NUL and
/// writes numbers out in full, and a record rejected for holding one must
/// still be kept (on SQLite as well, so both keep the same copy; a retry
/// maps this copy).
fn storable(record: &Value) -> Value {
    let text = |s: &str| s.replace('\0', "\u{FFFD}");
    match record {
        Value::String(s) => Value::String(text(s)),
        Value::Array(items) => Value::Array(items.iter().map(storable).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (text(key), storable(item)))
                .collect(),
        ),
        Value::Number(n) => crate::json_number::storable(n),
        other => other.clone(),
    }
}

/// Maps one pulled record to a lead, or says why it does not map. The
/// reason names fields and pointers, never their values.
pub fn map(source: &Source, record: &Value) -> Result<NewLead, String> {
    map_object(&source.name, &source.mapping, record)
        .map_err(|e| e.to_string())
        .and_then(|r| r.normalise().map_err(describe))
}

fn describe(err: crate::Error) -> String {
    match err {
        crate::Error::Invalid(fields) => fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

fn sha256(record: &Value) -> String {
    hex::encode(Sha256::digest(record.to_string().as_bytes()))
}

/// Keeps a page's rejected records, on the page's transaction. A record
/// already kept for the source gets the new run and reason (and is
/// `rejected` again if a retry had resolved it and it came back broken).
pub async fn keep<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    source: &str,
    run_id: i64,
    rejected: &[Rejection],
    now: DateTime<Utc>,
) -> Result<(), crate::Error> {
    if rejected.is_empty() {
        return Ok(());
    }
    // Distinct per statement: PostgreSQL refuses to update one row twice in
    // one INSERT .. ON CONFLICT.
    let mut distinct = BTreeMap::new();
    for r in rejected {
        distinct.entry(sha256(&r.record)).or_insert(r);
    }
    let rows = distinct
        .into_iter()
        .map(|(hash, r)| reconcile_rejected::ActiveModel {
            source: Set(source.to_owned()),
            run_id: Set(run_id),
            record: Set(r.record.clone()),
            record_sha256: Set(hash),
            key_hash: Set(r
                .source_ref
                .as_deref()
                .map(|source_ref| hasher.key_hash(source, source_ref))),
            reason: Set(r.reason.clone()),
            state: Set(REJECTED.to_owned()),
            retries: Set(0),
            lead_id: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            resolved_at: Set(None),
            ..Default::default()
        });
    reconcile_rejected::Entity::insert_many(rows)
        .on_conflict(
            OnConflict::columns([Column::Source, Column::RecordSha256])
                .update_columns([
                    Column::RunId,
                    Column::KeyHash,
                    Column::Reason,
                    Column::State,
                    Column::LeadId,
                    Column::UpdatedAt,
                    Column::ResolvedAt,
                ])
                .to_owned(),
        )
        .exec_without_returning(txn)
        .await?;
    Ok(())
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RejectedFilter {
    pub source: Option<String>,
    /// `rejected` or `resolved`; both when `None`.
    pub state: Option<String>,
}

impl RejectedFilter {
    fn condition(&self) -> Condition {
        let mut c = Condition::all();
        if let Some(source) = &self.source {
            c = c.add(Column::Source.eq(source));
        }
        if let Some(state) = &self.state {
            c = c.add(Column::State.eq(state));
        }
        c
    }
}

/// Newest first.
pub async fn list<C: ConnectionTrait>(
    conn: &C,
    filter: &RejectedFilter,
    window: IdWindow,
) -> Result<Page<Model>, crate::Error> {
    let query = reconcile_rejected::Entity::find().filter(filter.condition());
    page::fetch_by_id(conn, query, Column::Id, window, |r| r.id).await
}

/// What a retry came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retried {
    /// Records tried.
    pub retried: u64,
    /// Now applied: each wrote (or matched) its lead once.
    pub resolved: u64,
    /// Still do not map; their reason is updated.
    pub still_rejected: u64,
}

const RETRY_BATCH: u64 = 200;

/// Re-applies the `rejected` records (of one source, or all), oldest first,
/// through the write path with origin `reconcile`. Each record's lead and
/// its `resolved` mark commit together, fenced on the row still being
/// `rejected`, so two retries at once apply a record once.
pub async fn retry(db: &Store, source: Option<&str>) -> Result<Retried, crate::Error> {
    let mut done = Retried::default();
    let mut sources: BTreeMap<String, Option<Source>> = BTreeMap::new();
    let mut after = 0i64;
    loop {
        let mut query = reconcile_rejected::Entity::find()
            .filter(Column::State.eq(REJECTED))
            .filter(Column::Id.gt(after));
        if let Some(source) = source {
            query = query.filter(Column::Source.eq(source));
        }
        let batch = query
            .order_by_asc(Column::Id)
            .limit(RETRY_BATCH)
            .all(db)
            .await?;
        let Some(last) = batch.last() else {
            return Ok(done);
        };
        after = last.id;
        for row in batch {
            if !sources.contains_key(&row.source) {
                let found = source::find_without_secrets(db, &row.source).await?;
                sources.insert(row.source.clone(), found);
            }
            let source = sources.get(&row.source).and_then(Option::as_ref);
            let mapped = match source {
                Some(src) => map(src, &row.record),
                None => Err(format!("source '{}' is gone", row.source)),
            };
            done.retried += 1;
            let now = crate::clock::now();
            match mapped {
                Ok(new) => {
                    if resolve(db, &row, &new, now).await? {
                        done.resolved += 1;
                    }
                }
                Err(reason) => {
                    // A fixed mapping may read the key where the old one could not.
                    let key_hash = source
                        .and_then(|src| {
                            key_hash_of(db.hasher(), &src.name, &src.mapping, &row.record)
                        })
                        .or_else(|| row.key_hash.clone());
                    reconcile_rejected::Entity::update_many()
                        .col_expr(Column::Reason, Expr::value(reason))
                        .col_expr(Column::KeyHash, Expr::value(key_hash))
                        .col_expr(Column::Retries, Expr::col(Column::Retries).add(1))
                        .col_expr(Column::UpdatedAt, Expr::value(now))
                        .filter(Column::Id.eq(row.id))
                        .filter(Column::State.eq(REJECTED))
                        .exec(db)
                        .await?;
                    done.still_rejected += 1;
                }
            }
        }
    }
}

async fn resolve(
    db: &Store,
    row: &Model,
    new: &NewLead,
    now: DateTime<Utc>,
) -> Result<bool, crate::Error> {
    let txn = db.begin_write().await?;
    let claimed = reconcile_rejected::Entity::update_many()
        .col_expr(Column::State, Expr::value(RESOLVED))
        .col_expr(Column::Retries, Expr::col(Column::Retries).add(1))
        .col_expr(Column::UpdatedAt, Expr::value(now))
        .col_expr(Column::ResolvedAt, Expr::value(Some(now)))
        .filter(Column::Id.eq(row.id))
        .filter(Column::State.eq(REJECTED))
        .exec(&txn)
        .await?;
    if claimed.rows_affected != 1 {
        txn.rollback().await?;
        return Ok(false);
    }
    let ctx = Actor {
        correlation_id: Some(format!("reconcile-{}", row.run_id)),
        principal_id: None,
    };
    let ingested = ingest_in(&txn, db.hasher(), new, Origin::Reconcile, &ctx).await?;
    txn.enqueued(Work::Leads);
    reconcile_rejected::Entity::update_many()
        .col_expr(
            Column::LeadId,
            Expr::value(ingested.lead.map(|lead| lead.id)),
        )
        .filter(Column::Id.eq(row.id))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(true)
}
