//! Erasing a person: their lead and everything stored about it, in one
//! transaction, leaving a tombstone on the natural key (so no door brings
//! the lead back), an audit row without personal data, and a `lead.erased`
//! event so downstream systems erase too.
//!
//! Idempotent: erasing an erased lead answers with the first erasure's audit
//! row, so a client retrying a timed-out request sees the same success.

use crate::natural_key::KeyHasher;
use crate::store::Store;
use std::collections::BTreeMap;

use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Select, Set, TryGetable,
};

use crate::entities::{
    activity, contact, crm_activity, deal, idempotency_key, import_applied_row, import_row,
    import_run, inbox_event, lead, lead_conversion, lead_duplicate, lead_erasure, lead_tombstone,
    outbox_delivery, outbox_event, reconcile_rejected, task,
};
use crate::error::Error;
use crate::idempotency::{self, Subject};
use crate::inbound::inbox::InboxState;
use crate::inbound::inbox::blank_inbox_bodies;
use crate::inbound::mapping::{record_in, source_ref_of};
use crate::inbound::source;
use crate::lead::ingest::Outcome;
use crate::lead::{merge, tombstone};
use crate::outbound::outbox;

/// What an erasure is asked to do.
#[derive(Debug, Clone)]
pub struct EraseRequest {
    pub lead_id: i64,
    /// Why (required; kept in the audit row, so it must not name the person).
    pub reason: String,
    pub include_contact: bool,
    pub erased_by: Option<i64>,
    pub correlation_id: Option<String>,
}

/// The audit row, and whether this call found the lead already erased.
#[derive(Debug)]
pub struct Erased {
    pub audit: lead_erasure::Model,
    pub repeated: bool,
    /// PostgreSQL: the vacuum of the erased tables, running after the
    /// answer (`Store::scrub_after_erasure`). A process that exits
    /// right after erasing (the CLI) awaits it.
    pub vacuum: Option<tokio::task::JoinHandle<()>>,
}

/// The longest reason kept.
pub const MAX_REASON: usize = 1000;

/// Erases the lead (see the module docs). `NotFound` when there is no such
/// lead and it was never erased.
#[tracing::instrument(name = "lead.erase", skip_all, fields(lead_id = request.lead_id))]
pub async fn erase(db: &Store, request: &EraseRequest) -> Result<Erased, Error> {
    let reason = request.reason.trim();
    if reason.is_empty() || reason.chars().count() > MAX_REASON {
        return Err(Error::invalid(
            "reason",
            "is required (at most 1000 characters)",
        ));
    }
    let Some(found) = lead::Entity::find_by_id(request.lead_id).one(db).await? else {
        return earlier(db, request.lead_id).await;
    };
    // A merged lead's data went to its survivor: erasing that erases both.
    if let Some(survivor_id) = found.merged_into_id {
        return Err(Error::LeadMerged {
            lead_id: found.id,
            survivor_id,
        });
    }
    let hash = db.hasher().key_hash(&found.source, &found.source_ref);
    // The leads merged into it, read before any lock: their keys' locks come
    // first, in one order, so a delivery of a merged key (which holds its
    // key's lock, then the merged row, then the survivor's) finishes first
    // or waits; then the merges' rows, as an undo takes them.
    let aliases = merge::merged_into(db, found.id).await?;
    let alias_rows = lead::Entity::find()
        .filter(lead::Column::Id.is_in(aliases.iter().copied()))
        .all(db)
        .await?;
    let mut key_locks: Vec<String> = std::iter::once(&found)
        .chain(&alias_rows)
        .map(|l| db.hasher().folded_hash(&l.source, &l.source_ref))
        .collect();
    key_locks.sort_unstable();
    key_locks.dedup();
    let txn = db.begin_write().await?;
    for folded in &key_locks {
        tombstone::lock_for_erasure(&txn, folded).await?;
    }
    let mut survivors = aliases.clone();
    survivors.push(found.id);
    merge::lock_merges_of(&txn, &survivors).await?;
    // Read again under the lock: a concurrent erasure may have won, and an
    // ingest that committed meanwhile left rows this one must remove.
    // Locked, so a write that answers with this lead (and stores the answer
    // for replay) either commits before the rows below are read or waits
    // and then finds no lead (PostgreSQL; SQLite has one writer).
    let Some(lead) = lead::Entity::find_by_id(request.lead_id)
        .lock_exclusive()
        .one(&txn)
        .await?
    else {
        txn.rollback().await?;
        return earlier(db, request.lead_id).await;
    };
    // Merged meanwhile (read above before the lock): its survivor is the
    // one to erase now.
    if let Some(survivor_id) = lead.merged_into_id {
        txn.rollback().await?;
        return Err(Error::LeadMerged {
            lead_id: lead.id,
            survivor_id,
        });
    }
    let mut counts = remove_everything(&txn, db.hasher(), &lead, request.include_contact).await?;
    let now = crate::clock::now();
    // The leads merged into this one hold the same person's data and keys
    // that would otherwise still deliver: each is erased and buried too
    // (read again under the locks: a merge may have added one).
    let aliases = merge::merged_into(&txn, lead.id).await?;
    for alias_id in &aliases {
        erase_alias(&txn, db.hasher(), *alias_id, request, now, &mut counts).await?;
    }
    let mut merged_set = aliases.clone();
    merged_set.push(lead.id);
    counts.insert(
        "lead_merge",
        merge::forget_for_erasure(&txn, &merged_set).await?,
    );
    let audit = lead_erasure::ActiveModel {
        lead_id: Set(lead.id),
        key_hash: Set(hash.clone()),
        erased_by: Set(request.erased_by),
        reason: Set(reason.to_owned()),
        counts: Set(serde_json::to_value(&counts).map_err(|e| DbErr::Json(e.to_string()))?),
        erased_at: Set(now),
        ..Default::default()
    }
    .insert(&txn)
    .await?;
    tombstone::bury(
        &txn,
        db.hasher(),
        &lead.source,
        &lead.source_ref,
        lead.id,
        audit.id,
        now,
    )
    .await?;
    // No `lead_id` column value: the lead row is gone (the key would dangle).
    outbox::enqueue_event(
        &txn,
        None,
        &crate::outbound::events::LeadErased {
            lead_id: lead.id,
            key_hash: hash.clone(),
            erased_at: now,
        },
        request.correlation_id.clone(),
    )
    .await?;
    txn.commit().await?;
    metrics::counter!("leadpipe_lead_erasures_total").increment(1);
    tracing::info!(erasure_id = audit.id, "lead erased");
    let vacuum = db.scrub_after_erasure(ERASED_TABLES).await;
    Ok(Erased {
        audit,
        repeated: false,
        vacuum,
    })
}

/// Erases a lead merged into the one being erased, in its transaction:
/// its rows, its tombstone, its audit row (a later request for it answers
/// as already erased) and its `lead.erased`; its counts add to the
/// survivor's.
async fn erase_alias<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    alias_id: i64,
    request: &EraseRequest,
    now: chrono::DateTime<chrono::Utc>,
    counts: &mut BTreeMap<&'static str, u64>,
) -> Result<(), Error> {
    let Some(alias) = lead::Entity::find_by_id(alias_id)
        .lock_exclusive()
        .one(txn)
        .await?
    else {
        return Ok(());
    };
    tombstone::lock_for_erasure(txn, &hasher.folded_hash(&alias.source, &alias.source_ref)).await?;
    let hash = hasher.key_hash(&alias.source, &alias.source_ref);
    let alias_counts = remove_everything(txn, hasher, &alias, false).await?;
    let audit = lead_erasure::ActiveModel {
        lead_id: Set(alias.id),
        key_hash: Set(hash.clone()),
        erased_by: Set(request.erased_by),
        reason: Set(request.reason.trim().to_owned()),
        counts: Set(serde_json::to_value(&alias_counts).map_err(|e| DbErr::Json(e.to_string()))?),
        erased_at: Set(now),
        ..Default::default()
    }
    .insert(txn)
    .await?;
    tombstone::bury(
        txn,
        hasher,
        &alias.source,
        &alias.source_ref,
        alias.id,
        audit.id,
        now,
    )
    .await?;
    outbox::enqueue_event(
        txn,
        None,
        &crate::outbound::events::LeadErased {
            lead_id: alias.id,
            key_hash: hash,
            erased_at: now,
        },
        request.correlation_id.clone(),
    )
    .await?;
    for (table, n) in alias_counts {
        *counts.entry(table).or_default() += n;
    }
    Ok(())
}

/// Every table [`remove_everything`] deletes from or overwrites: vacuumed
/// after an erasure on PostgreSQL.
pub const ERASED_TABLES: &[&str] = &[
    "outbox_delivery",
    "outbox_event",
    "activity",
    "inbox_event",
    "reconcile_rejected",
    "import_row",
    "import_applied_row",
    "lead_duplicate",
    "deal",
    "contact",
    "crm_activity",
    "idempotency_key",
    "idempotency_subject",
    "lead_conversion",
    "task",
    "lead_merge",
    "lead",
];

/// The audit row of an earlier erasure of `lead_id`, or `NotFound`.
async fn earlier(db: &Store, lead_id: i64) -> Result<Erased, Error> {
    find_audit(db, lead_id)
        .await?
        .map(|audit| Erased {
            audit,
            repeated: true,
            vacuum: None,
        })
        .ok_or(Error::NotFound)
}

pub async fn find_audit<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
) -> Result<Option<lead_erasure::Model>, Error> {
    Ok(lead_erasure::Entity::find()
        .filter(lead_erasure::Column::LeadId.eq(lead_id))
        .one(conn)
        .await?)
}

/// Which inbox events and reconcile dead letters hold the person's record:
/// those of the lead, and those whose natural key hash is the lead's (under
/// any key of the ring), whether or not they ever made a lead. Rows that
/// carry no hash (kept before the hash was, or whose key did not read at the
/// time) are read with the source's current mapping, a bounded batch at a
/// time: only the source's rows without a hash and without a lead.
async fn person_rows<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    lead: &lead::Model,
) -> Result<(Condition, Condition), Error> {
    let hashes = hasher.key_hashes(&lead.source, &lead.source_ref);
    let mut inbox = Condition::any()
        .add(inbox_event::Column::LeadId.eq(lead.id))
        .add(inbox_event::Column::KeyHash.is_in(hashes.clone()));
    let mut rejected = Condition::any()
        .add(reconcile_rejected::Column::LeadId.eq(lead.id))
        .add(reconcile_rejected::Column::KeyHash.is_in(hashes));
    let Some(source) = source::find_without_secrets(txn, &lead.source).await? else {
        return Ok((inbox, rejected));
    };
    let is_person = |record: Option<&serde_json::Value>| {
        record
            .and_then(|r| source_ref_of(&source.mapping, r))
            .as_deref()
            == Some(lead.source_ref.as_str())
    };

    let events = inbox_event::Entity::find()
        .filter(inbox_event::Column::Source.eq(lead.source.as_str()))
        .filter(inbox_event::Column::KeyHash.is_null())
        .filter(inbox_event::Column::LeadId.is_null())
        .filter(inbox_event::Column::Body.ne(Vec::<u8>::new()));
    let ids = matching_ids(
        txn,
        events,
        (inbox_event::Column::Id, inbox_event::Column::Body),
        |body: Vec<u8>| {
            let document = serde_json::from_slice::<serde_json::Value>(&body).ok();
            is_person(
                document
                    .as_ref()
                    .and_then(|d| record_in(&source.mapping, d)),
            )
        },
    )
    .await?;
    inbox = inbox.add(inbox_event::Column::Id.is_in(ids));
    let records = reconcile_rejected::Entity::find()
        .filter(reconcile_rejected::Column::Source.eq(lead.source.as_str()))
        .filter(reconcile_rejected::Column::KeyHash.is_null());
    let ids = matching_ids(
        txn,
        records,
        (
            reconcile_rejected::Column::Id,
            reconcile_rejected::Column::Record,
        ),
        |record: serde_json::Value| is_person(Some(&record)),
    )
    .await?;
    rejected = rejected.add(reconcile_rejected::Column::Id.is_in(ids));
    Ok((inbox, rejected))
}

/// Rows without a key hash read per statement by the fallback.
const LEGACY_BATCH: u64 = 500;

/// The ids of `query`'s rows whose `data` column passes `is_match`, read a
/// batch at a time in id order so memory stays bounded.
async fn matching_ids<C, E, T>(
    txn: &C,
    query: Select<E>,
    (id, data): (E::Column, E::Column),
    is_match: impl Fn(T) -> bool,
) -> Result<Vec<i64>, DbErr>
where
    C: ConnectionTrait,
    E: EntityTrait,
    T: TryGetable,
{
    let mut found = Vec::new();
    let mut after = 0i64;
    loop {
        let batch: Vec<(i64, T)> = query
            .clone()
            .select_only()
            .columns([id, data])
            .filter(id.gt(after))
            .order_by_asc(id)
            .limit(LEGACY_BATCH)
            .into_tuple()
            .all(txn)
            .await?;
        let Some(last) = batch.last().map(|(row, _)| *row) else {
            return Ok(found);
        };
        after = last;
        found.extend(
            batch
                .into_iter()
                .filter_map(|(row, value)| is_match(value).then_some(row)),
        );
    }
}

/// Blanks the events' bodies. Those still waiting for an attempt are settled
/// as the tombstone now answers them (`processed`, `suppressed`), so no
/// worker later reports an emptied body as a broken one.
async fn forget_inbox_events<C: ConnectionTrait>(txn: &C, which: Condition) -> Result<u64, Error> {
    let now = crate::clock::now();
    inbox_event::Entity::update_many()
        .col_expr(
            inbox_event::Column::State,
            Expr::value(InboxState::Processed.as_str()),
        )
        .col_expr(
            inbox_event::Column::Outcome,
            Expr::value(Outcome::Suppressed.as_str()),
        )
        .col_expr(
            inbox_event::Column::NextAttemptAt,
            Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
        )
        .col_expr(inbox_event::Column::ProcessedAt, Expr::value(now))
        .col_expr(inbox_event::Column::UpdatedAt, Expr::value(now))
        .filter(which.clone())
        .filter(
            inbox_event::Column::State
                .is_in([InboxState::Received.as_str(), InboxState::Failed.as_str()]),
        )
        .exec(txn)
        .await?;
    blank_inbox_bodies(txn, which).await
}

/// Deletes or blanks every row holding the lead's data; rows per table.
async fn remove_everything<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    lead: &lead::Model,
    include_contact: bool,
) -> Result<BTreeMap<&'static str, u64>, Error> {
    let id = lead.id;
    let mut counts = BTreeMap::new();

    let events_of_lead = Query::select()
        .column(outbox_event::Column::Id)
        .from(outbox_event::Entity)
        .and_where(outbox_event::Column::LeadId.eq(id))
        .to_owned();
    let n = outbox_delivery::Entity::delete_many()
        .filter(
            Condition::any()
                .add(outbox_delivery::Column::LeadId.eq(id))
                .add(outbox_delivery::Column::OutboxEventId.in_subquery(events_of_lead)),
        )
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("outbox_delivery", n);
    let n = outbox_event::Entity::delete_many()
        .filter(outbox_event::Column::LeadId.eq(id))
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("outbox_event", n);
    let n = activity::Entity::delete_many()
        .filter(activity::Column::LeadId.eq(id))
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("activity", n);
    let (inbox, rejected) = person_rows(txn, hasher, lead).await?;
    counts.insert("inbox_event", forget_inbox_events(txn, inbox).await?);
    let n = reconcile_rejected::Entity::delete_many()
        .filter(rejected)
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("reconcile_rejected", n);

    let runs_of_source = Query::select()
        .column(import_run::Column::Id)
        .from(import_run::Entity)
        .and_where(import_run::Column::Source.eq(lead.source.as_str()))
        .to_owned();
    let n = import_row::Entity::delete_many()
        .filter(
            Condition::any().add(import_row::Column::LeadId.eq(id)).add(
                Condition::all()
                    .add(import_row::Column::SourceRef.eq(lead.source_ref.as_str()))
                    .add(import_row::Column::RunId.in_subquery(runs_of_source)),
            ),
        )
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("import_row", n);
    // Forgetting the applied rows makes an import re-run ask the write path
    // again, which answers `suppressed`.
    let n = import_applied_row::Entity::delete_many()
        .filter(import_applied_row::Column::LeadId.eq(id))
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("import_applied_row", n);

    // Stored idempotent responses go by the subjects recorded with them;
    // `legacy_responses` names those stored before subjects were recorded.
    let mut subjects = vec![Subject::Lead(id)];
    subjects.extend(
        hasher
            .key_hashes(&lead.source, &lead.source_ref)
            .into_iter()
            .map(Subject::NaturalKey),
    );
    let mut legacy_responses = Condition::any()
        .add(idempotency_key::Column::Path.eq(format!("/api/leads/{id}")))
        .add(idempotency_key::Column::Path.like(format!("/api/leads/{id}/%")))
        .add(
            Condition::all()
                .add(idempotency_key::Column::Path.eq("/api/leads"))
                .add(idempotency_key::Column::ResponseBody.like(format!("%\"id\":{id},%"))),
        );
    let n = lead_duplicate::Entity::delete_many()
        .filter(
            Condition::any()
                .add(lead_duplicate::Column::LeadId.eq(id))
                .add(lead_duplicate::Column::OtherLeadId.eq(id)),
        )
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("lead_duplicate", n);
    let n = deal::Entity::update_many()
        .col_expr(deal::Column::LeadId, Expr::value(Option::<i64>::None))
        .filter(deal::Column::LeadId.eq(id))
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("deal_unlinked", n);

    // A task's title and description are free text about the person.
    let n = task::Entity::delete_many()
        .filter(task::Column::SubjectType.eq("lead"))
        .filter(task::Column::SubjectId.eq(id))
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("task", n);

    let conversion = lead_conversion::Entity::find_by_id(id).one(txn).await?;
    if let (Some(conversion), true) = (&conversion, include_contact) {
        let cid = conversion.contact_id;
        let n = contact::Entity::update_many()
            .col_expr(contact::Column::Email, Expr::value(Option::<String>::None))
            .col_expr(contact::Column::Name, Expr::value(Option::<String>::None))
            .col_expr(contact::Column::Phone, Expr::value(Option::<String>::None))
            .col_expr(
                contact::Column::Version,
                Expr::col(contact::Column::Version).add(1),
            )
            .col_expr(contact::Column::UpdatedAt, Expr::value(crate::clock::now()))
            .filter(contact::Column::Id.eq(cid))
            .exec(txn)
            .await?
            .rows_affected;
        counts.insert("contact", n);
        let n = crm_activity::Entity::delete_many()
            .filter(crm_activity::Column::SubjectType.eq("contact"))
            .filter(crm_activity::Column::SubjectId.eq(cid))
            .exec(txn)
            .await?
            .rows_affected;
        counts.insert("crm_activity", n);
        let n = task::Entity::delete_many()
            .filter(task::Column::SubjectType.eq("contact"))
            .filter(task::Column::SubjectId.eq(cid))
            .exec(txn)
            .await?
            .rows_affected;
        *counts.entry("task").or_default() += n;
        subjects.push(Subject::Contact(cid));
        legacy_responses = legacy_responses
            .add(idempotency_key::Column::Path.eq(format!("/api/contacts/{cid}")))
            .add(idempotency_key::Column::Path.like(format!("/api/contacts/{cid}/%")));
    }
    let n = lead_conversion::Entity::delete_many()
        .filter(lead_conversion::Column::LeadId.eq(id))
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("lead_conversion", n);
    let n = lead::Entity::delete_by_id(id)
        .exec(txn)
        .await?
        .rows_affected;
    counts.insert("lead", n);
    // Last: every write that held the lead or the contact has committed by
    // now, so its stored reply and subjects are visible to this statement.
    let n = idempotency::forget_about(txn, hasher, &subjects, legacy_responses).await?;
    counts.insert("idempotency_key", n);
    Ok(counts)
}

/// The natural key's tombstone, if it has one.
pub async fn find_tombstone<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    source: &str,
    source_ref: &str,
) -> Result<Option<lead_tombstone::Model>, Error> {
    Ok(
        lead_tombstone::Entity::find_by_id(hasher.key_hash(source, source_ref))
            .one(conn)
            .await?,
    )
}
