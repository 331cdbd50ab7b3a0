//! Starts reconcile runs by each source's cron, in every worker process, as
//! an apalis worker whose passes come every `scheduler_interval`. Each pass
//! looks for the latest tick since the previous pass; the run it
//! starts carries the tick's key, unique in `reconcile_run`, so when several
//! processes see the same tick only one run starts, and the
//! one-running-run-per-source index keeps a slow run from overlapping the
//! next tick's. The pass also marks runs whose process died as failed.

use domain::store::Store;
use std::sync::Arc;

use apalis::prelude::{BoxDynError, Data};
use chrono::Utc;
use domain::entities::source;
use domain::inbound::source::schedule;
use domain::reconcile::run::{self, StartError, StartRun, Trigger};
use futures::future::{BoxFuture, FutureExt};
use sea_orm::{ColumnTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};
use tokio::sync::{Mutex, watch};
use tokio::task::JoinSet;

use super::{ReconcileSettings, Reconciler};
use crate::shutdown::stopped;

/// A pass of the scheduler worker: start the runs whose tick came since the
/// last pass.
#[derive(Debug, Clone, Copy)]
pub struct SchedulePass;

/// What the scheduler's passes share: the time of the last pass and the
/// runs they started, which are interrupted (marked failed, so the next
/// tick need not wait for their lease) when the worker stops.
pub struct Scheduler {
    reconciler: Arc<Reconciler>,
    last: Mutex<chrono::DateTime<Utc>>,
    running: Mutex<JoinSet<()>>,
    stop: watch::Receiver<bool>,
}

impl Scheduler {
    pub fn new(reconciler: Arc<Reconciler>, stop: watch::Receiver<bool>) -> Self {
        Self {
            reconciler,
            last: Mutex::new(Utc::now()),
            running: Mutex::new(JoinSet::new()),
            stop,
        }
    }

    /// Waits for the runs passes started (they end at stop).
    pub async fn finish(&self) {
        let mut running = self.running.lock().await;
        while running.join_next().await.is_some() {}
    }
}

/// The apalis task function of the scheduler; returns how many runs it
/// started.
///
/// Boxed: the pass runs on a tokio task of its own, and rustc proves its
/// future `Send` only here, where the lifetimes are concrete.
pub(crate) fn run_pass(
    _: SchedulePass,
    scheduler: Data<Arc<Scheduler>>,
) -> BoxFuture<'static, Result<usize, BoxDynError>> {
    let scheduler = (*scheduler).clone();
    async move {
        let settings = scheduler.reconciler.settings().clone();
        let mut last = scheduler.last.lock().await;
        let mut running = scheduler.running.lock().await;
        let now = Utc::now();
        let before = running.len();
        pass(
            &scheduler.reconciler,
            &settings,
            &mut running,
            *last,
            now,
            &scheduler.stop,
        )
        .await
        .inspect_err(|error| {
            tracing::warn!(%error, "reconcile scheduler pass failed; retrying");
        })?;
        *last = now;
        let started = running.len().saturating_sub(before);
        while running.try_join_next().is_some() {}
        Ok(started)
    }
    .boxed()
}

async fn pass(
    reconciler: &Arc<Reconciler>,
    settings: &ReconcileSettings,
    running: &mut JoinSet<()>,
    last: chrono::DateTime<Utc>,
    now: chrono::DateTime<Utc>,
    stop: &watch::Receiver<bool>,
) -> Result<(), domain::Error> {
    let db = reconciler.db();
    let abandoned = run::fail_abandoned(db, None, settings.lease).await?;
    if abandoned > 0 {
        tracing::warn!(
            count = abandoned,
            "reconcile runs without a heartbeat marked failed"
        );
    }
    for (name, cron) in scheduled_sources(db).await? {
        let schedule = match schedule::parse(&cron) {
            Ok(schedule) => schedule,
            Err(reason) => {
                tracing::warn!(source = %name, %reason, "bad reconcile cron; skipped");
                continue;
            }
        };
        let Some(tick) = schedule::due_tick(&schedule, last, now) else {
            continue;
        };
        let start = StartRun {
            source: name.clone(),
            dry_run: false,
            since: None,
            trigger: Trigger::Schedule,
            tick_key: Some(schedule::tick_key(&name, tick)),
            started_by: None,
            lease: settings.lease,
        };
        match run::start(db, &start).await {
            Ok(started) => {
                tracing::info!(source = %name, run_id = started.id, %tick, "scheduled reconcile started");
                let reconciler = reconciler.clone();
                let stop = stop.clone();
                running.spawn(async move {
                    let run_id = started.id;
                    tokio::select! {
                        result = reconciler.execute(started, |_| {}) => {
                            if let Err(error) = result {
                                tracing::warn!(run_id, %error, "scheduled reconcile ended badly");
                            }
                        }
                        () = stopped(stop) => {
                            reconciler.interrupt(run_id, "interrupted: the worker process stopped").await;
                        }
                    }
                });
            }
            Err(StartError::TickTaken) => {
                tracing::debug!(source = %name, %tick, "tick already taken by another process")
            }
            Err(StartError::Running(other)) => {
                tracing::info!(source = %name, running_run = other.id, %tick, "scheduled reconcile skipped: the previous run is still going")
            }
            Err(StartError::Db(e)) => return Err(e),
            Err(error @ (StartError::NoSuchSource(_) | StartError::NoPullUrl(_))) => {
                tracing::debug!(source = %name, %error, "scheduled reconcile skipped")
            }
        }
    }
    Ok(())
}

/// Sources with a cron and a pull URL.
async fn scheduled_sources(db: &Store) -> Result<Vec<(String, String)>, DbErr> {
    source::Entity::find()
        .select_only()
        .column(source::Column::Name)
        .column(source::Column::ReconcileCron)
        .filter(source::Column::ReconcileCron.is_not_null())
        .filter(source::Column::PullUrl.is_not_null())
        .into_tuple::<(String, Option<String>)>()
        .all(db)
        .await
        .map(|rows| {
            rows.into_iter()
                .filter_map(|(name, cron)| cron.map(|c| (name, c)))
                .collect()
        })
}
