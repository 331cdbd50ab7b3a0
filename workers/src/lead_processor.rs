//! Runs `process_lead` for every lead whose current version has not been
//! processed. The backlog is a partial index over the lead table, so a lead
//! is never forgotten even if no job was queued for it; several workers may
//! run this at once: the lead row lock makes the second one a no-op.

use std::time::Duration;

use sea_orm::DatabaseConnection;

/// Processes up to `limit` leads from the backlog; returns how many it took.
pub async fn run_once(db: &DatabaseConnection, limit: u64) -> Result<usize, domain::Error> {
    let ids = domain::lead::processing::backlog(db, limit).await?;
    for &lead_id in &ids {
        match domain::lead::processing::process_lead(db, lead_id, None).await {
            Ok(done) if !done.skipped => {
                tracing::debug!(lead_id, assigned_to = ?done.assigned_to, new_duplicates = done.new_duplicates, "lead processed");
            }
            Ok(_) => {}
            Err(err) if err.is_transient() => return Err(err),
            Err(err) => {
                tracing::error!(lead_id, error = %err, "processing a lead failed for good; skipping it");
                domain::lead::processing::give_up(db, lead_id).await?;
            }
        }
    }
    Ok(ids.len())
}

pub async fn run(db: DatabaseConnection, idle: Duration) {
    loop {
        match run_once(&db, 100).await {
            Ok(n) if n > 0 => continue,
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "lead processing pass failed; retrying"),
        }
        tokio::time::sleep(idle).await;
    }
}
