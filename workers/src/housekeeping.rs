//! Housekeeping that runs in every process: deleting what has outlived its
//! retention. Every step is an idempotent DELETE, so several nodes running
//! it at once do no harm.

use std::time::Duration;

use sea_orm::DatabaseConnection;

/// Deletes expired Idempotency-Keys; returns how many.
pub async fn sweep_once(db: &DatabaseConnection) -> Result<u64, sea_orm::DbErr> {
    let deleted = domain::idempotency::sweep_expired(db, domain::clock::now()).await?;
    if deleted > 0 {
        tracing::info!(deleted, "swept expired idempotency keys");
    }
    Ok(deleted)
}

/// Sweeps every `interval` until the task is dropped.
pub async fn run(db: DatabaseConnection, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(err) = sweep_once(&db).await {
            tracing::warn!(error = %err, "idempotency sweep failed; retrying next tick");
        }
    }
}
