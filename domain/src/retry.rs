//! Retry timing: capped exponential backoff with full jitter (AWS Architecture
//! Blog, "Exponential Backoff And Jitter"): the n-th retry waits a uniformly
//! random time in `[0, min(cap, base · 2ⁿ)]`, so a crowd of failures spreads out.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::Rng;
use sea_orm::DbErr;

use crate::error::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
    /// Attempts in all, the first included; after the last one: dead.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(300),
            max_attempts: 8,
        }
    }
}

impl RetryPolicy {
    /// The ceiling of the wait after `attempts` failed attempts (1 = the first failed).
    pub fn ceiling(&self, attempts: u32) -> Duration {
        let exponent = attempts.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << exponent).min(self.cap)
    }

    /// How long to wait after `attempts` failed attempts; never less than
    /// `at_least` (a receiver's `Retry-After`), capped by `cap` all the same.
    pub fn delay(&self, attempts: u32, at_least: Option<Duration>) -> Duration {
        let ceiling = self.ceiling(attempts);
        let jittered =
            Duration::from_millis(rand::rng().random_range(0..=ceiling.as_millis() as u64));
        jittered.max(at_least.unwrap_or_default()).min(self.cap)
    }

    pub fn exhausted(&self, attempts: u32) -> bool {
        attempts >= self.max_attempts
    }

    /// What follows failed attempt number `attempts`: `dead` for a permanent
    /// error or when the attempts are used up, else a retry after a jittered
    /// backoff.
    pub fn decide(&self, error: &ProcessError, attempts: u32, now: DateTime<Utc>) -> Decision {
        match error {
            ProcessError::Permanent(reason) => Decision::Dead(reason.clone()),
            ProcessError::Transient(reason) if self.exhausted(attempts) => {
                Decision::Dead(format!("gave up after {attempts} attempts: {reason}"))
            }
            ProcessError::Transient(_) => {
                let delay = self.delay(attempts, None);
                Decision::RetryAt(
                    now + chrono::Duration::from_std(delay).unwrap_or(chrono::TimeDelta::MAX),
                )
            }
        }
    }
}

/// What [`RetryPolicy::decide`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    RetryAt(DateTime<Utc>),
    /// With the reason to keep.
    Dead(String),
}

/// Why an attempt failed, and so what happens next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessError {
    /// The same event will fail the same way: `dead` at once.
    #[error("{0}")]
    Permanent(String),
    /// May succeed later (database trouble, a timeout): retried with backoff.
    #[error("{0}")]
    Transient(String),
}

impl From<DbErr> for ProcessError {
    /// Database errors are retried: the record already passed validation, so
    /// a failing write is trouble with the database, not with the event. A
    /// database error that never clears still ends in `dead` after the
    /// attempts run out.
    fn from(err: DbErr) -> Self {
        Self::Transient(format!("database error: {err}"))
    }
}

impl From<Error> for ProcessError {
    fn from(err: Error) -> Self {
        match err {
            Error::Invalid(fields) => Self::Permanent(format!(
                "invalid record: {}",
                fields
                    .iter()
                    .map(|f| format!("{} {}", f.field, f.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
            Error::Db(db) => db.into(),
            // Everything else is a judgement on the record, not on the moment.
            other => Self::Permanent(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_double_up_to_the_cap() {
        let p = RetryPolicy::default();
        let secs: Vec<u64> = (1..=11).map(|n| p.ceiling(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(p.ceiling(1_000).as_secs(), 300);
    }

    #[test]
    fn delays_stay_within_the_ceiling_and_honour_retry_after() {
        let p = RetryPolicy::default();
        for attempts in 1..12 {
            for _ in 0..50 {
                assert!(p.delay(attempts, None) <= p.ceiling(attempts));
            }
        }
        let at_least = Duration::from_secs(30);
        assert!(p.delay(1, Some(at_least)) >= at_least);
        // A receiver asking for a day still gets at most the cap.
        assert_eq!(p.delay(1, Some(Duration::from_secs(86_400))), p.cap);
    }

    #[test]
    fn jitter_spreads_delays() {
        let p = RetryPolicy::default();
        let distinct: std::collections::HashSet<_> = (0..50).map(|_| p.delay(8, None)).collect();
        assert!(distinct.len() > 10);
    }

    #[test]
    fn classification() {
        let invalid: ProcessError =
            Error::Invalid(vec![crate::FieldError::new("source_ref", "is required")]).into();
        assert_eq!(
            invalid,
            ProcessError::Permanent("invalid record: source_ref is required".into())
        );
        let db: ProcessError = Error::Db(DbErr::Custom("connection reset".into())).into();
        assert!(matches!(db, ProcessError::Transient(_)));
    }

    #[test]
    fn a_transient_error_retries_until_the_attempts_run_out() {
        let p = RetryPolicy {
            max_attempts: 2,
            ..Default::default()
        };
        let now = Utc::now();
        let busy = ProcessError::Transient("busy".into());
        assert!(matches!(p.decide(&busy, 1, now), Decision::RetryAt(at) if at >= now));
        assert_eq!(
            p.decide(&busy, 2, now),
            Decision::Dead("gave up after 2 attempts: busy".into())
        );
        let bad = ProcessError::Permanent("bad".into());
        assert_eq!(p.decide(&bad, 1, now), Decision::Dead("bad".into()));
    }

    #[test]
    fn attempts_are_capped() {
        let p = RetryPolicy {
            max_attempts: 3,
            ..Default::default()
        };
        assert!(!p.exhausted(2));
        assert!(p.exhausted(3));
    }
}
