//! The outbox publisher: fans pending outbox events out to subscriptions and
//! delivers them as signed Standard Webhooks requests. Delivery state lives in
//! the database (`domain::outbound::delivery`), so any worker may pick up where another
//! stopped, and nothing is marked delivered before the receiver's 2xx.

use std::time::Duration;

use domain::inbound::signature::standard_webhooks;
use domain::outbound::delivery::{self, AttemptResult, Claimed, Settlement};
use domain::outbound::net_guard::OutboundPolicy;
use domain::retry::RetryPolicy;
use domain::sealed::Keyring;
use futures::StreamExt;
use sea_orm::DatabaseConnection;
use serde_json::json;

use crate::outbound::{Dns, error_detail, refusal, without_url};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherSettings {
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    pub outbound: OutboundPolicy,
    /// Deliveries claimed per pass.
    pub batch: u64,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Resolves receivers' host names (the system resolver but in tests).
    pub dns: Dns,
    /// Opens the subscriptions' sealed signing secrets.
    pub keyring: Keyring,
}

impl Default for PublisherSettings {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(15),
            retry: RetryPolicy::default(),
            outbound: OutboundPolicy::default(),
            batch: 64,
            concurrency: 8,
            dns: Dns::default(),
            keyring: Keyring::none(),
        }
    }
}

#[derive(Clone)]
pub struct Publisher {
    db: DatabaseConnection,
    client: reqwest::Client,
    settings: PublisherSettings,
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    pub fanned_out: usize,
    pub attempted: usize,
    pub delivered: usize,
}

impl Publisher {
    pub fn new(
        db: DatabaseConnection,
        settings: PublisherSettings,
    ) -> Result<Self, reqwest::Error> {
        // Pinned DNS, no redirects, no proxy: see `outbound::client`.
        let client =
            crate::outbound::client(settings.request_timeout, &settings.outbound, &settings.dns)?;
        Ok(Self {
            db,
            client,
            settings,
        })
    }

    /// Fans out, then delivers what is due, once.
    pub async fn run_once(&self) -> Result<Pass, sea_orm::DbErr> {
        let fanned_out = delivery::fan_out(&self.db, 500).await?;
        // A lease well past the request timeout: a claim outlives its attempt.
        let lease = self.settings.request_timeout * 2 + Duration::from_secs(5);
        let claimed = delivery::claim_due(&self.db, self.settings.batch, lease).await?;
        let attempted = claimed.len();
        let settlements: Vec<Option<Settlement>> = futures::stream::iter(claimed)
            .map(|claim| async move { self.deliver(&claim).await })
            .buffer_unordered(self.settings.concurrency.max(1))
            .collect()
            .await;
        let delivered = settlements
            .iter()
            .filter(|s| **s == Some(Settlement::Delivered))
            .count();
        Ok(Pass {
            fanned_out,
            attempted,
            delivered,
        })
    }

    /// Runs passes forever: back to back while there is work, else every `idle`.
    ///
    /// Stops between passes, never inside one: a delivery whose request went
    /// out is always recorded, so a graceful shutdown sends nothing twice.
    pub async fn run(self, idle: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
        while !*stop.borrow_and_update() {
            match self.run_once().await {
                Ok(pass) if pass.attempted > 0 || pass.fanned_out > 0 => continue,
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "outbox pass failed; retrying"),
            }
            tokio::select! {
                () = tokio::time::sleep(idle) => {}
                changed = stop.changed() => if changed.is_err() { return },
            }
        }
    }

    #[tracing::instrument(name = "outbox.deliver", skip_all, fields(
        delivery_id = claim.delivery.id,
        subscription_id = claim.subscription.id,
        event_type = %claim.event.event_type,
        correlation_id = claim.event.correlation_id.as_deref().unwrap_or(""),
    ))]
    async fn deliver(&self, claim: &Claimed) -> Option<Settlement> {
        let started = std::time::Instant::now();
        let result = self.attempt(claim).await;
        let took = started.elapsed();
        let subscription = claim.subscription.id.to_string();
        metrics::histogram!("leadpipe_subscription_attempt_duration_seconds", "subscription_id" => subscription.clone())
            .record(took.as_secs_f64());
        let ok = matches!(&result, AttemptResult::Answered { status, .. } if (200..300).contains(status));
        metrics::counter!("leadpipe_subscription_attempts_total", "subscription_id" => subscription, "outcome" => if ok { "success" } else { "failure" })
            .increment(1);
        match delivery::record_attempt(&self.db, claim, &result, took, &self.settings.retry).await {
            Ok(settlement) => {
                let label = match &settlement {
                    Settlement::Delivered => "delivered",
                    Settlement::RetryIn(_) => "retry",
                    Settlement::Dead => "dead",
                    Settlement::Gone => "gone",
                };
                metrics::counter!("leadpipe_outbox_deliveries_total", "result" => label)
                    .increment(1);
                match &settlement {
                    Settlement::Delivered => tracing::debug!("delivered"),
                    Settlement::RetryIn(delay) => {
                        tracing::info!(retry_in_ms = delay.as_millis() as u64, result = ?result_kind(&result), "delivery failed; will retry")
                    }
                    Settlement::Dead => {
                        tracing::warn!(result = ?result_kind(&result), "delivery dead")
                    }
                    Settlement::Gone => {
                        tracing::warn!("receiver answered 410; subscription disabled")
                    }
                }
                Some(settlement)
            }
            Err(err) => {
                // The claim lapses and another pass retries the delivery.
                tracing::warn!(error = %err, "could not record a delivery attempt");
                None
            }
        }
    }

    async fn attempt(&self, claim: &Claimed) -> AttemptResult {
        // Checked again at each attempt: the policy may have changed, and a
        // literal address does not pass through the resolver.
        let url = match self.settings.outbound.check_url(&claim.subscription.url) {
            Ok(url) => url,
            Err(reason) => return AttemptResult::Refused(reason),
        };
        let body = json!({
            "type": claim.event.event_type,
            "timestamp": claim.event.created_at,
            "data": claim.event.payload,
        })
        .to_string();
        let timestamp = chrono::Utc::now().timestamp();
        let msg_id = &claim.event.event_id;
        // Two secrets while a rotation's overlap lasts: one signature each.
        let secrets = match domain::outbound::subscription::signing_secrets(
            &self.settings.keyring,
            &claim.subscription,
            domain::clock::now(),
        ) {
            Ok(secrets) => secrets,
            Err(err) => {
                return AttemptResult::Refused(format!("cannot open the secret: {err}"));
            }
        };
        let signature =
            match standard_webhooks::sign_all(&secrets, msg_id, timestamp, body.as_bytes()) {
                Ok(signature) => signature,
                Err(err) => return AttemptResult::Refused(format!("cannot sign: {err}")),
            };
        let response = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header(standard_webhooks::ID_HEADER, msg_id)
            .header(standard_webhooks::TIMESTAMP_HEADER, timestamp.to_string())
            .header(standard_webhooks::SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await;
        match response {
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                let detail = if response.status().is_success() {
                    String::new()
                } else {
                    error_detail(response).await
                };
                AttemptResult::Answered {
                    status,
                    retry_after,
                    detail,
                }
            }
            Err(err) => match refusal(&err) {
                Some(reason) => AttemptResult::Refused(reason),
                None if err.is_timeout() => AttemptResult::TimedOut,
                None => AttemptResult::Failed(without_url(&err)),
            },
        }
    }
}

fn result_kind(result: &AttemptResult) -> String {
    match result {
        AttemptResult::Answered { status, .. } => format!("HTTP {status}"),
        AttemptResult::TimedOut => "timeout".into(),
        AttemptResult::Failed(_) => "connection failed".into(),
        AttemptResult::Refused(_) => "refused".into(),
    }
}

/// `Retry-After` as seconds or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .to_std()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        let later = (chrono::Utc::now() + chrono::Duration::seconds(90)).to_rfc2822();
        let parsed = parse_retry_after(&later).unwrap_or_default();
        assert!(parsed > Duration::from_secs(80) && parsed <= Duration::from_secs(90));
        assert_eq!(parse_retry_after("soon"), None);
    }
}
