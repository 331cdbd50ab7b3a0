//! The pipeline over time: inbox events received and processed, the
//! duplicate rate, and what reconcile found the webhooks missed, per bucket over the last hour or day. Counted in SQL from
//! the inbox's own timestamps, so every node draws the same chart.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IdenStatic, QueryFilter, QuerySelect,
};
use serde::{Deserialize, Serialize};

use super::stats::{Window, share, with_delivery_counts, with_reconcile_counts};
use crate::clock;
use crate::entities::{inbox_event, reconcile_run};
use crate::store::Dialect;

/// How far back a series reaches, and so how wide its buckets are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum SeriesWindow {
    /// The last hour in 60 one-minute buckets.
    #[serde(rename = "1h")]
    Hour,
    /// The last day in 96 fifteen-minute buckets.
    #[serde(rename = "24h")]
    Day,
}

impl SeriesWindow {
    pub fn bucket_seconds(self) -> i64 {
        match self {
            Self::Hour => 60,
            Self::Day => 15 * 60,
        }
    }

    pub fn buckets(self) -> i64 {
        match self {
            Self::Hour => 60,
            Self::Day => 96,
        }
    }
}

impl FromStr for SeriesWindow {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "1h" => Ok(Self::Hour),
            "24h" => Ok(Self::Day),
            other => Err(format!("unknown window '{other}' (1h, 24h)")),
        }
    }
}

/// One bucket: `[start, start + bucket_seconds)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = SeriesBucket)]
pub struct Bucket {
    pub start: DateTime<Utc>,
    /// Events first received in the bucket.
    pub received: i64,
    /// Events whose processing finished in the bucket.
    pub processed: i64,
    /// Deliveries of the events received in the bucket (1 + repeats each).
    pub deliveries: i64,
    /// (deliveries − received) / deliveries; 0 when nothing arrived.
    pub duplicate_rate: f64,
    /// Records reconcile pulled in runs that last wrote in the bucket.
    pub reconciled: i64,
    /// Of those, the records the webhooks had missed (reconcile created or
    /// updated them).
    pub missed: i64,
    /// missed / reconciled; 0 when reconcile found nothing.
    pub missed_rate: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = StatsSeries)]
pub struct Series {
    pub window: SeriesWindow,
    /// The one source counted, when asked for; `null`: every source.
    pub source: Option<String>,
    pub bucket_seconds: i64,
    /// Start of the first bucket.
    pub from: DateTime<Utc>,
    /// End of the last bucket (the current one, still filling).
    pub to: DateTime<Utc>,
    /// Oldest first, every bucket present (zeros where nothing happened).
    pub buckets: Vec<Bucket>,
}

/// Counts per bucket number of `column` in `[from, to)`: (bucket, events, deliveries).
async fn per_bucket<C: ConnectionTrait>(
    conn: &C,
    column: inbox_event::Column,
    (window, source): (SeriesWindow, Option<&str>),
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<(i64, i64, i64)>, DbErr> {
    let bucket = Dialect::of(conn).epoch_bucket(column.as_str(), window.bucket_seconds());
    let mut query = with_delivery_counts(
        inbox_event::Entity::find()
            .select_only()
            .expr_as(bucket, "bucket"),
    )
    .filter(column.gte(from))
    .filter(column.lt(to));
    if let Some(source) = source {
        query = query.filter(inbox_event::Column::Source.eq(source));
    }
    query
        .group_by(Expr::cust("\"bucket\""))
        .into_tuple()
        .all(conn)
        .await
}

/// What reconcile pulled and found missing per bucket number of the runs'
/// last write in `[from, to)`: (bucket, reconciled, missed).
async fn reconciled_per_bucket<C: ConnectionTrait>(
    conn: &C,
    (window, source): (SeriesWindow, Option<&str>),
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<(i64, i64, i64)>, DbErr> {
    use reconcile_run::Column as R;
    let bucket = Dialect::of(conn).epoch_bucket(R::HeartbeatAt.as_str(), window.bucket_seconds());
    let mut query = with_reconcile_counts(
        reconcile_run::Entity::find()
            .select_only()
            .expr_as(bucket, "bucket"),
    )
    .filter(R::HeartbeatAt.gte(from))
    .filter(R::HeartbeatAt.lt(to));
    if let Some(source) = source {
        query = query.filter(R::Source.eq(source));
    }
    query
        .group_by(Expr::cust("\"bucket\""))
        .into_tuple()
        .all(conn)
        .await
}

/// The series of every source, or of `source` alone.
pub async fn series<C: ConnectionTrait>(
    conn: &C,
    window: SeriesWindow,
    source: Option<&str>,
) -> Result<Series, crate::Error> {
    let width = window.bucket_seconds();
    // Buckets are aligned to the epoch, so two requests a few seconds apart
    // agree on every bucket but the current one.
    let current = clock::now().timestamp().div_euclid(width);
    let first = current - window.buckets() + 1;
    let at = |bucket: i64| DateTime::<Utc>::from_timestamp(bucket * width, 0).unwrap_or_default();
    let range = (at(first), at(current + 1));

    let mut buckets: Vec<Bucket> = (first..=current)
        .map(|n| Bucket {
            start: at(n),
            received: 0,
            processed: 0,
            deliveries: 0,
            duplicate_rate: 0.0,
            reconciled: 0,
            missed: 0,
            missed_rate: 0.0,
        })
        .collect();
    let slot = |n: i64| usize::try_from(n - first).ok();
    let of = (window, source);
    let received = per_bucket(conn, inbox_event::Column::ReceivedAt, of, range);
    for (n, events, deliveries) in received.await? {
        if let Some(b) = slot(n).and_then(|i| buckets.get_mut(i)) {
            let window = Window::new(events, deliveries);
            b.received = window.events;
            b.deliveries = window.deliveries;
            b.duplicate_rate = window.duplicate_rate;
        }
    }
    let processed = per_bucket(conn, inbox_event::Column::ProcessedAt, of, range);
    for (n, events, _) in processed.await? {
        if let Some(b) = slot(n).and_then(|i| buckets.get_mut(i)) {
            b.processed = events;
        }
    }
    for (n, reconciled, missed) in reconciled_per_bucket(conn, of, range).await? {
        if let Some(b) = slot(n).and_then(|i| buckets.get_mut(i)) {
            b.reconciled = reconciled;
            b.missed = missed;
            b.missed_rate = share(missed, reconciled);
        }
    }
    Ok(Series {
        window,
        source: source.map(str::to_owned),
        bucket_seconds: width,
        from: range.0,
        to: range.1,
        buckets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_and_cover_their_span() {
        assert_eq!("1h".parse(), Ok(SeriesWindow::Hour));
        assert_eq!("24h".parse(), Ok(SeriesWindow::Day));
        assert!("7d".parse::<SeriesWindow>().is_err());
        for w in [SeriesWindow::Hour, SeriesWindow::Day] {
            let span = w.bucket_seconds() * w.buckets();
            assert!(span == 3600 || span == 86_400, "{w:?}");
        }
    }
}
