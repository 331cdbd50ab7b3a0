//! One page of a reconcile run, in one transaction: its records through the
//! write path (`ingest_counted_in`, origin `reconcile`), the run's counts, and
//! the source's cursor. Either all of it commits or none of it, so a crash
//! mid-page re-reads that page next time and loses nothing.

use crate::actor::Actor;
use crate::natural_key::KeyHasher;
use crate::store::Store;
use crate::store::Work;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DbErr, EntityTrait, QueryFilter};
use serde_json::Value;

use crate::entities::reconcile_run::{self, Column};
use crate::entities::source as source_entity;
use crate::inbound::source::Source;
use crate::lead::ingest::{self, IngestItem, Origin, Outcome};
use crate::lead::record::NewLead;
use crate::lead::tombstone;

use super::rejected::Rejection;
use super::run::{RUNNING, add};

/// A page as the sender's pull API answered it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PulledPage {
    pub records: Vec<Value>,
    /// Where the next page starts; `None` keeps the current cursor.
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// What a page (or a whole run, summed) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageCounts {
    pub fetched: i64,
    pub created: i64,
    pub updated: i64,
    pub unchanged: i64,
    pub stale: i64,
    /// Records whose natural key was erased: nothing written.
    pub suppressed: i64,
    /// Records that do not map to a lead (no `source_ref`, a bad email…):
    /// skipped, so one bad record cannot stop a source's reconcile forever.
    pub rejected: i64,
    /// Records reconcile had to create or update: deliveries the webhooks lost.
    pub missed: i64,
}

impl PageCounts {
    fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Created => self.created += 1,
            Outcome::Updated => self.updated += 1,
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Stale => self.stale += 1,
            Outcome::Suppressed => self.suppressed += 1,
        }
        if outcome.changed() {
            self.missed += 1;
        }
    }

    pub fn add(&mut self, other: &PageCounts) {
        self.fetched += other.fetched;
        self.created += other.created;
        self.updated += other.updated;
        self.unchanged += other.unchanged;
        self.stale += other.stale;
        self.suppressed += other.suppressed;
        self.rejected += other.rejected;
        self.missed += other.missed;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The run is no longer `running` (its lease ran out and another process
    /// marked it failed): nothing of this page was written.
    #[error("the run lost its lease; the page was not written")]
    LeaseLost,
    /// The database failed (`Error::Db`), or a domain rule of the write.
    #[error("{0}")]
    Db(#[from] crate::Error),
}

impl From<DbErr> for PageError {
    fn from(err: DbErr) -> Self {
        Self::Db(err.into())
    }
}

/// A pulled page mapped to leads, ready to write: mapping is pure, so a
/// runner maps the next page while the current one is written.
#[derive(Debug, Clone)]
pub struct MappedPage {
    news: Vec<NewLead>,
    /// Kept to retry after a mapping fix: the cursor moves past them.
    rejected: Vec<Rejection>,
    counts: PageCounts,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// Maps a pulled page's records; those that do not map are counted
/// `rejected` (and logged without their values).
pub fn map(run: &reconcile_run::Model, source: &Source, page: PulledPage) -> MappedPage {
    let mut counts = PageCounts {
        fetched: page.records.len() as i64,
        ..Default::default()
    };
    let (news, rejected) = map_records(run, source, &page.records, &mut counts);
    MappedPage {
        news,
        rejected,
        counts,
        next_cursor: page.next_cursor,
        has_more: page.has_more,
    }
}

/// Maps, ingests and books one page.
pub async fn apply(
    db: &Store,
    run: &reconcile_run::Model,
    source: &Source,
    page: &PulledPage,
) -> Result<PageCounts, PageError> {
    write(db, run, &source.name, map(run, source, page.clone())).await
}

/// Ingests and books a mapped page in one transaction. A dry run only
/// predicts the outcomes and books the counts; it writes no lead and leaves
/// the source's cursor.
pub async fn write(
    db: &Store,
    run: &reconcile_run::Model,
    source: &str,
    page: MappedPage,
) -> Result<PageCounts, PageError> {
    let MappedPage {
        news,
        rejected,
        mut counts,
        next_cursor,
        ..
    } = page;
    // SQLite: queued behind this process's other writers, not asleep in the
    // busy handler while they write.
    let txn = db.begin_write().await?;
    let rejected = without_buried(&txn, db.hasher(), source, rejected, &mut counts).await?;
    if run.dry_run {
        for outcome in super::compare::predict(&txn, db.hasher(), source, &news).await? {
            counts.count(outcome);
        }
    } else {
        let ctx = Actor {
            correlation_id: Some(format!("reconcile-{}", run.id)),
            principal_id: None,
        };
        let items: Vec<IngestItem> = news
            .into_iter()
            .map(|new| IngestItem {
                new,
                origin: Origin::Reconcile,
                ctx: ctx.clone(),
            })
            .collect();
        if !items.is_empty() {
            for done in ingest::ingest_counted_in(&txn, db.hasher(), &items).await? {
                counts.count(done.outcome);
            }
        }
        super::rejected::keep(
            &txn,
            db.hasher(),
            source,
            run.id,
            &rejected,
            crate::clock::now(),
        )
        .await?;
        if counts.created + counts.updated > 0 {
            txn.enqueued(Work::Leads);
        }
    }
    if !book(&txn, run, next_cursor.as_deref(), &counts).await? {
        txn.rollback().await?;
        return Err(PageError::LeaseLost);
    }
    txn.commit().await?;
    if !run.dry_run {
        record_metrics(source, &counts);
    }
    Ok(counts)
}

/// Rejected records whose key was erased are `suppressed`, as a record that
/// mapped would be, and are not kept: a dead letter would bring the
/// person's data back.
async fn without_buried<C: sea_orm::ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    source: &str,
    rejected: Vec<Rejection>,
    counts: &mut PageCounts,
) -> Result<Vec<Rejection>, crate::Error> {
    let buried = tombstone::suppressed(
        txn,
        hasher,
        rejected
            .iter()
            .filter_map(|r| r.source_ref.as_deref())
            .map(|source_ref| (source, source_ref)),
    )
    .await?;
    if buried.is_empty() {
        return Ok(rejected);
    }
    let (gone, kept): (Vec<_>, Vec<_>) = rejected.into_iter().partition(|r| {
        r.source_ref
            .as_ref()
            .is_some_and(|source_ref| buried.contains(&(source.to_owned(), source_ref.clone())))
    });
    counts.rejected -= gone.len() as i64;
    counts.suppressed += gone.len() as i64;
    Ok(kept)
}

fn map_records(
    run: &reconcile_run::Model,
    source: &Source,
    records: &[Value],
    counts: &mut PageCounts,
) -> (Vec<NewLead>, Vec<Rejection>) {
    let mut news = Vec::with_capacity(records.len());
    let mut rejected = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match super::rejected::map(source, record) {
            Ok(new) => news.push(new),
            Err(reason) => {
                counts.rejected += 1;
                // The reason names fields and pointers, never their values.
                tracing::warn!(run_id = run.id, source = %source.name, index, %reason, "reconcile skipped a record that does not map to a lead; kept to retry");
                rejected.push(Rejection::new(source, record, reason));
            }
        }
    }
    (news, rejected)
}

/// The run's counts and cursor, and (unless dry) the source's cursor, fenced
/// on the run still being ours; `false` when it is not.
async fn book<C: sea_orm::ConnectionTrait>(
    txn: &C,
    run: &reconcile_run::Model,
    next_cursor: Option<&str>,
    counts: &PageCounts,
) -> Result<bool, DbErr> {
    let mut update = reconcile_run::Entity::update_many()
        .col_expr(Column::HeartbeatAt, Expr::val(crate::clock::now()));
    for (col, expr) in [
        add(Column::Pages, 1),
        add(Column::Fetched, counts.fetched),
        add(Column::Created, counts.created),
        add(Column::Updated, counts.updated),
        add(Column::Unchanged, counts.unchanged),
        add(Column::Stale, counts.stale),
        add(Column::Suppressed, counts.suppressed),
        add(Column::Rejected, counts.rejected),
        add(Column::Missed, counts.missed),
    ] {
        update = update.col_expr(col, expr);
    }
    if let Some(next) = next_cursor {
        update = update.col_expr(Column::Cursor, Expr::val(Some(next.to_owned())));
    }
    let booked = update
        .filter(Column::Id.eq(run.id))
        .filter(Column::State.eq(RUNNING))
        .exec(txn)
        .await?;
    if booked.rows_affected != 1 {
        return Ok(false);
    }
    if let (false, Some(next)) = (run.dry_run, next_cursor) {
        source_entity::Entity::update_many()
            .col_expr(
                source_entity::Column::ReconcileCursor,
                Expr::val(Some(next.to_owned())),
            )
            .filter(source_entity::Column::Name.eq(run.source.as_str()))
            .exec(txn)
            .await?;
    }
    Ok(true)
}

fn record_metrics(source: &str, counts: &PageCounts) {
    for (outcome, n) in [
        ("created", counts.created),
        ("updated", counts.updated),
        ("unchanged", counts.unchanged),
        ("stale", counts.stale),
        ("suppressed", counts.suppressed),
        ("rejected", counts.rejected),
    ] {
        if n > 0 {
            metrics::counter!("leadpipe_reconcile_records_total", "source" => source.to_owned(), "outcome" => outcome)
                .increment(n as u64);
        }
    }
    if counts.missed > 0 {
        metrics::counter!("leadpipe_reconcile_missed_total", "source" => source.to_owned())
            .increment(counts.missed as u64);
    }
}
