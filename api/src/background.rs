//! Starting the background loops of one process.

use std::time::Duration;

use sea_orm::DatabaseConnection;
use workers::publisher::{Publisher, PublisherSettings};

use crate::config::{HttpSettings, WorkerSettings};

pub fn publisher_settings(http: &HttpSettings, workers: &WorkerSettings) -> PublisherSettings {
    PublisherSettings {
        request_timeout: Duration::from_secs(workers.delivery_timeout_secs),
        retry: workers.retry_policy(workers.delivery_max_attempts),
        outbound: http.outbound_policy(),
        ..PublisherSettings::default()
    }
}

/// Spawns the publisher, the lead processor and the sweeper on this runtime.
pub fn spawn(
    db: &DatabaseConnection,
    http: &HttpSettings,
    workers: &WorkerSettings,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let idle = Duration::from_millis(workers.poll_interval_ms.max(10));
    let publisher = Publisher::new(db.clone(), publisher_settings(http, workers))?;
    Ok(vec![
        tokio::spawn(publisher.run(idle)),
        tokio::spawn(workers::lead_processor::run(db.clone(), idle)),
        tokio::spawn(workers::sweeper::run(
            db.clone(),
            Duration::from_secs(http.sweep_interval_secs.max(1)),
        )),
    ])
}
