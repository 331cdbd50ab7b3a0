//! Bulk import: a CSV or NDJSON file, row by row through `ingest` (origin
//! `import`), in batches of `batch_size` rows per transaction, with bounded
//! memory (a reader thread hands batches over a channel of two).
//!
//! A row's identity is the file's content hash (with the source and column
//! mapping) plus its row number: `import_applied_row` remembers every row
//! applied, so running the same file again changes nothing and reports each
//! row `unchanged`, while a corrected file (another hash) goes through
//! `ingest`, which updates only the leads whose content changed.

pub mod mapping;
pub mod reader;
pub mod report;

use crate::actor::Actor;
use crate::page::{self, IdWindow, Page};
use crate::store::Store;
use crate::store::Work;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use mapping::Mapping;
pub use reader::{Format, Row, RowReader};

use crate::entities::{import_applied_row, import_row, import_run, lead};
use crate::error::Error;
use crate::lead::ingest::{self, Origin, Outcome};
use crate::lead::record::NewLead;
use crate::source_name::is_valid_source_name;

pub const DEFAULT_BATCH_SIZE: usize = 500;
/// SQLite allows 32766 bound parameters per statement; 500 rows × 7 columns is far below.
pub const MAX_BATCH_SIZE: usize = 2000;

pub const STATE_RUNNING: &str = "running";
pub const STATE_DONE: &str = "done";
pub const STATE_FAILED: &str = "failed";
/// The process running the import stopped (killed, crashed, shut down)
/// without finishing it: no heartbeat for [`ABANDONED_AFTER`].
pub const STATE_ABANDONED: &str = "abandoned";
/// The server was asked to stop and its grace period ran out before the
/// import finished: the batches committed so far stay, counted in `rows`.
pub const STATE_INTERRUPTED: &str = "interrupted";
/// How often a running import touches its run's `updated_at`, also while a
/// batch is slow, so a silent run means a process that is gone.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(5);
/// A `running` run without a heartbeat this long is marked `abandoned`.
pub const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// What happened to one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowOutcome {
    Created,
    Updated,
    Unchanged,
    Stale,
    /// The key was erased (a tombstone): nothing written.
    Suppressed,
    Rejected,
}

impl RowOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Stale => "stale",
            Self::Suppressed => "suppressed",
            Self::Rejected => "rejected",
        }
    }
}

impl From<Outcome> for RowOutcome {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Created => Self::Created,
            Outcome::Updated => Self::Updated,
            Outcome::Unchanged => Self::Unchanged,
            Outcome::Stale => Self::Stale,
            Outcome::Suppressed => Self::Suppressed,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ImportSpec {
    pub source: String,
    pub format: Format,
    pub mapping: Mapping,
    pub dry_run: bool,
    pub file_name: Option<String>,
    pub started_by: Option<i64>,
    pub batch_size: usize,
}

/// Counts so far, for progress bars and `GET /api/imports/{id}`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Progress {
    pub rows: i64,
    pub created: i64,
    pub updated: i64,
    pub unchanged: i64,
    pub stale: i64,
    pub suppressed: i64,
    pub rejected: i64,
    pub bytes_read: i64,
    pub bytes_total: i64,
}

impl Progress {
    fn count(&mut self, outcome: RowOutcome) {
        self.rows += 1;
        match outcome {
            RowOutcome::Created => self.created += 1,
            RowOutcome::Updated => self.updated += 1,
            RowOutcome::Unchanged => self.unchanged += 1,
            RowOutcome::Stale => self.stale += 1,
            RowOutcome::Suppressed => self.suppressed += 1,
            RowOutcome::Rejected => self.rejected += 1,
        }
    }
}

/// Whether leadpipe knows `source`: a webhook source or the source of an
/// intake principal. Ops import only for these, so a typo or a stray name
/// cannot create leads for a door nobody configured.
pub async fn is_configured_source<C: ConnectionTrait>(
    conn: &C,
    source: &str,
) -> Result<bool, Error> {
    use crate::entities::{principal, source as source_entity};
    if source_entity::Entity::find_by_id(source.to_owned())
        .one(conn)
        .await?
        .is_some()
    {
        return Ok(true);
    }
    Ok(principal::Entity::find()
        .filter(principal::Column::Source.eq(source))
        .one(conn)
        .await?
        .is_some())
}

/// A run recorded and its file opened, ready to execute.
pub struct Prepared {
    pub run: import_run::Model,
    reader: RowReader,
}

/// Checks the source and the mapping against the file, hashes the file and
/// records the run (`running`). Nothing is imported yet.
pub async fn prepare(db: &Store, spec: &ImportSpec, path: &Path) -> Result<Prepared, Error> {
    if !is_valid_source_name(&spec.source) {
        return Err(Error::invalid(
            "source",
            "must be 1 to 64 characters: lower-case letters, digits, '.', '_' or '-'",
        ));
    }
    if spec.batch_size == 0 || spec.batch_size > MAX_BATCH_SIZE {
        return Err(Error::invalid("batch_size", "must be 1 to 2000"));
    }
    let owned = path.to_path_buf();
    let (file_hash, bytes_total) = tokio::task::spawn_blocking(move || reader::hash_file(&owned))
        .await
        .map_err(|e| DbErr::Custom(format!("hashing task failed: {e}")))??;
    let reader = RowReader::open(path, spec.format, &spec.mapping, &spec.source)?;
    let mapping_used = reader.mapping_used();
    let identity = {
        let mut h = Sha256::new();
        for part in [
            file_hash.as_str(),
            spec.source.as_str(),
            spec.format.as_str(),
            &serde_json::to_string(&mapping_used).unwrap_or_default(),
        ] {
            h.update(part.as_bytes());
            h.update(b"\n");
        }
        hex::encode(h.finalize())
    };
    let now = crate::clock::now();
    let run = import_run::ActiveModel {
        source: Set(spec.source.clone()),
        file_name: Set(spec.file_name.as_ref().map(|n| storable_text(n, 255))),
        format: Set(spec.format.as_str().to_owned()),
        file_hash: Set(file_hash),
        identity: Set(identity),
        mapping: Set(serde_json::to_value(&mapping_used).unwrap_or_default()),
        dry_run: Set(spec.dry_run),
        state: Set(STATE_RUNNING.to_owned()),
        rows: Set(0),
        created: Set(0),
        updated: Set(0),
        unchanged: Set(0),
        stale: Set(0),
        suppressed: Set(0),
        rejected: Set(0),
        bytes_total: Set(Some(i64::try_from(bytes_total).unwrap_or(i64::MAX))),
        bytes_read: Set(0),
        error: Set(None),
        started_by: Set(spec.started_by),
        started_at: Set(now),
        updated_at: Set(now),
        finished_at: Set(None),
        ..Default::default()
    }
    .insert(db)
    .await?;
    Ok(Prepared { run, reader })
}

/// At most `max` characters of `s` for a text column, a NUL shown as U+FFFD:
/// PostgreSQL's `text` refuses NUL, and a rejected row's `source_ref` or a
/// file name may hold one (SQLite would store it; the run must not fail).
fn storable_text(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .map(|c| {
            if c == '\0' {
                char::REPLACEMENT_CHARACTER
            } else {
                c
            }
        })
        .collect()
}

enum Message {
    Batch(Vec<Row>, u64),
    Failed(Error),
}

/// Imports every row of a prepared run; `on_progress` is called after each
/// committed batch. A failure marks the run `failed` (batches already
/// committed stay: running the same file again resumes, reporting them
/// `unchanged`).
pub async fn execute(
    db: &Store,
    prepared: Prepared,
    batch_size: usize,
    on_progress: impl FnMut(&Progress),
) -> Result<import_run::Model, Error> {
    execute_until(
        db,
        prepared,
        batch_size,
        on_progress,
        std::future::pending(),
    )
    .await
}

/// [`execute`], stopping after the batch in flight once `stop` completes:
/// the run is then `interrupted`, its committed rows counted, and importing
/// the same file again resumes it.
pub async fn execute_until(
    db: &Store,
    prepared: Prepared,
    batch_size: usize,
    mut on_progress: impl FnMut(&Progress),
    stop: impl std::future::Future<Output = ()>,
) -> Result<import_run::Model, Error> {
    let Prepared { run, mut reader } = prepared;
    let span =
        tracing::info_span!("import", run_id = run.id, source = %run.source, dry_run = run.dry_run);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Message>(2);
    let batch_size = batch_size.clamp(1, MAX_BATCH_SIZE);
    let producer = tokio::task::spawn_blocking(move || {
        loop {
            let mut rows = Vec::with_capacity(batch_size);
            let mut failed = None;
            while rows.len() < batch_size {
                match reader.next_row() {
                    Ok(Some(row)) => rows.push(row),
                    Ok(None) => break,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let end = rows.len() < batch_size;
            if !rows.is_empty()
                && tx
                    .blocking_send(Message::Batch(rows, reader.bytes_read()))
                    .is_err()
            {
                return;
            }
            if let Some(e) = failed {
                let _ = tx.blocking_send(Message::Failed(e));
                return;
            }
            if end {
                return;
            }
        }
    });

    let mut progress = Progress {
        bytes_total: run.bytes_total.unwrap_or(0),
        ..Default::default()
    };
    let mut stop = std::pin::pin!(stop);
    let result = async {
        loop {
            // A batch once taken is applied whole; only between batches
            // does a stop request end the run.
            let message = tokio::select! {
                biased;
                () = &mut stop => return Ok(true),
                message = rx.recv() => message,
            };
            let Some(message) = message else {
                return Ok(false);
            };
            match message {
                Message::Batch(rows, bytes_read) => {
                    let bytes_read = i64::try_from(bytes_read).unwrap_or(i64::MAX);
                    apply_batch(db, &run, rows, bytes_read, &mut progress).await?;
                    progress.bytes_read = bytes_read;
                    on_progress(&progress);
                }
                Message::Failed(e) => return Err(e),
            }
        }
    };
    let heartbeat = tokio::spawn(heartbeat(db.clone(), run.id));
    let result = tracing::Instrument::instrument(result, span.clone()).await;
    // A batch that fails while the server is stopping (its connections and
    // spooled upload going away) was interrupted, not refused: the same
    // file imported again resumes it.
    // Only after an error: a stop already taken must not be polled again.
    let stopping = result.is_err()
        && std::future::poll_fn(|cx| std::task::Poll::Ready(stop.as_mut().poll(cx).is_ready()))
            .await;
    let result = match result {
        Err(err) if stopping => {
            span.in_scope(|| tracing::warn!(error = %err, "import batch failed while stopping"));
            Ok(true)
        }
        other => other,
    };
    heartbeat.abort();
    drop(rx);
    let _ = producer.await;
    let now = crate::clock::now();
    let finish = import_run::Entity::update_many()
        .col_expr(import_run::Column::UpdatedAt, Expr::val(now))
        .col_expr(import_run::Column::FinishedAt, Expr::val(Some(now)))
        .filter(import_run::Column::Id.eq(run.id));
    match result {
        Ok(true) => {
            let message = format!(
                "the server stopped before this import finished ({} rows committed); \
                 import the same file again to resume",
                progress.rows
            );
            span.in_scope(|| {
                tracing::warn!(rows = progress.rows, "import interrupted by shutdown")
            });
            finish
                .col_expr(import_run::Column::State, Expr::val(STATE_INTERRUPTED))
                .col_expr(import_run::Column::Error, Expr::val(Some(message)))
                .exec(db)
                .await?;
            find_run(db, run.id).await
        }
        Ok(false) => {
            finish
                .col_expr(import_run::Column::State, Expr::val(STATE_DONE))
                .exec(db)
                .await?;
            span.in_scope(|| {
                tracing::info!(
                    rows = progress.rows,
                    created = progress.created,
                    updated = progress.updated,
                    unchanged = progress.unchanged,
                    stale = progress.stale,
                    suppressed = progress.suppressed,
                    rejected = progress.rejected,
                    "import finished"
                );
            });
            find_run(db, run.id).await
        }
        Err(err) => {
            let message = storable_text(&err.to_string(), 1000);
            span.in_scope(|| tracing::error!(error = %message, "import failed"));
            if let Err(e) = finish
                .col_expr(import_run::Column::State, Expr::val(STATE_FAILED))
                .col_expr(import_run::Column::Error, Expr::val(Some(message)))
                .exec(db)
                .await
            {
                tracing::warn!(error = %e, "could not mark the import run failed");
            }
            Err(err)
        }
    }
}

/// Touches the run's `updated_at` every [`HEARTBEAT`] until aborted.
async fn heartbeat(db: Store, run_id: i64) {
    let mut ticker = tokio::time::interval(HEARTBEAT);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let touched = import_run::Entity::update_many()
            .col_expr(
                import_run::Column::UpdatedAt,
                Expr::val(crate::clock::now()),
            )
            .filter(import_run::Column::Id.eq(run_id))
            .filter(import_run::Column::State.eq(STATE_RUNNING))
            .exec(&db)
            .await;
        if let Err(err) = touched {
            tracing::warn!(run_id, error = %err, "import heartbeat failed; retrying");
        }
    }
}

/// Marks `running` runs whose heartbeat stopped before `now - after` as
/// `abandoned`, saying how to resume; returns how many. Idempotent, so every
/// worker process may run it.
pub async fn abandon_silent_runs<C: ConnectionTrait>(
    conn: &C,
    now: chrono::DateTime<chrono::Utc>,
    after: std::time::Duration,
) -> Result<u64, Error> {
    let after = chrono::TimeDelta::from_std(after).unwrap_or(chrono::TimeDelta::MAX);
    let cutoff = now - after;
    let reason = "the process running this import stopped before it finished (no heartbeat); \
                  rows already committed stay: import the same file again to resume";
    let abandoned = import_run::Entity::update_many()
        .col_expr(import_run::Column::State, Expr::val(STATE_ABANDONED))
        .col_expr(
            import_run::Column::Error,
            Expr::val(Some(reason.to_owned())),
        )
        .col_expr(import_run::Column::UpdatedAt, Expr::val(now))
        .col_expr(import_run::Column::FinishedAt, Expr::val(Some(now)))
        .filter(import_run::Column::State.eq(STATE_RUNNING))
        .filter(import_run::Column::UpdatedAt.lt(cutoff))
        .exec(conn)
        .await?
        .rows_affected;
    Ok(abandoned)
}

/// One batch in one transaction: the leads, the report rows, the counts.
async fn apply_batch(
    db: &Store,
    run: &import_run::Model,
    rows: Vec<Row>,
    bytes_read: i64,
    progress: &mut Progress,
) -> Result<(), Error> {
    // SQLite: in this process's write turn, as every background writer.
    let txn = db.begin_write().await?;
    let numbers: Vec<i64> = rows
        .iter()
        .filter(|r| r.record.is_ok())
        .map(|r| r.number)
        .collect();
    let applied: HashMap<i64, i64> = if numbers.is_empty() {
        HashMap::new()
    } else {
        import_applied_row::Entity::find()
            .filter(import_applied_row::Column::Identity.eq(run.identity.as_str()))
            .filter(import_applied_row::Column::RowNumber.is_in(numbers))
            .all(&txn)
            .await?
            .into_iter()
            .map(|a| (a.row_number, a.lead_id))
            .collect()
    };
    let (stored, buried) = if run.dry_run {
        let keys = rows
            .iter()
            .filter_map(|r| r.record.as_ref().ok())
            .map(|n| (n.source.as_str(), n.source_ref.as_str()));
        (
            stored_leads(&txn, &run.source, &rows).await?,
            crate::lead::tombstone::suppressed(&txn, db.hasher(), keys).await?,
        )
    } else {
        (HashMap::new(), HashSet::new())
    };
    let ctx = Actor {
        correlation_id: Some(format!("import-{}", run.id)),
        principal_id: run.started_by,
    };
    let mut counts = Progress::default();
    let mut report = Vec::with_capacity(rows.len());
    let mut newly_applied = Vec::new();
    for row in rows {
        let (outcome, lead_id, reason) = match &row.record {
            Err(reason) => (RowOutcome::Rejected, None, Some(reason.clone())),
            Ok(_) if applied.contains_key(&row.number) => (
                RowOutcome::Unchanged,
                applied.get(&row.number).copied(),
                Some("row already applied by an earlier run of this file".to_owned()),
            ),
            Ok(new)
                if run.dry_run
                    && buried.contains(&(new.source.clone(), new.source_ref.clone())) =>
            {
                (RowOutcome::Suppressed, None, None)
            }
            Ok(new) if run.dry_run => {
                let (outcome, lead_id) = predict(new, stored.get(&new.source_ref));
                (outcome, lead_id, None)
            }
            Ok(new) => {
                let done = ingest::ingest_in(&txn, db.hasher(), new, Origin::Import, &ctx).await?;
                // A suppressed row stays unapplied: a re-run asks again.
                if let Some(lead_id) = done.lead_id() {
                    newly_applied.push(import_applied_row::ActiveModel {
                        identity: Set(run.identity.clone()),
                        row_number: Set(row.number),
                        lead_id: Set(lead_id),
                        run_id: Set(run.id),
                    });
                }
                (done.outcome.into(), done.lead_id(), None)
            }
        };
        counts.count(outcome);
        report.push(import_row::ActiveModel {
            run_id: Set(run.id),
            row_number: Set(row.number),
            line: Set(row.line),
            source_ref: Set(row.source_ref.map(|r| storable_text(&r, 255))),
            outcome: Set(outcome.as_str().to_owned()),
            lead_id: Set(lead_id),
            reason: Set(reason.map(|r| storable_text(&r, 1000))),
        });
    }
    if !newly_applied.is_empty() {
        import_applied_row::Entity::insert_many(newly_applied)
            .on_conflict(
                OnConflict::columns([
                    import_applied_row::Column::Identity,
                    import_applied_row::Column::RowNumber,
                ])
                .do_nothing()
                .to_owned(),
            )
            .exec_without_returning(&txn)
            .await?;
    }
    if !report.is_empty() {
        import_row::Entity::insert_many(report)
            .exec_without_returning(&txn)
            .await?;
    }
    let add = |col: import_run::Column, n: i64| (col, Expr::col(col).add(n));
    let mut update = import_run::Entity::update_many()
        .col_expr(import_run::Column::BytesRead, Expr::val(bytes_read))
        .col_expr(
            import_run::Column::UpdatedAt,
            Expr::val(crate::clock::now()),
        );
    for (col, expr) in [
        add(import_run::Column::Rows, counts.rows),
        add(import_run::Column::Created, counts.created),
        add(import_run::Column::Updated, counts.updated),
        add(import_run::Column::Unchanged, counts.unchanged),
        add(import_run::Column::Stale, counts.stale),
        add(import_run::Column::Suppressed, counts.suppressed),
        add(import_run::Column::Rejected, counts.rejected),
    ] {
        update = update.col_expr(col, expr);
    }
    update
        .filter(import_run::Column::Id.eq(run.id))
        .exec(&txn)
        .await?;
    if counts.created + counts.updated > 0 {
        txn.enqueued(Work::Leads);
    }
    txn.commit().await?;
    progress.rows += counts.rows;
    progress.created += counts.created;
    progress.updated += counts.updated;
    progress.unchanged += counts.unchanged;
    progress.stale += counts.stale;
    progress.suppressed += counts.suppressed;
    progress.rejected += counts.rejected;
    Ok(())
}

/// The stored leads a dry run compares a batch against.
async fn stored_leads<C: ConnectionTrait>(
    conn: &C,
    source: &str,
    rows: &[Row],
) -> Result<HashMap<String, lead::Model>, DbErr> {
    let refs: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.record.as_ref().ok())
        .map(|n| n.source_ref.as_str())
        .collect();
    if refs.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(lead::Entity::find()
        .filter(lead::Column::Source.eq(source))
        .filter(lead::Column::SourceRef.is_in(refs))
        .all(conn)
        .await?
        .into_iter()
        .map(|l| (l.source_ref.clone(), l))
        .collect())
}

/// What `ingest` would answer, by the same rules as its upsert.
fn predict(new: &NewLead, stored: Option<&lead::Model>) -> (RowOutcome, Option<i64>) {
    let Some(stored) = stored else {
        return (RowOutcome::Created, None);
    };
    let older = matches!(
        (new.source_updated_at, stored.source_updated_at),
        (Some(incoming), Some(stored)) if incoming < stored
    );
    let outcome = if older {
        RowOutcome::Stale
    } else if new.content_hash() == stored.content_hash {
        RowOutcome::Unchanged
    } else {
        RowOutcome::Updated
    };
    (outcome, Some(stored.id))
}

pub async fn find_run<C: ConnectionTrait>(conn: &C, id: i64) -> Result<import_run::Model, Error> {
    import_run::Entity::find_by_id(id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)
}

/// Runs, newest first.
pub async fn list_runs<C: ConnectionTrait>(
    conn: &C,
    window: IdWindow,
) -> Result<Page<import_run::Model>, Error> {
    let query = import_run::Entity::find();
    page::fetch_by_id(conn, query, import_run::Column::Id, window, |r| r.id).await
}

/// A page of a run's report, in row order, after row `after`.
pub async fn report_rows<C: ConnectionTrait>(
    conn: &C,
    run_id: i64,
    after: i64,
    limit: u64,
) -> Result<Vec<import_row::Model>, Error> {
    Ok(import_row::Entity::find()
        .filter(import_row::Column::RunId.eq(run_id))
        .filter(import_row::Column::RowNumber.gt(after))
        .order_by_asc(import_row::Column::RowNumber)
        .limit(limit)
        .all(conn)
        .await?)
}
