//! Re-enqueues inbox events that no job will process (see
//! `domain::inbound::inbox::sweep`). Safe on any number of processes at once.

use std::time::Duration;

use chrono::Utc;
use domain::inbound::inbox::sweep::{SweepRules, take_stranded};
use sea_orm::{DatabaseConnection, DbErr};
use tokio::sync::watch;

use crate::queue::InboxQueue;

/// One pass; returns how many events were re-enqueued.
pub async fn sweep_once(
    db: &DatabaseConnection,
    queue: &InboxQueue,
    rules: &SweepRules,
) -> Result<usize, DbErr> {
    let ids = take_stranded(db, Utc::now(), rules).await?;
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

/// Sweeps every `interval` until `stop` turns true.
pub async fn run(
    db: DatabaseConnection,
    queue: InboxQueue,
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
            }
            () = &mut stopped => break,
        }
    }
}
