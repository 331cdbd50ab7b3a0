//! Re-enqueues inbox events that no job will process (see
//! `domain::inbound::inbox::sweep`), and queues a lead-processing job when
//! leads waited longer than the grace with nothing taking them. Safe on any
//! number of processes at once.

use std::time::Duration;

use chrono::Utc;
use domain::inbound::inbox::sweep::{SweepRules, take_stranded};
use sea_orm::{DatabaseConnection, DbErr};
use tokio::sync::watch;

use crate::queue::{InboxQueue, LeadJobCause, LeadQueue};

/// One pass; returns how many events were re-enqueued.
pub async fn sweep_once(
    db: &DatabaseConnection,
    queue: &InboxQueue,
    rules: &SweepRules,
) -> Result<usize, DbErr> {
    // SQLite: in this process's write turn, as every other writer's, not
    // asleep in the busy handler behind them (a push takes its own).
    let ids = {
        let _turn = domain::db::write_turn(db).await;
        take_stranded(db, Utc::now(), rules).await?
    };
    for id in &ids {
        if let Err(error) = queue.push(*id, None).await {
            tracing::warn!(%error, "sweeper could not queue an inbox event; next pass will");
        }
    }
    if !ids.is_empty() {
        tracing::info!(count = ids.len(), "re-enqueued stranded inbox events");
    }
    Ok(ids.len())
}

/// One pass over the lead backlog: one job, however many leads are
/// stranded, which drains them all; true when it queued one.
pub async fn sweep_leads_once(
    db: &DatabaseConnection,
    queue: &LeadQueue,
    rules: &SweepRules,
) -> Result<bool, DbErr> {
    if !domain::lead::backlog::stranded(db, Utc::now(), rules.grace).await? {
        return Ok(false);
    }
    match queue.push(LeadJobCause::Sweep, None).await {
        Ok(()) => tracing::info!("queued processing of stranded leads"),
        Err(error) => {
            tracing::warn!(%error, "sweeper could not queue lead processing; next pass will")
        }
    }
    // This process's loops take them at once; the job is for any process.
    crate::wake::leads_changed(db);
    Ok(true)
}

/// Sweeps every `interval` until `stop` turns true.
pub async fn run(
    db: DatabaseConnection,
    queue: InboxQueue,
    leads: LeadQueue,
    rules: SweepRules,
    interval: Duration,
    stop: watch::Receiver<bool>,
) {
    let stopped = crate::shutdown::stopped(stop);
    tokio::pin!(stopped);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                if let Err(error) = sweep_once(&db, &queue, &rules).await {
                    tracing::warn!(%error, "inbox sweep failed; retrying next interval");
                }
                if let Err(error) = sweep_leads_once(&db, &leads, &rules).await {
                    tracing::warn!(%error, "lead backlog sweep failed; retrying next interval");
                }
            }
            () = &mut stopped => break,
        }
    }
}
