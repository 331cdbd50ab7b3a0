//! Group commit for the write path. With durable commits the database's
//! fsync rate, not our code, bounds one-record-per-transaction ingest; here
//! concurrent ingests are coalesced into one transaction with multi-row
//! upserts. Nothing waits on purpose: while one batch commits, the records
//! that arrive meanwhile queue up and form the next batch, so a lone request
//! pays nothing and a crowd shares its fsyncs. Each caller is answered only
//! after its own row is committed, with its own outcome.

use crate::actor::Actor;
use crate::store::Store;
use crate::store::Work;
use std::sync::Arc;
use std::time::Duration;

use sea_orm::DbErr;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::error::Error;
use crate::lead::ingest::{IngestItem, Ingested, Origin, ingest_many_in};
use crate::lead::record::LeadRecord;

#[derive(Debug, Clone, Copy)]
pub struct GroupCommitSettings {
    /// Most records in one transaction.
    pub max_batch: usize,
    /// Transactions committing at once (each needs a pooled connection).
    pub committers: usize,
    /// Extra time a committer waits to fill a batch; zero is right unless
    /// the load is steady and latency matters less than throughput.
    pub max_wait: Duration,
}

impl Default for GroupCommitSettings {
    fn default() -> Self {
        Self {
            max_batch: 128,
            committers: 4,
            max_wait: Duration::ZERO,
        }
    }
}

struct Job {
    item: IngestItem,
    reply: oneshot::Sender<Result<Ingested, Error>>,
}

/// A handle to the committers; cheap to clone.
#[derive(Clone)]
pub struct GroupCommitter {
    tx: mpsc::Sender<Job>,
}

impl GroupCommitter {
    /// Starts the committer tasks on the current runtime.
    pub fn start(db: Store, settings: GroupCommitSettings) -> Self {
        let (tx, rx) = mpsc::channel::<Job>(settings.max_batch * settings.committers.max(1) * 4);
        let rx = Arc::new(Mutex::new(rx));
        // SQLite has one writer: a second committer would only sleep in its
        // busy handler (up to 100 ms a try) while the first one commits.
        let committers = if db.dialect().has_one_writer() {
            1
        } else {
            settings.committers.max(1)
        };
        for _ in 0..committers {
            tokio::spawn(commit_loop(db.clone(), rx.clone(), settings));
        }
        Self { tx }
    }

    /// Validates and ingests one record as part of whatever batch it joins.
    pub async fn ingest(
        &self,
        record: LeadRecord,
        origin: Origin,
        ctx: Actor,
    ) -> Result<Ingested, Error> {
        let new = record.normalise()?;
        let (reply, answer) = oneshot::channel();
        let job = Job {
            item: IngestItem { new, origin, ctx },
            reply,
        };
        self.tx
            .send(job)
            .await
            .map_err(|_| Error::Db(DbErr::Custom("group commit stopped".into())))?;
        answer
            .await
            .map_err(|_| Error::Db(DbErr::Custom("group commit dropped a record".into())))?
    }
}

async fn commit_loop(
    db: Store,
    rx: Arc<Mutex<mpsc::Receiver<Job>>>,
    settings: GroupCommitSettings,
) {
    loop {
        let batch = {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else { return };
            let mut batch = vec![first];
            while batch.len() < settings.max_batch {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) if settings.max_wait.is_zero() => break,
                    Err(_) => match tokio::time::timeout(settings.max_wait, rx.recv()).await {
                        Ok(Some(job)) => batch.push(job),
                        _ => break,
                    },
                }
            }
            batch
        };
        commit(&db, batch).await;
    }
}

async fn commit(db: &Store, batch: Vec<Job>) {
    metrics::histogram!("leadpipe_group_commit_batch_size").record(batch.len() as f64);
    // Moved apart, not cloned: a record's payload is most of its size.
    let (items, replies): (Vec<IngestItem>, Vec<_>) =
        batch.into_iter().map(|job| (job.item, job.reply)).unzip();
    match commit_items(db, &items).await {
        Ok(results) => {
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(Ok(result));
            }
        }
        // One bad row must not fail its neighbours: retry each on its own.
        Err(err) if items.len() > 1 => {
            tracing::warn!(error = %err, size = items.len(), "batch failed; committing its records one by one");
            for (item, reply) in items.iter().zip(replies) {
                let result = commit_items(db, std::slice::from_ref(item))
                    .await
                    .map(|mut r| r.remove(0));
                let _ = reply.send(result);
            }
        }
        Err(err) => {
            for reply in replies {
                let _ = reply.send(Err(clone_err(&err)));
            }
        }
    }
}

/// A batch whose connection turned out to be dead is committed again on
/// the next one: a committer's pool hands out a connection used within the
/// last second without a ping, and every one of them may have been ended
/// at once (a restart, an administrator). Repeating is harmless either
/// way: had the commit landed, the upsert answers `unchanged`.
const LOST_CONNECTION_ATTEMPTS: usize = 3;

async fn commit_items(db: &Store, items: &[IngestItem]) -> Result<Vec<Ingested>, Error> {
    let mut attempt = 1;
    loop {
        match commit_once(db, items).await {
            Err(err) if attempt < LOST_CONNECTION_ATTEMPTS && err.is_connection_lost() => {
                tracing::warn!(error = %err, attempt, "lost the database connection; committing the batch again");
                attempt += 1;
            }
            done => return done,
        }
    }
}

async fn commit_once(db: &Store, items: &[IngestItem]) -> Result<Vec<Ingested>, Error> {
    let txn = db.begin_write().await?;
    let results = ingest_many_in(&txn, db.hasher(), items).await?;
    if results.iter().any(|done| done.outcome.changed()) {
        txn.enqueued(Work::Leads);
    }
    txn.commit().await?;
    Ok(results)
}

/// `Error` is not `Clone`; keep what callers classify on.
fn clone_err(err: &Error) -> Error {
    Error::Db(match err {
        Error::Db(DbErr::ConnectionAcquire(e)) => DbErr::ConnectionAcquire(*e),
        Error::Db(other) => DbErr::Custom(other.to_string()),
        other => DbErr::Custom(other.to_string()),
    })
}
