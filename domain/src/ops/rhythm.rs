//! How often each source usually delivers, and how long it has been quiet:
//! a webhook channel that broke shows as a silence longer than the source's
//! usual gap. The gap is the source's `expected_interval` when configured,
//! else learned from its last deliveries.
//!
//! Cheap enough for every metrics refresh: one query over the small `source`
//! table, then per source its newest [`RECENT`] inbox events through the
//! `(source, id)` index (a backward index scan stopped by the `LIMIT`).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use crate::entities::{inbox_event, source};
use crate::inbound::source::SourceState;

/// Deliveries a gap is learned from: the newest events of a source.
pub const RECENT: u64 = 21;
/// Fewer deliveries than this within [`LEARNING_DAYS`] teach no rhythm: a
/// source that delivers once a week is not watched (unless configured).
pub const MIN_DELIVERIES: usize = 6;
/// Only deliveries this recent teach the rhythm; a source abandoned for
/// longer stops being watched.
pub const LEARNING_DAYS: i64 = 28;

/// One source's rhythm.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rhythm {
    /// When its newest inbox event was first received.
    pub last_received_at: Option<DateTime<Utc>>,
    /// Its usual gap between deliveries, in seconds: configured, or the
    /// median of its recent gaps; `None` when neither.
    pub usual_gap_seconds: Option<f64>,
}

/// The rhythm of every configured source, by name (not a removed one's: it
/// is quiet for good, and no alert should say so).
pub async fn of_sources<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
) -> Result<BTreeMap<String, Rhythm>, DbErr> {
    let sources: Vec<(String, Option<i64>)> = source::Entity::find()
        .select_only()
        .column(source::Column::Name)
        .column(source::Column::ExpectedIntervalSecs)
        .filter(source::Column::State.ne(SourceState::Removed.as_str()))
        .into_tuple()
        .all(conn)
        .await?;
    let mut rhythms = BTreeMap::new();
    for (name, configured) in sources {
        // `source BETWEEN name AND name`, ordered by (source, id): only the
        // `(source, id)` index yields that order, so the scan starts at the
        // source's newest event. With `source = name` and `ORDER BY id`,
        // PostgreSQL may walk the primary key backwards instead, through
        // every newer event of the other sources: 250 ms on 3.3M events for
        // a source silent since its 300k events, 0.1 ms this way.
        let received: Vec<DateTime<Utc>> = inbox_event::Entity::find()
            .select_only()
            .column(inbox_event::Column::ReceivedAt)
            .filter(inbox_event::Column::Source.gte(name.as_str()))
            .filter(inbox_event::Column::Source.lte(name.as_str()))
            .order_by_desc(inbox_event::Column::Source)
            .order_by_desc(inbox_event::Column::Id)
            .limit(RECENT)
            .into_tuple()
            .all(conn)
            .await?;
        let learned = usual_gap(received.clone(), now - Duration::days(LEARNING_DAYS));
        rhythms.insert(
            name,
            Rhythm {
                last_received_at: received.iter().max().copied(),
                usual_gap_seconds: configured.map(|s| s as f64).or(learned),
            },
        );
    }
    Ok(rhythms)
}

/// The median gap between the deliveries received since `since`, in
/// seconds; `None` with fewer than [`MIN_DELIVERIES`].
pub fn usual_gap(mut received: Vec<DateTime<Utc>>, since: DateTime<Utc>) -> Option<f64> {
    received.retain(|t| *t >= since);
    received.sort();
    // The events of one batched delivery (`events_pointer`) share the
    // instant it was received: one delivery, not gaps of zero.
    received.dedup();
    if received.len() < MIN_DELIVERIES {
        return None;
    }
    let mut gaps: Vec<i64> = received
        .windows(2)
        .map(|w| (w[1] - w[0]).num_milliseconds())
        .collect();
    gaps.sort_unstable();
    let mid = gaps.len() / 2;
    let median = if gaps.len().is_multiple_of(2) {
        (gaps.get(mid - 1)? + gaps.get(mid)?) as f64 / 2.0
    } else {
        *gaps.get(mid)? as f64
    };
    Some(median / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + Duration::minutes(minutes)
    }

    #[test]
    fn the_usual_gap_is_the_median_and_ignores_a_long_outage() {
        // Every 10 minutes, one 5-hour silence among them.
        let times = [0, 10, 20, 30, 330, 340, 350].map(at).to_vec();
        assert_eq!(usual_gap(times, at(0)), Some(600.0));
    }

    #[test]
    fn few_or_old_deliveries_teach_nothing() {
        let times = [0, 10, 20, 30, 40].map(at).to_vec();
        assert_eq!(usual_gap(times.clone(), at(0)), None);
        let mut more = times;
        more.push(at(50));
        assert_eq!(usual_gap(more.clone(), at(0)), Some(600.0));
        assert_eq!(usual_gap(more, at(5)), None, "the first is too old");
    }

    #[test]
    fn the_events_of_one_batched_delivery_are_one_delivery() {
        // Six deliveries 10 minutes apart, each carrying three events.
        let times: Vec<_> = [0, 10, 20, 30, 40, 50]
            .into_iter()
            .flat_map(|m| [at(m); 3])
            .collect();
        assert_eq!(usual_gap(times, at(0)), Some(600.0));
        let one_batch = vec![at(0); 21];
        assert_eq!(usual_gap(one_batch, at(0)), None);
    }
}
