//! Executing a started run: fetch a page, apply it (one transaction), move
//! on, until the sender says there is no more. Transient fetch errors are
//! retried with backoff and jitter; a permanent one, or running out of
//! attempts, ends the run `failed` with the cursor at the last good page.

use domain::store::Store;
use std::time::{Duration, Instant};

use domain::entities::reconcile_run::Model as Run;
use domain::inbound::source::Source;
use domain::reconcile::page::{self, MappedPage, PageCounts, PageError};
use domain::reconcile::run;
use domain::reconcile::{PullConfig, PulledPage};
use sea_orm::DbErr;

use super::ReconcileSettings;
use super::pull::{FetchError, PullClient};

/// A run's progress after each committed page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub run_id: i64,
    pub pages: i64,
    pub counts: PageCounts,
    pub cursor: Option<String>,
    /// Whether the sender said more pages follow.
    pub has_more: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    /// Another process took the run over after our lease ran out; it is
    /// not ours to finish.
    #[error("the run lost its lease to another process")]
    LeaseLost,
    /// The database failed (`domain::Error::Db`).
    #[error("{0}")]
    Db(#[from] domain::Error),
}

impl From<DbErr> for ExecuteError {
    fn from(err: DbErr) -> Self {
        Self::Db(err.into())
    }
}

/// Why a run stops early.
enum Stop {
    Failed(String),
    LeaseLost,
}

#[derive(Clone)]
pub struct Reconciler {
    db: Store,
    client: PullClient,
    settings: ReconcileSettings,
}

impl Reconciler {
    pub fn new(db: Store, settings: ReconcileSettings) -> Result<Self, reqwest::Error> {
        let client = PullClient::new(
            settings.request_timeout,
            settings.outbound.clone(),
            &settings.dns,
        )?;
        Ok(Self {
            db,
            client,
            settings,
        })
    }

    pub fn settings(&self) -> &ReconcileSettings {
        &self.settings
    }

    pub fn db(&self) -> &Store {
        &self.db
    }

    /// Runs a started run to its end and returns it as stored: `done`, or
    /// `failed` with its error. `on_progress` sees every committed page.
    pub async fn execute(
        &self,
        run: Run,
        mut on_progress: impl FnMut(&Progress),
    ) -> Result<Run, ExecuteError> {
        let span = tracing::info_span!("reconcile", run_id = run.id, source = %run.source, dry_run = run.dry_run);
        let started = Instant::now();
        let outcome =
            tracing::Instrument::instrument(self.pages(&run, &mut on_progress), span.clone()).await;
        let error = match outcome {
            Ok(()) => None,
            Err(Stop::LeaseLost) => {
                span.in_scope(|| tracing::warn!("reconcile run lost its lease; stopping"));
                return Err(ExecuteError::LeaseLost);
            }
            Err(Stop::Failed(reason)) => Some(reason),
        };
        let finished = run::finish(&self.db, run.id, error.as_deref())
            .await?
            .ok_or(ExecuteError::LeaseLost)?;
        metrics::counter!("leadpipe_reconcile_runs_total", "source" => finished.source.clone(), "state" => finished.state.clone())
            .increment(1);
        span.in_scope(|| log_end(&finished, started.elapsed()));
        Ok(finished)
    }

    /// Marks the run failed because its process is stopping (so the next run
    /// need not wait for the lease); best effort.
    pub async fn interrupt(&self, run_id: i64, why: &str) {
        match run::finish(&self.db, run_id, Some(why)).await {
            Ok(Some(run)) => {
                metrics::counter!("leadpipe_reconcile_runs_total", "source" => run.source.clone(), "state" => "failed")
                    .increment(1);
                tracing::warn!(run_id, reason = why, "reconcile run interrupted");
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(run_id, %error, "could not mark an interrupted reconcile run failed; its lease will")
            }
        }
    }

    async fn pages(&self, run: &Run, on_progress: &mut impl FnMut(&Progress)) -> Result<(), Stop> {
        // `domain::Error::Db` reads "database error: …".
        let db_failed = |e: domain::Error| Stop::Failed(e.to_string());
        let source = domain::inbound::source::find(&self.db, &run.source, &self.settings.keyring)
            .await
            .map_err(db_failed)?
            .ok_or_else(|| Stop::Failed(format!("source '{}' no longer exists", run.source)))?;
        let pull = source.pull.clone().ok_or_else(|| {
            Stop::Failed(format!("source '{}' no longer has a pull_url", run.source))
        })?;
        let mut progress = Progress {
            run_id: run.id,
            cursor: run.cursor.clone(),
            has_more: true,
            ..Default::default()
        };
        let mut page = self
            .fetch_mapped(run, &source, &pull, progress.cursor.clone())
            .await?;
        loop {
            let advanced = page.next_cursor.is_some() && page.next_cursor != progress.cursor;
            // The next page is fetched and mapped (on its own task) while
            // this one is written: the sender's cursor is known before the
            // write, and neither waits on the other. A failed write drops
            // the fetched page unread, so the cursor stays at the last page
            // written.
            let prefetch = (page.has_more && advanced).then(|| {
                let this = self.clone();
                let (run, source, pull) = (run.clone(), source.clone(), pull.clone());
                let cursor = page.next_cursor.clone();
                Prefetch(tokio::spawn(async move {
                    this.fetch_mapped(&run, &source, &pull, cursor).await
                }))
            });
            let has_more = page.has_more;
            let next_cursor = page.next_cursor.clone();
            let counts = match page::write(&self.db, run, &source.name, page).await {
                Ok(counts) => counts,
                Err(PageError::LeaseLost) => return Err(Stop::LeaseLost),
                Err(PageError::Db(e)) => return Err(db_failed(e)),
            };
            progress.pages += 1;
            progress.counts.add(&counts);
            progress.has_more = has_more;
            if let Some(cursor) = next_cursor {
                progress.cursor = Some(cursor);
            }
            tracing::debug!(
                page = progress.pages,
                fetched = counts.fetched,
                missed = counts.missed,
                "reconcile page applied"
            );
            on_progress(&progress);
            if !has_more {
                return Ok(());
            }
            match prefetch {
                Some(mut next) => {
                    page = (&mut next.0)
                        .await
                        .map_err(|e| Stop::Failed(format!("the page fetch stopped: {e}")))??;
                }
                None => {
                    return Err(Stop::Failed(
                        "the pull API said has_more but gave no new next_cursor".into(),
                    ));
                }
            }
        }
    }

    /// One page, fetched (with retries) and mapped.
    async fn fetch_mapped(
        &self,
        run: &Run,
        source: &Source,
        pull: &PullConfig,
        cursor: Option<String>,
    ) -> Result<MappedPage, Stop> {
        let pulled = self
            .fetch_with_retry(run.id, pull, cursor.as_deref())
            .await?;
        Ok(page::map(run, source, pulled))
    }

    /// One page, retrying transient errors with capped exponential backoff
    /// and full jitter (honouring `Retry-After`), keeping the lease alive
    /// while it waits.
    async fn fetch_with_retry(
        &self,
        run_id: i64,
        pull: &PullConfig,
        cursor: Option<&str>,
    ) -> Result<PulledPage, Stop> {
        let retry = &self.settings.retry;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            match self.client.fetch(pull, cursor).await {
                Ok(page) => return Ok(page),
                Err(FetchError::Permanent(reason)) => return Err(Stop::Failed(reason)),
                Err(FetchError::Transient {
                    reason,
                    retry_after,
                }) => {
                    if retry.exhausted(attempt) {
                        return Err(Stop::Failed(format!(
                            "gave up after {attempt} attempts: {reason}"
                        )));
                    }
                    let delay = retry.delay(attempt, retry_after);
                    tracing::info!(
                        attempt,
                        retry_in_ms = delay.as_millis() as u64,
                        %reason,
                        "reconcile page fetch failed; will retry"
                    );
                    self.wait_keeping_lease(run_id, delay).await?;
                }
            }
        }
    }

    /// Sleeps `delay` in slices, renewing the run's lease between them.
    async fn wait_keeping_lease(&self, run_id: i64, delay: Duration) -> Result<(), Stop> {
        let slice = (self.settings.lease / 3).max(Duration::from_millis(10));
        let mut left = delay;
        loop {
            match run::heartbeat(&self.db, run_id).await {
                Ok(true) => {}
                Ok(false) => return Err(Stop::LeaseLost),
                Err(error) => tracing::warn!(%error, "could not renew the reconcile lease"),
            }
            if left.is_zero() {
                return Ok(());
            }
            let step = left.min(slice);
            tokio::time::sleep(step).await;
            left -= step;
        }
    }
}

/// The next page's fetch, stopped if the run stops first (a failed write,
/// a lost lease, shutdown).
struct Prefetch(tokio::task::JoinHandle<Result<MappedPage, Stop>>);

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn log_end(run: &Run, elapsed: Duration) {
    let per_second = run.fetched as f64 / elapsed.as_secs_f64().max(0.001);
    if let Some(error) = &run.error {
        tracing::error!(
            run_id = run.id,
            source = %run.source,
            pages = run.pages,
            fetched = run.fetched,
            missed = run.missed,
            %error,
            "reconcile run failed; the cursor stays at the last good page"
        );
    } else if run.missed > 0 && !run.dry_run {
        tracing::warn!(
            run_id = run.id,
            source = %run.source,
            pages = run.pages,
            fetched = run.fetched,
            created = run.created,
            updated = run.updated,
            missed = run.missed,
            "reconcile repaired deliveries the webhooks missed"
        );
    } else {
        tracing::info!(
            pages = run.pages,
            fetched = run.fetched,
            created = run.created,
            updated = run.updated,
            unchanged = run.unchanged,
            records_per_second = per_second.round() as u64,
            "reconcile run done"
        );
    }
}
