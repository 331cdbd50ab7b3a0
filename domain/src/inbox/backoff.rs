//! When to try a failed event again: capped exponential backoff with full
//! jitter (a uniformly random delay between 0 and the capped exponential), so
//! events that failed together during an outage do not retry together.

use std::time::Duration;

use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Ceiling of the first retry's delay; doubles each attempt.
    pub base: Duration,
    /// The ceiling never exceeds this.
    pub cap: Duration,
    /// Processing attempts before an event is given up as `dead`.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    /// 1 s doubling to 5 min, 8 attempts: about 10 minutes of retrying.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(300),
            max_attempts: 8,
        }
    }
}

impl RetryPolicy {
    /// `min(cap, base * 2^(attempt-1))` for the retry after attempt `attempt` (1-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(31);
        self.base
            .checked_mul(1u32 << exponent)
            .unwrap_or(self.cap)
            .min(self.cap)
    }

    /// A random delay in `[0, ceiling(attempt)]` ("full jitter").
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = u64::try_from(self.ceiling(attempt).as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rng.random_range(0..=ceiling))
    }

    /// Whether attempt number `attempt` (1-based) was the last one allowed.
    pub fn exhausted(&self, attempt: u32) -> bool {
        attempt >= self.max_attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_from_base_and_stops_at_cap() {
        let p = RetryPolicy::default();
        let secs: Vec<u64> = (1..=12).map(|a| p.ceiling(a).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(p.ceiling(0), Duration::from_secs(1));
        assert_eq!(p.ceiling(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn delay_is_full_jitter_within_the_ceiling() {
        let p = RetryPolicy {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
            max_attempts: 3,
        };
        let mut rng = rand::rng();
        let delays: Vec<Duration> = (0..500).map(|_| p.delay(4, &mut rng)).collect();
        assert!(delays.iter().all(|d| *d <= Duration::from_millis(800)));
        // Spread over the whole range, not clustered at the ceiling.
        assert!(delays.iter().any(|d| *d < Duration::from_millis(200)));
        assert!(delays.iter().any(|d| *d > Duration::from_millis(600)));
    }

    #[test]
    fn exhausted_after_max_attempts() {
        let p = RetryPolicy::default();
        assert!(!p.exhausted(7));
        assert!(p.exhausted(8));
        assert!(p.exhausted(9));
    }
}
