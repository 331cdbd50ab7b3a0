//! Wake-ups between processes on PostgreSQL. Within a process the store's
//! signals ([`domain::store::Signals`]) carry them: bumped by SQLite's
//! commit hooks, or on PostgreSQL by a write transaction that enqueued work,
//! once it committed. Here [`announce`] sends `NOTIFY leadpipe_inbox` or
//! `leadpipe_leads` outside any transaction, coalesced, to the other
//! processes, which `LISTEN` ([`listen`]). Not a trigger in the writing
//! transaction: PostgreSQL commits the transactions that notify one at a
//! time, cluster-wide, and inserts at 32 clients fell from ~5,200 to ~345
//! a second with one (docs/performance.md, 2026-12-06). Polling stays as
//! the fallback for a lost signal, and finds what no write announces (a
//! retry coming due, a lease running out).

use std::time::Duration;

use domain::store::{Store, WakeUps, Work};
use sea_orm::sqlx::postgres::PgListener;
use tokio::sync::watch;

use crate::shutdown::stopped;

/// The PostgreSQL channel of "an inbox event waits to be processed".
pub const CHANNEL: &str = "leadpipe_inbox";

/// The PostgreSQL channel of "leads were written and wait to be processed"
/// (and with them outbox events to deliver).
pub const LEADS_CHANNEL: &str = "leadpipe_leads";

/// The least time between two `NOTIFY leadpipe_leads` of one process: a
/// notification is a commit of its own; under intake at its most, one per
/// write would add hundreds a second. Spaced, at most 50 a second.
const LEAD_NOTICE_SPACING: Duration = Duration::from_millis(20);

/// For a process that runs no [`announce`] (a CLI import or reconcile, at
/// its end): tells the worker processes once that `work` was committed.
pub async fn announce_once(store: &Store, work: Work) {
    let Some(pool) = store.postgres_pool() else {
        return;
    };
    let channel = match work {
        Work::Inbox => CHANNEL,
        Work::Leads => LEADS_CHANNEL,
    };
    notify(pool, channel).await;
}

/// Sends `NOTIFY leadpipe_inbox` and `NOTIFY leadpipe_leads` after this
/// process committed such work, until the process ends. Coalesced: the
/// writes made while one notification is on its way share the next one.
pub async fn announce(store: Store) {
    let Some(pool) = store.postgres_pool().cloned() else {
        return;
    };
    if !store.signals().claim_announcing() {
        return;
    }
    let (inbox, leads) = store.signals().to_announce();
    tokio::join!(
        notify_after(&pool, inbox, CHANNEL, Duration::ZERO),
        notify_after(&pool, leads, LEADS_CHANNEL, LEAD_NOTICE_SPACING),
    );
}

/// One `NOTIFY channel`; a lost one is found by the workers' poll.
async fn notify(pool: &sea_orm::sqlx::PgPool, channel: &'static str) {
    if let Err(error) = domain::store::postgres::notify(pool, channel).await {
        tracing::debug!(%error, channel, "wake-up not sent");
    }
}

/// `NOTIFY channel` after each bump of `signal`, at most one per `spacing`.
async fn notify_after(
    pool: &sea_orm::sqlx::PgPool,
    mut signal: watch::Receiver<u64>,
    channel: &'static str,
    spacing: Duration,
) {
    while signal.changed().await.is_ok() {
        signal.borrow_and_update();
        notify(pool, channel).await;
        if !spacing.is_zero() {
            tokio::time::sleep(spacing).await;
        }
    }
}

/// Waits for a bump of `signal` (if any), the next `tick`, or shutdown;
/// false on shutdown.
pub(crate) async fn next(
    signal: Option<&mut watch::Receiver<u64>>,
    tick: Duration,
    stop: &watch::Receiver<bool>,
) -> bool {
    let bumped = async {
        let changed = match signal {
            Some(signal) => signal.changed().await.is_ok(),
            None => false,
        };
        if !changed {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = bumped => true,
        () = tokio::time::sleep(tick) => true,
        () = stopped(stop.clone()) => false,
    }
}

/// Listens on `leadpipe_inbox` and `leadpipe_leads` and wakes this
/// process's inbox, or lead and outbox workers, reconnecting after a pause
/// when the connection is lost, until `stop`.
pub(crate) async fn listen(store: Store, stop: watch::Receiver<bool>) {
    let pool = match store.wake_ups() {
        WakeUps::OwnPool => store.postgres_pool().cloned(),
        WakeUps::Direct(pool) => Some(pool.clone()),
        WakeUps::Polling => None,
    };
    let Some(pool) = pool else {
        return;
    };
    let signals = store.signals().clone();
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => match listener.listen_all([CHANNEL, LEADS_CHANNEL]).await {
                Ok(()) => loop {
                    tokio::select! {
                        received = listener.recv() => match received {
                            Ok(notice) => match notice.channel() {
                                LEADS_CHANNEL => signals.leads_announced(),
                                _ => signals.inbox_announced(),
                            },
                            Err(error) => {
                                tracing::warn!(%error, "wake-up listener failed; polling until it is back");
                                break;
                            }
                        },
                        () = stopped(stop.clone()) => return,
                    }
                },
                Err(error) => tracing::warn!(%error, "cannot LISTEN for wake-ups"),
            },
            Err(error) => tracing::warn!(%error, "cannot connect the wake-up listener"),
        }
        // Whatever was missed meanwhile is found by the next passes.
        signals.inbox_announced();
        signals.leads_announced();
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stopped(stop.clone()) => return,
        }
    }
}
