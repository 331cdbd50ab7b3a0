//! The pipeline at a glance, per source, computed from the tables themselves
//! so every node reports the same numbers: what arrived, how much of it was
//! a repeat, what is still waiting and for how long, what died.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Alias, Asterisk, Expr, ExprTrait, Func, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect, Select,
    TransactionSession, TransactionTrait,
};
use serde::Serialize;

use crate::clock;
use crate::entities::{
    inbox_event, lead, outbox_delivery, outbox_event, reconcile_run, source, subscription,
};
use crate::inbound::inbox::InboxState;
use crate::inbound::source::SourceState;
use crate::outbound::subscription as subscriptions;
use crate::store::Dialect;

const UNPROCESSED: [InboxState; 3] = [
    InboxState::Received,
    InboxState::Processing,
    InboxState::Failed,
];

/// Deliveries of events first received in a window, how many were repeats,
/// and what reconcile pulled in the window and found the webhooks missed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Window {
    pub events: i64,
    pub deliveries: i64,
    pub duplicates: i64,
    /// duplicates / deliveries; 0 when nothing arrived.
    pub duplicate_rate: f64,
    /// Records reconcile pulled from the source's API in runs that last
    /// wrote in the window (dry runs not counted).
    pub reconciled: i64,
    /// Of those, the records reconcile had to create or update: deliveries
    /// the webhooks missed.
    pub missed: i64,
    /// missed / reconciled: the share of what reconcile found that the
    /// webhooks had not brought; 0 when reconcile found nothing.
    pub missed_rate: f64,
}

impl Window {
    pub(crate) fn new(events: i64, deliveries: i64) -> Self {
        let duplicates = std::cmp::max(deliveries - events, 0);
        let duplicate_rate = if deliveries > 0 {
            duplicates as f64 / deliveries as f64
        } else {
            0.0
        };
        Self {
            events,
            deliveries,
            duplicates,
            duplicate_rate,
            ..Default::default()
        }
    }

    /// The same, with what reconcile found in the window.
    pub(crate) fn reconciled(self, reconciled: i64, missed: i64) -> Self {
        Self {
            reconciled,
            missed,
            missed_rate: share(missed, reconciled),
            ..self
        }
    }
}

/// part / whole; 0 when the whole is 0.
pub(crate) fn share(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        part as f64 / whole as f64
    } else {
        0.0
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SourceStats {
    pub source: String,
    /// The webhook source's state (`active`, `paused`: its events wait
    /// until it is resumed, `removed`); `null` for a name no webhook source
    /// was configured under (leads from the intake API or imports).
    pub state: Option<&'static str>,
    /// Inbox events by state (`received`, `processing`, `processed`, `failed`, `dead`, `skipped`).
    pub inbox: BTreeMap<&'static str, i64>,
    pub all_time: Window,
    pub last_hour: Window,
    pub last_day: Window,
    /// Age of the oldest event still waiting to be processed, in seconds.
    pub oldest_unprocessed_age_seconds: Option<f64>,
    /// Leads from the source, not counting those merged into another.
    pub leads: i64,
    /// When its newest inbox event was first received; `null` before its
    /// first delivery. Configured sources only, as the two below.
    pub last_received_at: Option<DateTime<Utc>>,
    /// Seconds since then: how long the source has been quiet.
    pub quiet_seconds: Option<f64>,
    /// Its usual gap between deliveries, in seconds: its `expected_interval`
    /// when configured, else the median gap between its last 21 deliveries
    /// of the last 28 days; `null` with fewer than 6 of them.
    pub usual_gap_seconds: Option<f64>,
    /// What reconcile pulled and found missing over the last
    /// [`RECENT_RECONCILE_HOURS`]: the metrics gauges' figures (the API shows
    /// the windows above instead).
    #[serde(skip)]
    pub recent_reconcile: Window,
}

/// The window of [`SourceStats::recent_reconcile`], in hours: the
/// missed-webhooks alert's.
pub const RECENT_RECONCILE_HOURS: i64 = 6;

#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct OutboxStats {
    pub events_pending: i64,
    /// Deliveries not yet delivered, by state; `held`: those of disabled
    /// subscriptions, waiting until they are enabled (not in the others).
    pub deliveries: BTreeMap<&'static str, i64>,
    /// Of the active subscriptions' deliveries.
    pub oldest_undelivered_age_seconds: Option<f64>,
}

/// One subscription's deliveries whose last attempt was in the last day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SubscriptionStats {
    pub subscription_id: i64,
    pub delivered: i64,
    pub dead: i64,
    pub attempts: i64,
    /// `delivered / attempts`: the share of attempts answered with a 2xx;
    /// `null` without attempts.
    pub success_rate: Option<f64>,
    /// Mean duration of the deliveries' last attempts, in milliseconds.
    pub avg_latency_ms: Option<f64>,
}

/// Lead processing (assignment, duplicate hints): its queue and its failures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LeadProcessingStats {
    /// Leads whose current version waits to be processed, those waiting for
    /// a retry included.
    pub backlog: i64,
    /// Leads whose last attempt failed; retried with backoff.
    pub failed: i64,
    /// Lead versions given up after a permanent error or too many attempts;
    /// the lead is processed again when it changes.
    pub dead: i64,
    /// Age of the longest-waiting lead's change, in seconds.
    pub oldest_unprocessed_age_seconds: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Stats {
    pub generated_at: DateTime<Utc>,
    pub sources: Vec<SourceStats>,
    pub outbox: OutboxStats,
    /// Per subscription, over the last day.
    pub subscriptions: Vec<SubscriptionStats>,
    /// The same as `lead_processing.backlog`.
    pub leads_processing_backlog: i64,
    pub lead_processing: LeadProcessingStats,
    /// Open, owned leads nobody answered by their due time (speed to lead).
    pub leads_response_overdue: u64,
}

fn age(now: DateTime<Utc>, since: Option<DateTime<Utc>>) -> Option<f64> {
    since.map(|t| std::cmp::max((now - t).num_milliseconds(), 0) as f64 / 1000.0)
}

/// Adds `events` (rows) and `deliveries` (1 + repeats each) to a grouped
/// inbox query, after the columns it groups by.
pub(crate) fn with_delivery_counts(
    query: Select<inbox_event::Entity>,
) -> Select<inbox_event::Entity> {
    query
        .column_as(Expr::col(inbox_event::Column::Id).count(), "events")
        .expr_as(
            Func::coalesce([
                Expr::col(inbox_event::Column::Deliveries).sum(),
                Expr::val(0),
            ]),
            "deliveries",
        )
}

async fn windows<C: ConnectionTrait>(
    conn: &C,
    since: Option<DateTime<Utc>>,
) -> Result<BTreeMap<String, Window>, DbErr> {
    let mut query = with_delivery_counts(
        inbox_event::Entity::find()
            .select_only()
            .column(inbox_event::Column::Source),
    )
    .group_by(inbox_event::Column::Source);
    if let Some(since) = since {
        query = query.filter(inbox_event::Column::ReceivedAt.gte(since));
    }
    let rows: Vec<(String, i64, i64)> = query.into_tuple().all(conn).await?;
    let mut windows: BTreeMap<String, Window> = rows
        .into_iter()
        .map(|(source, events, deliveries)| (source, Window::new(events, deliveries)))
        .collect();
    for (source, reconciled, missed) in reconciled(conn, since).await? {
        let window = windows.remove(&source).unwrap_or_default();
        windows.insert(source, window.reconciled(reconciled, missed));
    }
    Ok(windows)
}

/// What reconcile pulled and found missing, per source, in the runs (dry
/// runs aside) that last wrote since `since`: (source, reconciled, missed).
async fn reconciled<C: ConnectionTrait>(
    conn: &C,
    since: Option<DateTime<Utc>>,
) -> Result<Vec<(String, i64, i64)>, DbErr> {
    let mut query = with_reconcile_counts(
        reconcile_run::Entity::find()
            .select_only()
            .column(reconcile_run::Column::Source),
    )
    .group_by(reconcile_run::Column::Source);
    if let Some(since) = since {
        query = query.filter(reconcile_run::Column::HeartbeatAt.gte(since));
    }
    query.into_tuple().all(conn).await
}

/// Adds `reconciled` (records pulled) and `missed` to a grouped query over
/// reconcile runs, after the columns it groups by; dry runs are left out
/// (they repair nothing). A run counts when it last wrote (`heartbeat_at`).
pub(crate) fn with_reconcile_counts(
    query: Select<reconcile_run::Entity>,
) -> Select<reconcile_run::Entity> {
    // SUM of a BIGINT is a NUMERIC on PostgreSQL: cast back.
    let sum = |col: reconcile_run::Column| {
        Func::cast_as(
            Func::coalesce([Expr::col(col).sum(), Expr::val(0)]),
            Alias::new("bigint"),
        )
    };
    query
        .expr_as(sum(reconcile_run::Column::Fetched), "reconciled")
        .expr_as(sum(reconcile_run::Column::Missed), "missed")
        .filter(reconcile_run::Column::DryRun.eq(false))
}

pub async fn collect<C: ConnectionTrait>(conn: &C) -> Result<Stats, crate::Error> {
    collect_with(conn, true).await
}

/// What the metrics gauges show: [`collect`] without the delivery windows
/// (`all_time`, `last_hour`, `last_day` stay zero), three aggregates fewer,
/// and with each source's `recent_reconcile`.
///
/// On PostgreSQL in a transaction that plans no parallel workers: counting
/// a large `lead` table in parallel took three processes (on two cores, the
/// whole machine) for a background figure, and more CPU in all than one
/// process counting it alone.
pub async fn collect_gauges<C: ConnectionTrait + TransactionTrait>(
    db: &C,
) -> Result<Stats, crate::Error> {
    let Some(no_parallel_workers) = Dialect::of(db).no_parallel_workers() else {
        return collect_with(db, false).await;
    };
    let txn = db.begin().await?;
    txn.execute_unprepared(no_parallel_workers).await?;
    let stats = collect_with(&txn, false).await?;
    txn.commit().await?;
    Ok(stats)
}

async fn collect_with<C: ConnectionTrait>(
    conn: &C,
    with_windows: bool,
) -> Result<Stats, crate::Error> {
    let now = clock::now();
    let mut sources: BTreeMap<String, SourceStats> = BTreeMap::new();
    let entry = |sources: &mut BTreeMap<String, SourceStats>, name: &str| {
        sources
            .entry(name.to_owned())
            .or_insert_with(|| SourceStats {
                source: name.to_owned(),
                inbox: InboxState::ALL.iter().map(|s| (s.as_str(), 0)).collect(),
                ..Default::default()
            });
    };

    let by_state: Vec<(String, String, i64)> = inbox_event::Entity::find()
        .select_only()
        .column(inbox_event::Column::Source)
        .column(inbox_event::Column::State)
        .column_as(Expr::col(inbox_event::Column::Id).count(), "n")
        .group_by(inbox_event::Column::Source)
        .group_by(inbox_event::Column::State)
        .into_tuple()
        .all(conn)
        .await?;
    for (source, state, n) in by_state {
        entry(&mut sources, &source);
        if let Some(stats) = sources.get_mut(&source)
            && let Some(known) = InboxState::ALL.iter().find(|s| s.as_str() == state)
        {
            stats.inbox.insert(known.as_str(), n);
        }
    }

    let oldest: Vec<(String, Option<DateTime<Utc>>)> = inbox_event::Entity::find()
        .select_only()
        .column(inbox_event::Column::Source)
        .column_as(Expr::col(inbox_event::Column::ReceivedAt).min(), "oldest")
        .filter(inbox_event::Column::State.is_in(UNPROCESSED.map(InboxState::as_str)))
        .group_by(inbox_event::Column::Source)
        .into_tuple()
        .all(conn)
        .await?;
    for (source, since) in oldest {
        entry(&mut sources, &source);
        if let Some(stats) = sources.get_mut(&source) {
            stats.oldest_unprocessed_age_seconds = age(now, since);
        }
    }

    let windows_wanted = if with_windows {
        vec![
            (None, 0),
            (Some(now - Duration::hours(1)), 1),
            (Some(now - Duration::days(1)), 2),
        ]
    } else {
        Vec::new()
    };
    for (since, pick) in windows_wanted {
        for (source, window) in windows(conn, since).await? {
            entry(&mut sources, &source);
            if let Some(stats) = sources.get_mut(&source) {
                match pick {
                    0 => stats.all_time = window,
                    1 => stats.last_hour = window,
                    _ => stats.last_day = window,
                }
            }
        }
    }

    if !with_windows {
        let since = now - Duration::hours(RECENT_RECONCILE_HOURS);
        for (source, reconciled, missed) in reconciled(conn, Some(since)).await? {
            entry(&mut sources, &source);
            if let Some(stats) = sources.get_mut(&source) {
                stats.recent_reconcile = Window::default().reconciled(reconciled, missed);
            }
        }
    }

    for (source, rhythm) in super::rhythm::of_sources(conn, now).await? {
        entry(&mut sources, &source);
        if let Some(stats) = sources.get_mut(&source) {
            stats.last_received_at = rhythm.last_received_at;
            stats.quiet_seconds = age(now, rhythm.last_received_at);
            stats.usual_gap_seconds = rhythm.usual_gap_seconds;
        }
    }

    // COUNT(*), not COUNT(id): PostgreSQL answers it from the
    // `(source, source_ref)` index alone, without reading the table.
    let leads: Vec<(String, i64)> = lead::Entity::find()
        .select_only()
        .column(lead::Column::Source)
        .column_as(Expr::col(Asterisk).count(), "n")
        .group_by(lead::Column::Source)
        .into_tuple()
        .all(conn)
        .await?;
    for (source, n) in leads {
        entry(&mut sources, &source);
        if let Some(stats) = sources.get_mut(&source) {
            stats.leads = n;
        }
    }
    // A merged lead is its survivor's: counted apart (few rows, by their
    // index) so the count above stays an index-only scan.
    let merged: Vec<(String, i64)> = lead::Entity::find()
        .select_only()
        .column(lead::Column::Source)
        .column_as(Expr::col(Asterisk).count(), "n")
        .filter(lead::Column::MergedIntoId.is_not_null())
        .group_by(lead::Column::Source)
        .into_tuple()
        .all(conn)
        .await?;
    for (source, n) in merged {
        if let Some(stats) = sources.get_mut(&source) {
            stats.leads -= n;
        }
    }

    // Configured sources show even before anything arrived; a removed
    // one only with what it left.
    let configured: Vec<(String, String)> = source::Entity::find()
        .select_only()
        .column(source::Column::Name)
        .column(source::Column::State)
        .into_tuple()
        .all(conn)
        .await?;
    for (name, state) in configured {
        let Ok(state) = state.parse::<SourceState>() else {
            continue;
        };
        if state != SourceState::Removed {
            entry(&mut sources, &name);
        }
        if let Some(stats) = sources.get_mut(&name) {
            stats.state = Some(state.as_str());
        }
    }

    let processing = crate::lead::backlog::counts(conn).await?;
    Ok(Stats {
        generated_at: now,
        sources: sources.into_values().collect(),
        outbox: outbox(conn, now).await?,
        subscriptions: if with_windows {
            subscriptions(conn, now - Duration::days(1)).await?
        } else {
            Vec::new()
        },
        leads_processing_backlog: processing.backlog,
        lead_processing: LeadProcessingStats {
            backlog: processing.backlog,
            failed: processing.failed,
            dead: processing.dead,
            oldest_unprocessed_age_seconds: age(now, processing.oldest),
        },
        leads_response_overdue: crate::lead::speed_to_lead::clock::overdue_count(conn, now).await?,
    })
}

/// Deliveries of a disabled subscription, waiting until it is enabled.
pub const HELD: &str = "held";

async fn outbox<C: ConnectionTrait>(conn: &C, now: DateTime<Utc>) -> Result<OutboxStats, DbErr> {
    use crate::outbound::delivery::{DEAD, DELIVERED, DELIVERING, FAILED, PENDING};
    let events_pending = outbox_event::Entity::find()
        .select_only()
        .column_as(Expr::col(outbox_event::Column::Id).count(), "n")
        .filter(outbox_event::Column::State.eq(crate::outbound::outbox::PENDING))
        .into_tuple::<i64>()
        .one(conn)
        .await?
        .unwrap_or(0);
    let by_state: Vec<(String, i64)> = outbox_delivery::Entity::find()
        .select_only()
        .column(outbox_delivery::Column::State)
        .column_as(Expr::col(outbox_delivery::Column::Id).count(), "n")
        .filter(outbox_delivery::Column::State.ne(DELIVERED))
        .group_by(outbox_delivery::Column::State)
        .into_tuple()
        .all(conn)
        .await?;
    // A disabled subscription's waiting deliveries are held, not behind:
    // counted apart, so no alert about a slow or failing receiver fires
    // for one nobody sends to.
    let not_active = || {
        outbox_delivery::Column::SubscriptionId.in_subquery(
            Query::select()
                .column(subscription::Column::Id)
                .from(subscription::Entity)
                .and_where(subscription::Column::State.ne(subscriptions::ACTIVE))
                .to_owned(),
        )
    };
    let held_by_state: Vec<(String, i64)> = outbox_delivery::Entity::find()
        .select_only()
        .column(outbox_delivery::Column::State)
        .column_as(Expr::col(outbox_delivery::Column::Id).count(), "n")
        .filter(outbox_delivery::Column::State.is_in([PENDING, FAILED, DELIVERING]))
        .filter(not_active())
        .group_by(outbox_delivery::Column::State)
        .into_tuple()
        .all(conn)
        .await?;
    let count = |rows: &[(String, i64)], state: &str| {
        rows.iter().find(|(s, _)| s == state).map_or(0, |(_, n)| *n)
    };
    let mut deliveries: BTreeMap<&'static str, i64> = [PENDING, DELIVERING, FAILED, DEAD]
        .into_iter()
        .map(|state| {
            (
                state,
                count(&by_state, state) - count(&held_by_state, state),
            )
        })
        .collect();
    deliveries.insert(HELD, held_by_state.iter().map(|(_, n)| n).sum());
    let oldest: Option<Option<DateTime<Utc>>> = outbox_delivery::Entity::find()
        .select_only()
        .column_as(
            Expr::col(outbox_delivery::Column::CreatedAt).min(),
            "oldest",
        )
        .filter(outbox_delivery::Column::State.is_in([PENDING, FAILED, DELIVERING]))
        .filter(not_active().not())
        .into_tuple()
        .one(conn)
        .await?;
    Ok(OutboxStats {
        events_pending,
        deliveries,
        oldest_undelivered_age_seconds: age(now, oldest.flatten()),
    })
}

async fn subscriptions<C: ConnectionTrait>(
    conn: &C,
    since: DateTime<Utc>,
) -> Result<Vec<SubscriptionStats>, DbErr> {
    use crate::outbound::delivery::{DEAD, DELIVERED};
    use outbox_delivery::Column as D;
    #[derive(sea_orm::FromQueryResult)]
    struct Row {
        subscription_id: i64,
        state: String,
        n: i64,
        attempts: Option<i64>,
        took_ms: Option<i64>,
        timed: i64,
    }
    // Sums of integers only: AVG's result type differs between the backends.
    let rows: Vec<Row> = outbox_delivery::Entity::find()
        .select_only()
        .column(D::SubscriptionId)
        .column(D::State)
        .column_as(Expr::col(D::Id).count(), "n")
        .column_as(Expr::col(D::Attempts).sum(), "attempts")
        .column_as(Expr::col(D::LastDurationMs).sum(), "took_ms")
        .column_as(Expr::col(D::LastDurationMs).count(), "timed")
        .filter(D::UpdatedAt.gte(since))
        .filter(D::Attempts.gt(0))
        .group_by(D::SubscriptionId)
        .group_by(D::State)
        .into_model()
        .all(conn)
        .await?;
    let mut by_id: BTreeMap<i64, (SubscriptionStats, i64, i64)> = BTreeMap::new();
    for Row {
        subscription_id: id,
        state,
        n,
        attempts,
        took_ms,
        timed,
    } in rows
    {
        let (stats, total_ms, total_timed) = by_id.entry(id).or_insert_with(|| {
            (
                SubscriptionStats {
                    subscription_id: id,
                    ..Default::default()
                },
                0,
                0,
            )
        });
        match state.as_str() {
            DELIVERED => stats.delivered += n,
            DEAD => stats.dead += n,
            _ => {}
        }
        stats.attempts += attempts.unwrap_or(0);
        *total_ms += took_ms.unwrap_or(0);
        *total_timed += timed;
    }
    Ok(by_id
        .into_values()
        .map(|(mut stats, total_ms, timed)| {
            stats.success_rate =
                (stats.attempts > 0).then(|| stats.delivered as f64 / stats.attempts as f64);
            stats.avg_latency_ms = (timed > 0).then(|| total_ms as f64 / timed as f64);
            stats
        })
        .collect())
}
