//! Processes every lead whose current version has not been processed, in
//! batches. The backlog is a partial index over the lead table, so a lead is
//! never forgotten even if no wake-up reached a worker; several workers may
//! run at once (see `domain::lead::processing::process_batch`).

use std::time::Duration;

use sea_orm::DatabaseConnection;
use tokio::sync::watch;

/// Processes one batch of up to `limit` leads; returns how many it took.
pub async fn run_once(db: &DatabaseConnection, limit: u64) -> Result<usize, domain::Error> {
    let done = domain::lead::processing::process_batch(db, limit).await?;
    metrics::counter!("leadpipe_leads_processed_total").increment(done.taken as u64);
    if let Some(error) = done.transient {
        tracing::warn!(%error, "some leads could not be processed; they stay in the backlog");
        // Those leads are still first in the backlog: pause before retrying.
        if done.taken > 0 && done.given_up.len() < done.taken {
            return Err(domain::Error::Db(sea_orm::DbErr::Custom(error)));
        }
    }
    Ok(done.taken)
}

/// Runs batches while the backlog has leads, then waits for leads to change
/// (a wake-up from the inbox workers) or for `idle`, until `stop`.
pub async fn run(db: DatabaseConnection, idle: Duration, batch: u64, stop: watch::Receiver<bool>) {
    let mut work = crate::wake::lead_work(&db);
    loop {
        work.borrow_and_update();
        loop {
            if *stop.borrow() {
                return;
            }
            match run_once(&db, batch).await {
                Ok(n) if n > 0 => {}
                Ok(_) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "lead processing pass failed; retrying");
                    break;
                }
            }
        }
        if !crate::wake::next(&mut work, idle, &stop).await {
            return;
        }
    }
}
