//! The pipeline over time: inbox events received and processed, and the
//! duplicate rate, per bucket over the last hour or day. Counted in SQL from
//! the inbox's own timestamps, so every node draws the same chart.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IdenStatic, QueryFilter, QuerySelect,
};
use serde::{Deserialize, Serialize};

use super::stats::{Window, with_delivery_counts};
use crate::clock;
use crate::entities::inbox_event;
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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = StatsSeries)]
pub struct Series {
    pub window: SeriesWindow,
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
    window: SeriesWindow,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<(i64, i64, i64)>, DbErr> {
    let bucket = Dialect::of(conn).epoch_bucket(column.as_str(), window.bucket_seconds());
    with_delivery_counts(
        inbox_event::Entity::find()
            .select_only()
            .expr_as(bucket, "bucket"),
    )
    .filter(column.gte(from))
    .filter(column.lt(to))
    .group_by(Expr::cust("\"bucket\""))
    .into_tuple()
    .all(conn)
    .await
}

pub async fn series<C: ConnectionTrait>(
    conn: &C,
    window: SeriesWindow,
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
        })
        .collect();
    let slot = |n: i64| usize::try_from(n - first).ok();
    let received = per_bucket(conn, inbox_event::Column::ReceivedAt, window, range);
    for (n, events, deliveries) in received.await? {
        if let Some(b) = slot(n).and_then(|i| buckets.get_mut(i)) {
            let window = Window::new(events, deliveries);
            b.received = window.events;
            b.deliveries = window.deliveries;
            b.duplicate_rate = window.duplicate_rate;
        }
    }
    let processed = per_bucket(conn, inbox_event::Column::ProcessedAt, window, range);
    for (n, events, _) in processed.await? {
        if let Some(b) = slot(n).and_then(|i| buckets.get_mut(i)) {
            b.processed = events;
        }
    }
    Ok(Series {
        window,
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
