//! Cron ticks of a source's reconcile schedule. Every worker process looks at
//! the same ticks; a tick's key makes the run it starts unique, so the
//! process that sees it second does nothing: a schedule every process
//! follows must still start one run per tick, not one per process.

use std::str::FromStr;

use chrono::{DateTime, Duration, Utc};

/// Parses a cron expression with a seconds field first (`sec min hour day
/// month weekday [year]`): `0 */5 * * * *` is every five minutes.
pub fn parse(expr: &str) -> Result<cron::Schedule, String> {
    let fields = expr.split_whitespace().count();
    if !(6..=7).contains(&fields) {
        return Err(format!(
            "must be a cron expression with a seconds field first (6 or 7 fields, e.g. \"0 */5 * * * *\"), not {fields} fields"
        ));
    }
    cron::Schedule::from_str(expr).map_err(|e| format!("is not a cron expression: {e}"))
}

/// The latest tick in `(after, now]`, if any: after a pause, missed ticks
/// collapse into one run. Looks back at most a day.
pub fn due_tick(
    schedule: &cron::Schedule,
    after: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let after = after.max(now - Duration::days(1));
    schedule
        .after(&after)
        .take_while(|tick| *tick <= now)
        .take(100_000)
        .last()
}

/// The claim a tick's run carries, unique across processes.
pub fn tick_key(source: &str, tick: DateTime<Utc>) -> String {
    format!("schedule:{source}:{}", tick.timestamp())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn five_field_expressions_are_refused() {
        assert!(parse("*/5 * * * *").is_err());
        assert!(parse("0 */5 * * * *").is_ok());
        assert!(parse("0 0 3 * * * 2030").is_ok());
        assert!(parse("nonsense x y z a b").is_err());
    }

    #[test]
    fn due_tick_is_the_latest_in_the_window() {
        let every_5m = parse("0 */5 * * * *").unwrap();
        let t = |h, m, s| Utc.with_ymd_and_hms(2026, 11, 30, h, m, s).unwrap();
        assert_eq!(due_tick(&every_5m, t(10, 0, 0), t(10, 4, 59)), None);
        assert_eq!(
            due_tick(&every_5m, t(10, 0, 0), t(10, 5, 0)),
            Some(t(10, 5, 0))
        );
        // A long pause: one run for the latest tick.
        assert_eq!(
            due_tick(&every_5m, t(10, 0, 0), t(11, 2, 0)),
            Some(t(11, 0, 0))
        );
        assert_eq!(
            tick_key("partner", t(10, 5, 0)),
            format!("schedule:partner:{}", t(10, 5, 0).timestamp())
        );
    }
}
