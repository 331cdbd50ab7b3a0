//! The outbox publisher as the tests drive it: fast retries, loopback
//! receivers allowed, the test server's keys.

use std::time::Duration;

use domain::net_guard::OutboundPolicy;
use domain::retry::RetryPolicy;
use workers::publisher::{Publisher, PublisherSettings};

use crate::TestApp;

/// Publisher settings for tests: retries after 10–40 ms, at most three
/// attempts, receivers on 127.0.0.1 allowed, `Keyring::for_tests()`.
pub fn settings() -> PublisherSettings {
    PublisherSettings {
        request_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(40),
            max_attempts: 3,
        }
        .into(),
        outbound: OutboundPolicy::from_list("127.0.0.1"),
        keyring: domain::sealed::Keyring::for_tests(),
        ..PublisherSettings::default()
    }
}

/// [`settings`] giving up after `max_attempts`, allowed to reach the hosts
/// `outbound` lists (`""`: none).
pub fn settings_with(max_attempts: u32, outbound: &str) -> PublisherSettings {
    let settings = settings();
    PublisherSettings {
        retry: RetryPolicy {
            max_attempts,
            ..*settings.retry
        }
        .into(),
        outbound: OutboundPolicy::from_list(outbound),
        ..settings
    }
}

impl TestApp {
    /// A publisher on this app's database.
    pub fn publisher(&self, settings: PublisherSettings) -> Publisher {
        Publisher::new(self.db.clone(), settings).unwrap()
    }
}

/// Runs publisher passes until `done` holds; panics naming `what` after
/// `limit`.
pub async fn publish_until(
    publisher: &Publisher,
    what: &str,
    limit: Duration,
    mut done: impl AsyncFnMut() -> bool,
) {
    crate::eventually(what, limit, async || {
        if done().await {
            return true;
        }
        publisher.run_once().await.unwrap();
        false
    })
    .await;
}
