//! Where reads go. Lists, searches, timelines, stats, traces and exports may
//! be served by a PostgreSQL streaming replica (`DATABASE_READ_URL`); writes,
//! and every read that must see its own write (a write's response, `If-Match`
//! checks, idempotent replays, workers' claims), stay on the primary.
//!
//! A monitor measures the replica's lag twice a second. While the lag is
//! over the bound, or the replica does not answer, reads go to the primary:
//! a stale list is tolerable for a moment, a list minutes old or an error is
//! not.

use domain::store::Store;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sea_orm::{ConnectionTrait, DbBackend, Statement};

const CHECK_EVERY: Duration = Duration::from_millis(500);
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The connection a read-only handler uses: `reads.db()`.
#[derive(Clone)]
pub struct Reads {
    primary: Store,
    replica: Option<Arc<Replica>>,
}

struct Replica {
    db: Store,
    /// Set by the monitor: lag within bound and the replica answering.
    usable: AtomicBool,
}

impl Reads {
    /// Every read on the primary.
    pub fn primary_only(primary: Store) -> Self {
        Self {
            primary,
            replica: None,
        }
    }

    /// Reads on `replica` while it lags `max_lag` or less. Starts the lag
    /// monitor, which ends when the last clone of the returned value is
    /// dropped. Until the first check the primary serves.
    pub fn with_replica(primary: Store, replica: Store, max_lag: Duration) -> Self {
        let replica = Arc::new(Replica {
            db: replica,
            usable: AtomicBool::new(false),
        });
        tokio::spawn(monitor(primary.clone(), Arc::downgrade(&replica), max_lag));
        Self {
            primary,
            replica: Some(replica),
        }
    }

    /// The replica when it is usable, else the primary.
    pub fn db(&self) -> &Store {
        match &self.replica {
            Some(replica) if replica.usable.load(Ordering::Relaxed) => &replica.db,
            _ => &self.primary,
        }
    }
}

async fn monitor(primary: Store, replica: std::sync::Weak<Replica>, max_lag: Duration) {
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut was_usable = false;
    loop {
        ticks.tick().await;
        let Some(replica) = replica.upgrade() else {
            return;
        };
        let lag = tokio::time::timeout(CHECK_TIMEOUT, lag_seconds(&primary, &replica.db)).await;
        let usable = match lag {
            Ok(Ok(lag)) => {
                metrics::gauge!("leadpipe_read_replica_lag_seconds").set(lag);
                lag <= max_lag.as_secs_f64()
            }
            Ok(Err(error)) => {
                if was_usable {
                    tracing::warn!(%error, "read replica unreachable; reads go to the primary");
                }
                metrics::gauge!("leadpipe_read_replica_lag_seconds").set(f64::INFINITY);
                false
            }
            Err(_) => {
                metrics::gauge!("leadpipe_read_replica_lag_seconds").set(f64::INFINITY);
                false
            }
        };
        if usable != was_usable {
            if usable {
                tracing::info!("read replica within its lag bound; reads go to it");
            } else {
                tracing::warn!(
                    max_lag_secs = max_lag.as_secs_f64(),
                    "read replica behind its lag bound or unreachable; reads go to the primary"
                );
            }
        }
        metrics::gauge!("leadpipe_read_replica_in_use").set(if usable { 1.0 } else { 0.0 });
        replica.usable.store(usable, Ordering::Relaxed);
        was_usable = usable;
    }
}

/// How far the replica is behind the primary, in seconds: 0 when it has
/// replayed everything the primary had written when asked, else the age of
/// the last transaction it replayed. The primary is asked first, so a
/// replica whose WAL stream stopped is not mistaken for one that is up to
/// date.
async fn lag_seconds(primary: &Store, replica: &Store) -> Result<f64, sea_orm::DbErr> {
    let written = primary
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT pg_current_wal_lsn()::text AS lsn",
        ))
        .await?
        .ok_or_else(|| sea_orm::DbErr::Custom("no WAL position from the primary".into()))?
        .try_get::<String>("", "lsn")?;
    let lag = replica
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT (CASE \
                 WHEN NOT pg_is_in_recovery() THEN 0 \
                 WHEN pg_wal_lsn_diff(pg_last_wal_replay_lsn(), $1::pg_lsn) >= 0 THEN 0 \
                 ELSE COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()), 1e9) \
             END)::float8 AS lag",
            [written.into()],
        ))
        .await?
        .ok_or_else(|| sea_orm::DbErr::Custom("no lag from the replica".into()))?
        .try_get::<f64>("", "lag")?;
    Ok(lag.max(0.0))
}
