//! THE write path. Every door a lead comes through ends here, so a repeat from
//! any of them costs nothing: the database's unique key on
//! `(source, source_ref)` decides, never a select-then-insert.

use crate::actor::Actor;
use crate::natural_key::KeyHasher;
use crate::store::{Dialect, LeadUpsert, Store, Work};
use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Func, OnConflict, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, FromQueryResult, Iterable,
    QueryFilter, QuerySelect, Set,
};
use serde::Serialize;

use crate::entities::lead::{self, Column};
use crate::entities::{activity as activity_entity, outbox_event};
use crate::error::Error;
use crate::lead::activity::ActivityKind;
use crate::lead::pg_batch::{self, ActivityRow, OutboxRow};
use crate::lead::record::{LeadRecord, NewLead};
use crate::lead::{alias, tombstone, written};
use crate::outbound::events::LeadSnapshot;
use crate::outbound::outbox;

pub use crate::lead::outcome::{Origin, Outcome};

#[derive(Debug, Clone)]
pub struct Ingested {
    pub outcome: Outcome,
    /// `None` only when `suppressed`.
    pub lead: Option<lead::Model>,
}

impl Ingested {
    pub fn lead_id(&self) -> Option<i64> {
        self.lead.as_ref().map(|l| l.id)
    }
}

/// Validates, normalises and upserts one record in its own transaction.
#[tracing::instrument(name = "ingest", skip_all, fields(source = %record.source, origin = origin.as_str(), outcome))]
pub async fn ingest(
    db: &Store,
    record: LeadRecord,
    origin: Origin,
    ctx: &Actor,
) -> Result<Ingested, Error> {
    let new = record.normalise()?;
    let txn = db.begin_write().await?;
    let done = ingest_in(&txn, db.hasher(), &new, origin, ctx).await?;
    if done.outcome.changed() {
        txn.enqueued(Work::Leads);
    }
    txn.commit().await?;
    tracing::Span::current().record("outcome", done.outcome.as_str());
    Ok(done)
}

/// The upsert, its activity and its outbox event, on a caller's transaction.
pub async fn ingest_in<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    new: &NewLead,
    origin: Origin,
    ctx: &Actor,
) -> Result<Ingested, Error> {
    let item = IngestItem {
        new: new.clone(),
        origin,
        ctx: ctx.clone(),
    };
    Ok(ingest_many_in(txn, hasher, std::slice::from_ref(&item))
        .await?
        .pop()
        .ok_or_else(|| DbErr::Custom("ingest of one record returned nothing".into()))?)
}

/// One record of a batch, with where it came from.
#[derive(Debug, Clone)]
pub struct IngestItem {
    pub new: NewLead,
    pub origin: Origin,
    pub ctx: Actor,
}

type Key = (String, String);

fn key_of(new: &NewLead) -> Key {
    (new.source.clone(), new.source_ref.clone())
}

/// Ingests many records in one transaction with multi-row upserts, each
/// record getting the outcome it would have had alone, in arrival order: a
/// key that repeats within the batch goes into a later wave, so its second
/// record sees what its first one wrote.
pub async fn ingest_many_in<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    items: &[IngestItem],
) -> Result<Vec<Ingested>, Error> {
    ingest_batch(txn, hasher, items, Rows::Whole)
        .await?
        .into_iter()
        .map(|(outcome, reached)| {
            let lead = reached.map(Reached::into_whole).transpose()?;
            Ok(Ingested { outcome, lead })
        })
        .collect()
}

/// What a caller that books outcomes needs of an ingest: no row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub outcome: Outcome,
    /// `None` only when `suppressed`.
    pub lead_id: Option<i64>,
}

/// [`ingest_many_in`] for callers that only book outcomes (reconcile pages,
/// inbox batches): the same writes, but on PostgreSQL the database returns
/// and this decodes only each lead's key, id, version and sender's time.
pub async fn ingest_counted_in<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    items: &[IngestItem],
) -> Result<Vec<Counted>, Error> {
    // Where the upsert does not write them itself, the outbox events'
    // snapshots are built here, from whole rows.
    let rows = match Dialect::of(txn).lead_upsert() {
        LeadUpsert::Complete => Rows::Keys,
        LeadUpsert::RowsOnly => Rows::Whole,
    };
    Ok(ingest_batch(txn, hasher, items, rows)
        .await?
        .into_iter()
        .map(|(outcome, reached)| Counted {
            outcome,
            lead_id: reached.map(|r| r.id()),
        })
        .collect())
}

/// How much of each lead a batch reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rows {
    Whole,
    Keys,
}

/// The lead a record reached: whole, or what deciding on it takes.
// Rows move through a batch, never copied: boxing the big variant would
// allocate once per row on the hot path for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
enum Reached {
    Whole(lead::Model),
    Key(written::StoredKey),
}

impl Reached {
    fn id(&self) -> i64 {
        match self {
            Self::Whole(lead) => lead.id,
            Self::Key(key) => key.id,
        }
    }

    fn version(&self) -> i64 {
        match self {
            Self::Whole(lead) => lead.version,
            Self::Key(key) => key.version,
        }
    }

    fn source_updated_at(&self) -> Option<DateTime<Utc>> {
        match self {
            Self::Whole(lead) => lead.source_updated_at,
            Self::Key(key) => key.source_updated_at,
        }
    }

    fn merged_into_id(&self) -> Option<i64> {
        match self {
            Self::Whole(lead) => lead.merged_into_id,
            Self::Key(key) => key.merged_into_id,
        }
    }

    /// A lead read whole, in the form this batch reads its leads.
    fn of(lead: lead::Model, rows: Rows) -> Self {
        match rows {
            Rows::Whole => Self::Whole(lead),
            Rows::Keys => Self::Key(written::StoredKey {
                id: lead.id,
                source: lead.source,
                source_ref: lead.source_ref,
                version: lead.version,
                source_updated_at: lead.source_updated_at,
                merged_into_id: lead.merged_into_id,
            }),
        }
    }

    fn into_whole(self) -> Result<lead::Model, DbErr> {
        match self {
            Self::Whole(lead) => Ok(lead),
            Self::Key(_) => Err(DbErr::Custom(
                "a batch read keys where whole rows were asked for".into(),
            )),
        }
    }
}

async fn ingest_batch<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    items: &[IngestItem],
    rows: Rows,
) -> Result<Vec<(Outcome, Option<Reached>)>, Error> {
    let keys = tombstone::BatchKeys::of(
        hasher,
        items
            .iter()
            .map(|i| (i.new.source.as_str(), i.new.source_ref.as_str())),
    );
    keys.lock_shared(txn).await?;
    // A complete upsert (PostgreSQL) writes the timeline row and outbox
    // event of every row it wrote, and skips buried keys itself (one round
    // trip fewer): a record it neither wrote nor finds stored is looked up
    // below.
    let complete = Dialect::of(txn).lead_upsert() == LeadUpsert::Complete;
    let buried = if complete {
        HashSet::new()
    } else {
        keys.buried(txn).await?
    };
    let mut results: Vec<Option<(Outcome, Option<Reached>)>> = vec![None; items.len()];
    // Keys borrowed from the records: a batch's bookkeeping copies no strings.
    let mut seen: HashMap<(&str, &str), usize> = HashMap::with_capacity(items.len());
    let mut waves: Vec<Vec<usize>> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        if !buried.is_empty() && buried.contains(&key_of(&item.new)) {
            results[index] = Some((Outcome::Suppressed, None));
            continue;
        }
        let occurrence = seen
            .entry((item.new.source.as_str(), item.new.source_ref.as_str()))
            .or_insert(0);
        if waves.len() <= *occurrence {
            waves.push(Vec::new());
        }
        waves[*occurrence].push(index);
        *occurrence += 1;
    }

    // The timeline rows of the records a complete upsert left alone
    // (unchanged, stale).
    let mut untouched_rows: Vec<ActivityRow<'_, IngestDetail>> = Vec::new();
    // Records of merged leads' keys, written by [`alias::deliver`].
    let mut redirected: HashSet<usize> = HashSet::new();
    for wave in waves {
        // A lead's timeline keeps the order its records came in: what the
        // last wave left goes in before this one writes.
        if !untouched_rows.is_empty() {
            insert_timeline_rows(txn, &untouched_rows).await?;
            untouched_rows.clear();
        }
        let wave_items: Vec<&IngestItem> = wave.iter().map(|&i| &items[i]).collect();
        let news: Vec<&NewLead> = wave_items.iter().map(|item| &item.new).collect();
        // Where each key sits in the wave (keys are distinct within one).
        let position: HashMap<(&str, &str), usize> = news
            .iter()
            .enumerate()
            .map(|(p, n)| ((n.source.as_str(), n.source_ref.as_str()), p))
            .collect();
        let place = |key: (&str, &str)| {
            position
                .get(&key)
                .copied()
                .ok_or_else(|| DbErr::Custom("the upsert returned a key it was not sent".into()))
        };
        let mut written: Vec<Option<Reached>> = vec![None; news.len()];
        match upsert(txn, &wave_items, &news, &keys, rows).await? {
            Upserted::Whole(rows) => {
                for row in rows {
                    let p = place(row.key())?;
                    // A written row's payload is its record's.
                    written[p] = Some(Reached::Whole(row.with_payload(news[p].payload.clone())));
                }
            }
            Upserted::Keys(rows) => {
                for row in rows {
                    let p = place(row.key())?;
                    written[p] = Some(Reached::Key(row));
                }
            }
        }
        let untouched: Vec<&NewLead> = news
            .iter()
            .zip(&written)
            .filter(|(_, lead)| lead.is_none())
            .map(|(new, _)| *new)
            .collect();
        let mut stored = find_stored(txn, &untouched, rows).await?;
        // Neither written nor stored: the upsert skipped a buried key.
        let missing: Vec<&NewLead> = untouched
            .iter()
            .filter(|new| !stored.contains_key(&key_of(new)))
            .copied()
            .collect();
        let buried_here = if missing.is_empty() {
            HashSet::new()
        } else {
            tombstone::BatchKeys::of(
                hasher,
                missing
                    .iter()
                    .map(|n| (n.source.as_str(), n.source_ref.as_str())),
            )
            .buried(txn)
            .await?
        };
        for (p, &index) in wave.iter().enumerate() {
            let new = &items[index].new;
            let (outcome, lead) = match written[p].take() {
                // Inserts start at version 1; the update arm always bumps it.
                Some(lead) if lead.version() == 1 => (Outcome::Created, lead),
                Some(lead) => (Outcome::Updated, lead),
                None if buried_here.contains(&key_of(new)) => {
                    results[index] = Some((Outcome::Suppressed, None));
                    continue;
                }
                None => {
                    let lead = stored.remove(&key_of(new)).ok_or_else(|| {
                        DbErr::RecordNotFound("lead vanished during upsert".into())
                    })?;
                    if let Some(_survivor) = lead.merged_into_id() {
                        // A merged lead's key: the survivor takes it, with
                        // its timeline row and event written there.
                        let item = &items[index];
                        let (outcome, survivor) =
                            alias::deliver(txn, &item.new, item.origin, &item.ctx, lead.id())
                                .await?;
                        redirected.insert(index);
                        results[index] = Some((outcome, Some(Reached::of(survivor, rows))));
                        continue;
                    }
                    let stale = matches!(
                        (new.source_updated_at, lead.source_updated_at()),
                        (Some(incoming), Some(stored)) if incoming < stored
                    );
                    (
                        if stale {
                            Outcome::Stale
                        } else {
                            Outcome::Unchanged
                        },
                        lead,
                    )
                }
            };
            if complete && !outcome.changed() {
                untouched_rows.push(timeline_row(&items[index], outcome, &lead));
            }
            results[index] = Some((outcome, Some(lead)));
        }
    }
    let results: Vec<(Outcome, Option<Reached>)> = results.into_iter().flatten().collect();

    let mut activities = Vec::with_capacity(if complete { 0 } else { items.len() });
    let mut events = Vec::new();
    // Counted per batch, not per record: each `counter!` call looks its
    // series up in the registry.
    let mut tally: Vec<(Origin, Outcome, u64)> = Vec::new();
    for (index, (item, (outcome, reached))) in items.iter().zip(&results).enumerate() {
        match tally
            .iter_mut()
            .find(|(origin, counted, _)| *origin == item.origin && counted == outcome)
        {
            Some((_, _, n)) => *n += 1,
            None => tally.push((item.origin, *outcome, 1)),
        }
        // A complete upsert's rows were written with the waves.
        let Some(reached) = reached
            .as_ref()
            .filter(|_| !complete && !redirected.contains(&index))
        else {
            continue;
        };
        activities.push(timeline_row(item, *outcome, reached));
        if outcome.changed() {
            let Reached::Whole(lead) = reached else {
                return Err(DbErr::Custom("an event's snapshot needs the whole row".into()).into());
            };
            let event_type = if *outcome == Outcome::Created {
                outbox::LEAD_CREATED
            } else {
                outbox::LEAD_UPDATED
            };
            events.push(OutboxRow {
                event_id: outbox::new_event_id(),
                event_type,
                lead_id: Some(lead.id),
                payload: LeadSnapshot::from(lead),
                correlation_id: item.ctx.correlation_id.as_deref(),
                state: outbox::PENDING,
                created_at: crate::clock::now(),
            });
        }
    }
    for (origin, outcome, n) in tally {
        metrics::counter!("leadpipe_ingest_total", "origin" => origin.as_str(), "outcome" => outcome.as_str())
            .increment(n);
        if outcome == Outcome::Suppressed {
            metrics::counter!("leadpipe_ingest_suppressed_total", "origin" => origin.as_str())
                .increment(n);
        }
    }
    if !untouched_rows.is_empty() {
        insert_timeline_rows(txn, &untouched_rows).await?;
    }
    if !activities.is_empty() || !events.is_empty() {
        insert_activities_and_events(txn, activities, events).await?;
    }
    Ok(results)
}

/// An ingest's timeline row, for a record that reached a stored lead.
fn timeline_row<'a>(
    item: &'a IngestItem,
    outcome: Outcome,
    lead: &Reached,
) -> ActivityRow<'a, IngestDetail> {
    let detail = match outcome {
        Outcome::Stale => IngestDetail::Stale {
            record_source_updated_at: item.new.source_updated_at,
            stored_source_updated_at: lead.source_updated_at(),
        },
        _ => IngestDetail::Version {
            version: lead.version(),
        },
    };
    ActivityRow {
        lead_id: lead.id(),
        kind: ActivityKind::Ingest.as_str(),
        origin: Some(item.origin.as_str()),
        outcome: Some(outcome.as_str()),
        author_id: item.ctx.principal_id,
        detail,
        correlation_id: item.ctx.correlation_id.as_deref(),
        created_at: crate::clock::now(),
    }
}

/// Timeline rows without events (PostgreSQL's records the upsert left alone).
async fn insert_timeline_rows<C: ConnectionTrait>(
    txn: &C,
    rows: &[ActivityRow<'_, IngestDetail>],
) -> Result<(), DbErr> {
    let no_events: &[OutboxRow<'_, LeadSnapshot<'_>>] = &[];
    pg_batch::insert_activities_and_events(txn, rows, no_events).await
}

/// An ingest's timeline detail: the version it left, or for a stale record
/// both timestamps.
#[derive(Serialize)]
#[serde(untagged)]
enum IngestDetail {
    Version {
        version: i64,
    },
    Stale {
        record_source_updated_at: Option<DateTime<Utc>>,
        stored_source_updated_at: Option<DateTime<Utc>>,
    },
}

/// The timeline rows and outbox events through sea-query (SQLite).
async fn insert_activities_and_events<C: ConnectionTrait>(
    txn: &C,
    activities: Vec<ActivityRow<'_, IngestDetail>>,
    events: Vec<OutboxRow<'_, LeadSnapshot<'_>>>,
) -> Result<(), DbErr> {
    let json = |e: serde_json::Error| DbErr::Json(e.to_string());
    let activities = activities
        .into_iter()
        .map(|row| {
            Ok(activity_entity::ActiveModel {
                lead_id: Set(row.lead_id),
                kind: Set(row.kind.to_owned()),
                origin: Set(row.origin.map(str::to_owned)),
                outcome: Set(row.outcome.map(str::to_owned)),
                author_id: Set(row.author_id),
                detail: Set(Some(serde_json::to_value(&row.detail).map_err(json)?)),
                correlation_id: Set(row.correlation_id.map(str::to_owned)),
                created_at: Set(row.created_at),
                ..Default::default()
            })
        })
        .collect::<Result<Vec<_>, DbErr>>()?;
    let events = events
        .into_iter()
        .map(|row| {
            Ok(outbox_event::ActiveModel {
                event_id: Set(row.event_id),
                event_type: Set(row.event_type.to_owned()),
                lead_id: Set(row.lead_id),
                payload: Set(serde_json::to_value(&row.payload).map_err(json)?),
                correlation_id: Set(row.correlation_id.map(str::to_owned)),
                state: Set(row.state.to_owned()),
                created_at: Set(row.created_at),
                published_at: Set(None),
                ..Default::default()
            })
        })
        .collect::<Result<Vec<_>, DbErr>>()?;
    if !activities.is_empty() {
        activity_entity::Entity::insert_many(activities)
            .exec_without_returning(txn)
            .await?;
    }
    if !events.is_empty() {
        outbox_event::Entity::insert_many(events)
            .exec_without_returning(txn)
            .await?;
    }
    Ok(())
}

/// The stored rows for these keys (all exist: their upsert conflicted),
/// whole or only what deciding on them takes.
async fn find_stored<C: ConnectionTrait>(
    txn: &C,
    news: &[&NewLead],
    rows: Rows,
) -> Result<HashMap<Key, Reached>, DbErr> {
    if news.is_empty() {
        return Ok(HashMap::new());
    }
    // `source = ? AND source_ref IN (…)` per source: one OR arm per record
    // would nest past SQLite's expression depth limit (1000) on big batches
    // and keeps PostgreSQL from a plain index lookup.
    let mut by_source: HashMap<&str, Vec<&str>> = HashMap::new();
    for new in news {
        by_source
            .entry(new.source.as_str())
            .or_default()
            .push(new.source_ref.as_str());
    }
    let mut any = Condition::any();
    for (source, refs) in by_source {
        any = any.add(
            Condition::all()
                .add(Column::Source.eq(source))
                .add(Column::SourceRef.is_in(refs)),
        );
    }
    let find = lead::Entity::find().filter(any);
    Ok(match rows {
        Rows::Whole => find
            .all(txn)
            .await?
            .into_iter()
            .map(|l| ((l.source.clone(), l.source_ref.clone()), Reached::Whole(l)))
            .collect(),
        Rows::Keys => find
            .select_only()
            .columns(written::STORED_KEY_COLUMNS)
            .into_model::<written::StoredKey>()
            .all(txn)
            .await?
            .into_iter()
            .map(|k| ((k.source.clone(), k.source_ref.clone()), Reached::Key(k)))
            .collect(),
    })
}

/// `INSERT .. VALUES (..), (..) ON CONFLICT (source, source_ref) DO UPDATE ..
/// WHERE changed and not older`, returning the rows it wrote. Only
/// sender-owned columns appear in the update arm: `status` and `owner_id` are
/// insert-only. Keys must be distinct within one call.
/// The upsert of one wave; a complete one (PostgreSQL) skips the keys
/// `keys` finds buried (otherwise the caller left them out), and writes the
/// timeline row and outbox event of every row it wrote.
async fn upsert<C: ConnectionTrait>(
    txn: &C,
    wave: &[&IngestItem],
    news: &[&NewLead],
    keys: &tombstone::BatchKeys<'_>,
    rows: Rows,
) -> Result<Upserted, DbErr> {
    if Dialect::of(txn).lead_upsert() == LeadUpsert::Complete {
        let sql = match rows {
            Rows::Whole => &*UPSERT_FROM_JSON,
            Rows::Keys => &*UPSERT_FROM_JSON_RETURNING_KEYS,
        }
        .as_ref()
        .map_err(|e| DbErr::Custom(e.to_string()))?;
        let context: Vec<pg_batch::RecordContext<'_>> = wave
            .iter()
            .enumerate()
            .map(|(n, item)| pg_batch::RecordContext {
                n,
                source: &item.new.source,
                source_ref: &item.new.source_ref,
                event_id: outbox::new_event_id(),
                origin: item.origin.as_str(),
                author_id: item.ctx.principal_id,
                correlation_id: item.ctx.correlation_id.as_deref(),
            })
            .collect();
        let sender_rows: Vec<SenderRow<'_>> = news.iter().map(|new| SenderRow::of(new)).collect();
        let now = crate::clock::now();
        return Ok(match rows {
            Rows::Whole => Upserted::Whole(
                pg_batch::upsert(txn, &sender_rows, &context, keys, now, sql).await?,
            ),
            Rows::Keys => {
                Upserted::Keys(pg_batch::upsert(txn, &sender_rows, &context, keys, now, sql).await?)
            }
        });
    }
    // The caller builds the events from whole rows.
    let insert = upsert_statement(news)?;
    let stmt = crate::store::statement(txn, &insert);
    Ok(Upserted::Whole(
        written::WrittenRow::find_by_statement(stmt)
            .all(txn)
            .await?,
    ))
}

/// What an upsert returned of the rows it wrote.
enum Upserted {
    Whole(Vec<written::WrittenRow>),
    Keys(Vec<written::StoredKey>),
}

/// The upsert as PostgreSQL SQL with `rows` copies of `sample` (or of a
/// built-in one) whose `source_ref`s are `'__REF_<i>__'`, for the
/// benchmark's pgbench script: the raw database limit is measured with
/// exactly what we send.
pub fn upsert_sql_for_benchmark(rows: usize, sample: Option<NewLead>) -> Result<String, Error> {
    let sample = sample.unwrap_or_else(|| NewLead {
        source: "bench".into(),
        source_ref: String::new(),
        email: Some("person@example-company.com".into()),
        phone: Some("+493012345678".into()),
        name: Some("Person Number".into()),
        company: Some("Example Company GmbH".into()),
        source_updated_at: None,
        payload: serde_json::json!({"form": "contact-sales", "utm_source": "newsletter", "message": "We would like a demo next week."}),
    });
    let records: Vec<NewLead> = (0..rows)
        .map(|i| NewLead {
            source_ref: format!("__REF_{i}__"),
            ..sample.clone()
        })
        .collect();
    let refs: Vec<&NewLead> = records.iter().collect();
    Ok(upsert_statement(&refs)?.to_string(sea_orm::sea_query::PostgresQueryBuilder))
}

/// THE list of sender-owned columns: what an ingest takes from the sender's
/// record, one field per column. Both upserts' column lists and update arm
/// ([`on_conflict`]) read [`SenderRow::COLUMNS`]; PostgreSQL's batch sends
/// the rows serialised ([`pg_batch::upsert`]: `jsonb_populate_recordset`
/// matches the field names to the columns), the values path binds
/// [`SenderRow::values`]. A new sender-owned column is a field here and its
/// entry in `COLUMNS`; the compiler and the tests below point at the rest.
/// The row borrows the record: nothing is cloned on PostgreSQL's hot path.
#[derive(Serialize)]
pub(crate) struct SenderRow<'a> {
    source: &'a str,
    source_ref: &'a str,
    email: Option<&'a str>,
    phone: Option<&'a str>,
    name: Option<&'a str>,
    company: Option<&'a str>,
    payload: &'a serde_json::Value,
    content_hash: String,
    #[serde(serialize_with = "pg_batch::micros_opt")]
    source_updated_at: Option<DateTime<Utc>>,
}

impl<'a> SenderRow<'a> {
    /// The fields' columns, in the order both upserts list them.
    pub(crate) const COLUMNS: [Column; 9] = [
        Column::Source,
        Column::SourceRef,
        Column::Email,
        Column::Phone,
        Column::Name,
        Column::Company,
        Column::Payload,
        Column::ContentHash,
        Column::SourceUpdatedAt,
    ];

    pub(crate) fn of(new: &'a NewLead) -> Self {
        Self {
            source: &new.source,
            source_ref: &new.source_ref,
            email: new.email.as_deref(),
            phone: new.phone.as_deref(),
            name: new.name.as_deref(),
            company: new.company.as_deref(),
            payload: &new.payload,
            content_hash: new.content_hash(),
            source_updated_at: new.source_updated_at,
        }
    }

    /// The values, in [`Self::COLUMNS`]' order.
    fn values(self) -> [sea_orm::Value; 9] {
        let Self {
            source,
            source_ref,
            email,
            phone,
            name,
            company,
            payload,
            content_hash,
            source_updated_at,
        } = self;
        [
            source.into(),
            source_ref.into(),
            email.into(),
            phone.into(),
            name.into(),
            company.into(),
            payload.clone().into(),
            content_hash.into(),
            source_updated_at.into(),
        ]
    }
}

/// What a new lead starts with besides the sender's columns.
const INITIAL_STATUS: &str = "new";
const INITIAL_VERSION: i64 = 1;

/// [`SenderRow::COLUMNS`], then status, version, created and updated time.
fn insert_columns() -> impl Iterator<Item = Column> {
    SenderRow::COLUMNS.into_iter().chain([
        Column::Status,
        Column::Version,
        Column::CreatedAt,
        Column::UpdatedAt,
    ])
}

/// THE rule for a key that is stored already, for both backends' upserts:
/// only sender-owned columns change (`status` and `owner_id` are
/// insert-only), and only when the content changed and the record is not
/// older than the stored one.
fn on_conflict() -> OnConflict {
    let excluded = |col: Column| Expr::col((Alias::new("excluded"), col));
    let stored = |col: Column| Expr::col((lead::Entity, col));
    let content_changed = stored(Column::ContentHash).ne(excluded(Column::ContentHash));
    let not_older = stored(Column::SourceUpdatedAt)
        .is_null()
        .or(excluded(Column::SourceUpdatedAt).is_null())
        .or(excluded(Column::SourceUpdatedAt).gte(stored(Column::SourceUpdatedAt)));
    // Every sender column but the key is copied, with `updated_at`;
    // `source_updated_at` never goes back to NULL (below).
    let copied = SenderRow::COLUMNS
        .into_iter()
        .filter(|col| {
            !matches!(
                col,
                Column::Source | Column::SourceRef | Column::SourceUpdatedAt
            )
        })
        .chain([Column::UpdatedAt]);
    OnConflict::columns([Column::Source, Column::SourceRef])
        .update_columns(copied)
        .value(
            Column::SourceUpdatedAt,
            Func::coalesce([
                excluded(Column::SourceUpdatedAt),
                stored(Column::SourceUpdatedAt),
            ]),
        )
        .value(Column::Version, stored(Column::Version).add(1))
        // A merged lead's row is never written: its key is an alias
        // ([`alias::deliver`] applies the record to the survivor).
        .action_and_where(
            content_changed
                .and(not_older)
                .and(stored(Column::MergedIntoId).is_null()),
        )
        .to_owned()
}

/// The same upsert for PostgreSQL's batch path ([`pg_batch`]), rendered once
/// from the rule SQLite and the benchmark's pgbench use: the rows come as one
/// JSON array in `$1` that `jsonb_populate_recordset` unpacks into the
/// table's row type, `$2` is the time, so one text serves every batch size.
/// It writes the timeline rows and outbox events of the rows it wrote in
/// the same statement ([`pg_batch::upsert_with_timeline_sql`]).
static UPSERT_FROM_JSON: std::sync::LazyLock<Result<String, DbErr>> =
    std::sync::LazyLock::new(|| {
        upsert_with_timeline(Column::iter().filter(|c| !matches!(c, Column::Payload)))
    });

/// [`UPSERT_FROM_JSON`] returning only [`written::StoredKey`]'s columns.
static UPSERT_FROM_JSON_RETURNING_KEYS: std::sync::LazyLock<Result<String, DbErr>> =
    std::sync::LazyLock::new(|| upsert_with_timeline(written::STORED_KEY_COLUMNS));

fn upsert_with_timeline(returned: impl IntoIterator<Item = Column>) -> Result<String, DbErr> {
    upsert_from_json_returning_all().map(|upsert| {
        let outcomes = pg_batch::WrittenOutcomes {
            created: Outcome::Created.as_str(),
            updated: Outcome::Updated.as_str(),
        };
        pg_batch::upsert_with_timeline_sql(&upsert, outcomes, returned)
    })
}

const SKIP_BURIED: &str = r#"NOT EXISTS (SELECT 1 FROM unnest($3::text[], $4::text[], $5::text[]) AS "h"("key_hash", "source", "source_ref") JOIN "lead_tombstone" AS "t" ON "h"."key_hash" IN ("t"."key_hash", "t"."folded_hash") WHERE "h"."source" = "r"."source" AND "h"."source_ref" = "r"."source_ref")"#;

/// The upsert alone, as the statement's first part renders it (pinned by a
/// test).
#[cfg(test)]
fn upsert_from_json_sql() -> Result<String, DbErr> {
    let mut insert = upsert_from_json()?;
    insert.returning(written::returning());
    Ok(insert.to_string(sea_orm::sea_query::PostgresQueryBuilder))
}

/// The upsert returning every column, for
/// [`pg_batch::upsert_with_timeline_sql`] to build on.
fn upsert_from_json_returning_all() -> Result<String, DbErr> {
    let mut insert = upsert_from_json()?;
    insert.returning_all();
    Ok(insert.to_string(sea_orm::sea_query::PostgresQueryBuilder))
}

fn upsert_from_json() -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    let rows = Alias::new("r");
    let mut select = Query::select();
    select
        .exprs(SenderRow::COLUMNS.map(|col| Expr::col((rows.clone(), col))))
        .expr(Expr::val(INITIAL_STATUS))
        .expr(Expr::val(INITIAL_VERSION))
        .expr(Expr::cust("$2"))
        .expr(Expr::cust("$2"))
        .from_function(
            Func::cust("jsonb_populate_recordset")
                .arg(Expr::cust(r#"NULL::"lead""#))
                .arg(Expr::cust("$1::jsonb")),
            rows,
        )
        // Buried keys are skipped: $3..$5 are every record's tombstone
        // hashes (`tombstone::BatchKeys::columns`), read after the caller
        // took the keys' locks.
        .and_where(Expr::cust(SKIP_BURIED));
    let mut insert = Query::insert();
    insert
        .into_table(lead::Entity)
        .columns(insert_columns())
        .select_from(select)
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(on_conflict());
    Ok(insert)
}

fn upsert_statement(news: &[&NewLead]) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    let now = crate::clock::now();
    let mut insert = Query::insert();
    insert.into_table(lead::Entity).columns(insert_columns());
    for new in news {
        let initial: [sea_orm::Value; 4] = [
            INITIAL_STATUS.into(),
            INITIAL_VERSION.into(),
            now.into(),
            now.into(),
        ];
        insert
            .values(
                SenderRow::of(new)
                    .values()
                    .into_iter()
                    .chain(initial)
                    .map(Expr::from),
            )
            .map_err(|e| DbErr::Custom(e.to_string()))?;
    }
    insert
        .on_conflict(on_conflict())
        .returning(written::returning());
    Ok(insert)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use sea_orm::Iden;

    use super::*;

    /// `jsonb_populate_recordset` fills a column from the key of its name and
    /// leaves a missing one NULL without a word: the rows must carry exactly
    /// the statement's sender columns.
    #[test]
    fn a_lead_row_has_a_key_for_every_sender_column() {
        let record = NewLead {
            source: "s".into(),
            source_ref: "r".into(),
            email: None,
            phone: None,
            name: None,
            company: None,
            source_updated_at: None,
            payload: serde_json::json!({}),
        };
        let serde_json::Value::Object(keys) = serde_json::to_value(SenderRow::of(&record)).unwrap()
        else {
            panic!("a row is an object")
        };
        let mut keys: Vec<String> = keys.keys().cloned().collect();
        let mut columns: Vec<String> = SenderRow::COLUMNS.iter().map(|c| c.to_string()).collect();
        columns.sort();
        keys.sort();
        assert_eq!(keys, columns);
    }

    /// The values path binds each sender field under its own column: every
    /// field differs here, so a value in another's place shows.
    #[test]
    fn the_values_upsert_puts_each_value_in_its_column() {
        let record = NewLead {
            source: "webform".into(),
            source_ref: "ref-1".into(),
            email: Some("e@example.com".into()),
            phone: Some("+4930123".into()),
            name: Some("A Name".into()),
            company: Some("A Company".into()),
            source_updated_at: None,
            payload: serde_json::json!({"k": "v"}),
        };
        let sql = upsert_statement(&[&record])
            .unwrap()
            .to_string(sea_orm::sea_query::PostgresQueryBuilder);
        let expected = format!(
            r#"INSERT INTO "lead" ("source", "source_ref", "email", "phone", "name", "company", "payload", "content_hash", "source_updated_at", "status", "version", "created_at", "updated_at") VALUES ('webform', 'ref-1', 'e@example.com', '+4930123', 'A Name', 'A Company', '{{"k":"v"}}', '{}', NULL, 'new', 1, "#,
            record.content_hash()
        );
        assert!(sql.starts_with(&expected), "{sql}");
    }

    /// The PostgreSQL batch statement, rendered from the shared rule: a change
    /// to the rule must show here (and reach both backends).
    #[test]
    fn the_json_batch_upsert_is_the_shared_rule() {
        let expected = concat!(
            r#"INSERT INTO "lead" ("source", "source_ref", "email", "phone", "name", "company", "payload", "content_hash", "source_updated_at", "status", "version", "created_at", "updated_at") "#,
            r#"SELECT "r"."source", "r"."source_ref", "r"."email", "r"."phone", "r"."name", "r"."company", "r"."payload", "r"."content_hash", "r"."source_updated_at", 'new', 1, $2, $2 "#,
            r#"FROM jsonb_populate_recordset(NULL::"lead", $1::jsonb) AS "r" "#,
            r#"WHERE NOT EXISTS (SELECT 1 FROM unnest($3::text[], $4::text[], $5::text[]) AS "h"("key_hash", "source", "source_ref") JOIN "lead_tombstone" AS "t" ON "h"."key_hash" IN ("t"."key_hash", "t"."folded_hash") WHERE "h"."source" = "r"."source" AND "h"."source_ref" = "r"."source_ref") "#,
            r#"ON CONFLICT ("source", "source_ref") DO UPDATE SET "email" = "excluded"."email", "phone" = "excluded"."phone", "name" = "excluded"."name", "company" = "excluded"."company", "payload" = "excluded"."payload", "content_hash" = "excluded"."content_hash", "updated_at" = "excluded"."updated_at", "source_updated_at" = COALESCE("excluded"."source_updated_at", "lead"."source_updated_at"), "version" = "lead"."version" + 1 "#,
            r#"WHERE "lead"."content_hash" <> "excluded"."content_hash" AND ("lead"."source_updated_at" IS NULL OR "excluded"."source_updated_at" IS NULL OR "excluded"."source_updated_at" >= "lead"."source_updated_at") AND "lead"."merged_into_id" IS NULL "#,
            r#"RETURNING "id", "source", "source_ref", "email", "phone", "name", "company", "content_hash", "source_updated_at", "status", "owner_id", "version", "processed_version", "created_at", "updated_at", "merged_into_id", "assigned_at", "first_response_at", "response_due_at", "response_breached_at""#,
        );
        assert_eq!(upsert_from_json_sql().unwrap(), expected);
    }

    /// The values path (SQLite, `loadgen upsert-sql`) carries the same clause.
    #[test]
    fn the_values_upsert_has_the_same_conflict_clause() {
        let record = NewLead {
            source: "webform".into(),
            source_ref: "a".into(),
            email: None,
            phone: None,
            name: None,
            company: None,
            source_updated_at: None,
            payload: serde_json::json!({}),
        };
        let values = upsert_statement(&[&record])
            .unwrap()
            .to_string(sea_orm::sea_query::PostgresQueryBuilder);
        let json = upsert_from_json_sql().unwrap();
        let clause = |sql: &str| {
            sql[sql.find(" ON CONFLICT ").unwrap()..sql.find(" RETURNING ").unwrap()].to_owned()
        };
        assert_eq!(clause(&values), clause(&json));
        let columns = |sql: &str| sql[..sql.find(')').unwrap()].to_owned();
        assert_eq!(columns(&values), columns(&json));
    }
}
