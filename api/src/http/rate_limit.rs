//! Rate limits at the edge (GCRA, `governor`): failed authentications (a
//! bad bearer token or session cookie, a webhook whose signature does not
//! verify) and sign-in attempts per client address, and verified webhook deliveries per source. Over a limit the answer is `429 /problems/too-many-requests` with
//! `Retry-After`; each refusal is counted in
//! `leadpipe_rate_limited_total{limit}`.

use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use actix_web::HttpRequest;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::config::HttpSettings;
use crate::http::error::ApiError;

/// Both limits of one application.
pub struct Limits {
    auth_failures: Keyed<IpAddr>,
    webhooks: Keyed<String>,
}

impl Limits {
    pub fn new(settings: &HttpSettings) -> Self {
        let auth = NonZeroU32::new(settings.auth_fail_per_minute).map(Quota::per_minute);
        let webhooks = NonZeroU32::new(settings.webhook_rate).and_then(|rate| {
            let burst = NonZeroU32::new(settings.webhook_burst.max(rate.get()))?;
            Quota::with_period(Duration::from_secs(1) / rate.get()).map(|q| q.allow_burst(burst))
        });
        Self {
            auth_failures: Keyed::new(auth, "auth_failures", "failed authentications"),
            webhooks: Keyed::new(webhooks, "webhook", "webhook deliveries to this source"),
        }
    }

    /// Records one failed authentication (a token, or a webhook signature)
    /// from the request's client address:
    /// `Err(429)` once the address is over its limit.
    pub fn auth_failed(&self, client: IpAddr) -> Result<(), ApiError> {
        self.auth_failures.check(&client)
    }

    /// Counts one sign-in attempt (`POST /api/session`) from the client
    /// address against the same allowance, before the password is checked:
    /// a password, unlike a token, can be guessed, so a guesser over the
    /// limit must not learn whether its next guess was right. A right
    /// password spends the allowance too (a sign-in is rare).
    pub fn sign_in_attempt(&self, client: IpAddr) -> Result<(), ApiError> {
        self.auth_failures.check(&client)
    }

    /// Counts one verified delivery to `source`: only a sender holding the
    /// source's secret can spend its allowance.
    pub fn webhook(&self, source: &str) -> Result<(), ApiError> {
        // Bounded key length: a name longer than any valid one is one key.
        let key = if source.len() <= 64 { source } else { "" };
        self.webhooks.check(&key.to_owned())
    }
}

/// The address a limit applies to: the TCP peer (a forwarded-for header is
/// the client's say-so). An IPv6 client usually holds a whole /64, so its
/// /64 is one client.
pub fn client_address(req: &HttpRequest) -> IpAddr {
    match req.peer_addr().map(|a| a.ip()) {
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        Some(v4) => v4,
        None => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    }
}

/// A keyed limiter, or none when its rate is 0.
struct Keyed<K: Hash + Eq + Clone> {
    limiter: Option<DefaultKeyedRateLimiter<K>>,
    clock: DefaultClock,
    label: &'static str,
    what: &'static str,
    checks: AtomicU64,
}

/// Forget keys whose allowance is full again every this many checks, so a
/// stream of new keys (addresses, made-up source names) cannot grow the map.
const PRUNE_EVERY: u64 = 4096;

impl<K: Hash + Eq + Clone> Keyed<K> {
    fn new(quota: Option<Quota>, label: &'static str, what: &'static str) -> Self {
        Self {
            limiter: quota.map(DefaultKeyedRateLimiter::hashmap),
            clock: DefaultClock::default(),
            label,
            what,
            checks: AtomicU64::new(0),
        }
    }

    fn check(&self, key: &K) -> Result<(), ApiError> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        if self.checks.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            limiter.retain_recent();
        }
        limiter.check_key(key).map_err(|not_until| {
            metrics::counter!("leadpipe_rate_limited_total", "limit" => self.label).increment(1);
            let wait = not_until.wait_time_from(self.clock.now());
            ApiError::TooManyRequests {
                what: self.what,
                // Whole seconds, rounded up: never "retry after 0".
                retry_after: (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(auth: u32, rate: u32, burst: u32) -> HttpSettings {
        HttpSettings {
            auth_fail_per_minute: auth,
            webhook_rate: rate,
            webhook_burst: burst,
            ..HttpSettings::for_tests()
        }
    }

    #[test]
    fn failures_beyond_the_allowance_are_429_per_address() {
        let limits = Limits::new(&settings(3, 0, 0));
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        for _ in 0..3 {
            assert!(limits.auth_failed(a).is_ok());
        }
        match limits.auth_failed(a) {
            Err(ApiError::TooManyRequests { retry_after, .. }) => {
                assert!((1..=20).contains(&retry_after), "{retry_after}");
            }
            other => panic!("expected 429, got {other:?}"),
        }
        assert!(limits.auth_failed(b).is_ok());
        // Webhooks are off at rate 0.
        for _ in 0..10_000 {
            assert!(limits.webhook("x").is_ok());
        }
    }

    #[test]
    fn webhook_burst_is_per_source() {
        let limits = Limits::new(&settings(0, 1, 5));
        for _ in 0..5 {
            assert!(limits.webhook("a").is_ok());
        }
        assert!(limits.webhook("a").is_err());
        assert!(limits.webhook("b").is_ok());
    }
}
