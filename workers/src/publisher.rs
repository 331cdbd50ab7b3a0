//! The outbox publisher: fans pending outbox events out to subscriptions and
//! delivers them as signed Standard Webhooks requests. Delivery state lives in
//! the database (`domain::outbound::delivery`), so any worker may pick up where another
//! stopped, and nothing is marked delivered before the receiver's 2xx.
//!
//! Many requests are in flight at once (up to `concurrency`, and up to
//! `per_subscription` to any one subscription) over one keep-alive client.
//! Per-lead order comes from the claim itself: a delivery is claimed only
//! once every earlier one of its lead to its subscription is settled, so two
//! deliveries of one lead are never in flight together. Attempts are settled
//! in batches, one transaction for whatever finished meanwhile.

use domain::store::Store;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use domain::inbound::signature::standard_webhooks;
use domain::outbound::delivery::{self, AttemptResult, Claimed, Settlement};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use crate::outbound::{error_detail, refusal, without_url};
pub use crate::settings::PublisherSettings;

/// Outbox events fanned out per statement.
const FAN_OUT_BATCH: u64 = 500;
/// Attempts settled per transaction, at most.
const SETTLE_BATCH: usize = 256;
/// Deliveries claimed per statement, at most, whatever `batch` says: the
/// queue ahead of the requests holds two claims.
const MAX_CLAIM: usize = 1_000;

#[derive(Clone)]
pub struct Publisher {
    db: Store,
    client: reqwest::Client,
    settings: PublisherSettings,
    slots: Arc<Slots>,
}

/// One semaphore per subscription: its share of the requests in flight.
struct Slots {
    limit: usize,
    by_subscription: Mutex<HashMap<i64, Arc<Semaphore>>>,
}

impl Slots {
    fn of(&self, subscription_id: i64) -> Arc<Semaphore> {
        let mut map = self
            .by_subscription
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.entry(subscription_id)
            .or_insert_with(|| Arc::new(Semaphore::new(self.limit)))
            .clone()
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    pub fanned_out: usize,
    pub attempted: usize,
    pub delivered: usize,
}

/// What a request came to, and how long the receiver took.
type Attempted = (AttemptResult, Duration);

/// A finished attempt on its way to the settler.
type ToSettle = (Claimed, Attempted);

impl Publisher {
    pub fn new(db: Store, settings: PublisherSettings) -> Result<Self, reqwest::Error> {
        // Pinned DNS, no redirects, no proxy: see `outbound::client`. One
        // client per publisher, so connections to a receiver are kept alive
        // and reused by every request.
        let client =
            crate::outbound::client(settings.request_timeout, &settings.outbound, &settings.dns)?;
        let slots = Arc::new(Slots {
            limit: settings.per_subscription.max(1),
            by_subscription: Mutex::new(HashMap::new()),
        });
        Ok(Self {
            db,
            client,
            settings,
            slots,
        })
    }

    /// How long a claim holds a delivery: a claimed delivery may wait for
    /// its subscription's slot behind the rest of a full publisher before
    /// its own request, so well past that. A claim that waited in the queue
    /// longer than its lease allows is not sent (`lease_covers_a_request`):
    /// a slow receiver costs claims again, never a second request in flight.
    fn lease(&self) -> Duration {
        let waits = self
            .settings
            .concurrency
            .max(1)
            .div_ceil(self.settings.per_subscription.max(1));
        self.settings.request_timeout * (u32::try_from(waits).unwrap_or(u32::MAX / 4) + 1)
            + Duration::from_secs(5)
    }

    /// Fans out, then delivers what is due and settles it, once.
    pub async fn run_once(&self) -> Result<Pass, domain::Error> {
        let fanned_out = delivery::fan_out(&self.db, FAN_OUT_BATCH).await?;
        let claimed = delivery::claim_due(&self.db, self.settings.batch, self.lease()).await?;
        let attempted = claimed.len();
        let results: Vec<ToSettle> = futures::stream::iter(claimed)
            .map(|claim| async move {
                let result = self.attempt_in_slot(&claim).await;
                result.map(|result| (claim, result))
            })
            .buffer_unordered(self.settings.concurrency.max(1))
            .filter_map(std::future::ready)
            .collect()
            .await;
        let mut delivered = 0;
        for chunk in results.chunks(SETTLE_BATCH) {
            let settled = self
                .settle(chunk.iter().map(|(c, (r, t))| (c, r, *t)))
                .await;
            delivered += settled
                .iter()
                .filter(|s| **s == Some(Settlement::Delivered))
                .count();
        }
        Ok(Pass {
            fanned_out,
            attempted,
            delivered,
        })
    }

    /// Delivers until stopped. A claimer fills a bounded queue ahead of the
    /// requests (one statement for up to `batch` deliveries, the next claim
    /// prepared while requests are in flight), so claim round trips overlap
    /// the requests instead of gating them; up to `concurrency` requests are
    /// in flight while work is due. A request frees its slot when answered;
    /// its settlement is written behind it, in batches, and a lead's next
    /// event is claimable once that is committed. Polls every `idle` when
    /// nothing is due.
    ///
    /// On stop it claims nothing more, hands back what it claimed but did
    /// not send, and waits for the requests in flight: a delivery whose
    /// request went out is always recorded, so a graceful shutdown sends
    /// nothing twice.
    pub async fn run(self, idle: Duration, stop: watch::Receiver<bool>) {
        // At zero from the start: the alert on it sees the first disabling
        // as an increase, not as a series appearing.
        metrics::counter!("leadpipe_subscriptions_disabled_total", "reason" => "failing")
            .increment(0);
        let batch = self.claim_size();
        let (settle_tx, settle_rx) = mpsc::channel::<ToSettle>(SETTLE_BATCH);
        let settled = Arc::new(Notify::new());
        let settler = tokio::spawn(self.clone().settle_loop(settle_rx, settled.clone()));
        // Room for the claim being queued and the next one: memory stays
        // bounded at two claims' worth.
        let (ahead_tx, mut ahead) = mpsc::channel::<Claimed>(batch * 2);
        let claimer = tokio::spawn(
            self.clone()
                .claim_loop(ahead_tx, idle, settled, stop.clone()),
        );
        let slots = Arc::new(Semaphore::new(self.settings.concurrency.max(1)));
        let mut in_flight = JoinSet::new();
        let mut stopping = stop;
        loop {
            let stopped = async {
                let _ = stopping.wait_for(|stop| *stop).await;
            };
            let next = async {
                // Never closed; the permit is taken before the claim so a
                // claim leaves the queue only when it can go.
                let permit = slots.clone().acquire_owned().await.ok();
                ahead.recv().await.map(|claim| (permit, claim))
            };
            let (permit, claim) = tokio::select! {
                biased;
                () = stopped => break,
                next = next => match next {
                    Some(next) => next,
                    None => break,
                },
            };
            in_flight.spawn(self.clone().deliver(claim, permit, settle_tx.clone()));
            while in_flight.try_join_next().is_some() {}
        }
        // The claimer ends at stop; what it queued was never sent.
        let _ = claimer.await;
        let mut unsent = Vec::new();
        while let Ok(claim) = ahead.try_recv() {
            unsent.push(claim);
        }
        if let Err(err) = delivery::release(&self.db, &unsent).await {
            tracing::warn!(error = %err, claims = unsent.len(), "could not hand back claimed deliveries; their leases will lapse");
        }
        while in_flight.join_next().await.is_some() {}
        drop(settle_tx);
        let _ = settler.await;
    }

    /// Deliveries claimed per statement.
    fn claim_size(&self) -> usize {
        usize::try_from(self.settings.batch)
            .unwrap_or(usize::MAX)
            .clamp(1, MAX_CLAIM)
    }

    /// Claims whenever the queue has room for a whole claim, until stopped;
    /// when less than a claim was due, waits for a settlement (a lead's
    /// next event may then be due), a written outbox event, or `idle`.
    async fn claim_loop(
        self,
        ahead: mpsc::Sender<Claimed>,
        idle: Duration,
        settled: Arc<Notify>,
        mut stop: watch::Receiver<bool>,
    ) {
        let batch = self.claim_size();
        // Outbox events written anywhere (`crate::wake`).
        let mut written = self.db.signals().outbox_work();
        while !*stop.borrow_and_update() {
            let room = tokio::select! {
                room = ahead.reserve_many(batch) => match room {
                    Ok(room) => room,
                    Err(_) => break,
                },
                changed = stop.changed() => if changed.is_err() { break } else { continue },
            };
            // Seen before the claim: a write during it means another.
            written.borrow_and_update();
            let started = std::time::Instant::now();
            let (more, claimed) = match self.feed(batch).await {
                Ok(fed) => fed,
                Err(err) => {
                    tracing::warn!(error = %err, "outbox pass failed; retrying");
                    (false, Vec::new())
                }
            };
            tracing::debug!(
                claimed = claimed.len(),
                took_ms = started.elapsed().as_secs_f64() * 1000.0,
                "outbox claim"
            );
            for (slot, claim) in room.zip(claimed) {
                slot.send(claim);
            }
            if more {
                continue;
            }
            tokio::select! {
                () = settled.notified() => {}
                changed = written.changed() => if changed.is_err() { tokio::time::sleep(idle).await },
                () = tokio::time::sleep(idle) => {}
                changed = stop.changed() => if changed.is_err() { break },
            }
        }
    }

    /// Fans out, and claims up to `room` due deliveries. `more` when either
    /// step stopped at its limit (so more may be due right away).
    async fn feed(&self, room: usize) -> Result<(bool, Vec<Claimed>), domain::Error> {
        let asked = self.settings.batch.min(room as u64);
        let claim = async {
            if asked == 0 {
                Ok(Vec::new())
            } else {
                delivery::claim_due(&self.db, asked, self.lease()).await
            }
        };
        let fan_out = delivery::fan_out(&self.db, FAN_OUT_BATCH);
        // Side by side on PostgreSQL: a claim takes what earlier fan-outs
        // committed, so it need not wait for this one. SQLite has one
        // writer: there the second would only wait for the first.
        let (fanned_out, claimed) = if self.db.dialect().has_one_writer() {
            let fanned_out = fan_out.await;
            (fanned_out, claim.await)
        } else {
            tokio::join!(fan_out, claim)
        };
        let claimed = claimed?;
        let more =
            fanned_out? as u64 >= FAN_OUT_BATCH || (asked > 0 && claimed.len() as u64 >= asked);
        Ok((more, claimed))
    }

    /// One request, its result handed to the settler; a claim whose lease
    /// could run out before the receiver answers is not sent (it lapses and
    /// is claimed again), so no delivery is ever in flight twice.
    async fn deliver(
        self,
        claim: Claimed,
        _permit: Option<OwnedSemaphorePermit>,
        settle: mpsc::Sender<ToSettle>,
    ) {
        let Some(result) = self.attempt_in_slot(&claim).await else {
            return;
        };
        // Fails only once the settler is gone, which it is not before
        // every delivery task has ended.
        let _ = settle.send((claim, result)).await;
    }

    /// Records finished attempts, as many as have arrived, one transaction
    /// at a time; tells the claim loop after each.
    async fn settle_loop(self, mut rx: mpsc::Receiver<ToSettle>, settled: Arc<Notify>) {
        let mut batch = Vec::with_capacity(SETTLE_BATCH);
        while rx.recv_many(&mut batch, SETTLE_BATCH).await > 0 {
            let started = std::time::Instant::now();
            self.settle(batch.iter().map(|(c, (r, t))| (c, r, *t)))
                .await;
            tracing::debug!(
                settled = batch.len(),
                took_ms = started.elapsed().as_secs_f64() * 1000.0,
                "outbox settle"
            );
            batch.clear();
            settled.notify_one();
        }
    }

    /// Records attempts in one transaction and reports each; `None` for all
    /// when the write failed (the claims lapse and a later pass retries).
    async fn settle<'a>(
        &self,
        attempts: impl Iterator<Item = (&'a Claimed, &'a AttemptResult, Duration)>,
    ) -> Vec<Option<Settlement>> {
        let attempts: Vec<(&Claimed, &AttemptResult, Duration)> = attempts.collect();
        let recorded = delivery::record_attempts(
            &self.db,
            &attempts,
            &self.settings.retry,
            self.settings.disable_after,
        );
        match recorded.await {
            Ok(settlements) => attempts
                .iter()
                .zip(settlements)
                .map(|((claim, result, _), settlement)| {
                    report(claim, result, &settlement);
                    Some(settlement)
                })
                .collect(),
            Err(err) => {
                tracing::warn!(error = %err, attempts = attempts.len(), "could not record delivery attempts");
                vec![None; attempts.len()]
            }
        }
    }

    /// An attempt once its subscription has a free slot.
    #[tracing::instrument(name = "outbox.deliver", skip_all, fields(
        delivery_id = claim.delivery.id,
        subscription_id = claim.subscription.id,
        event_type = %claim.event.event_type,
        correlation_id = claim.event.correlation_id.as_deref().unwrap_or(""),
    ))]
    async fn attempt_in_slot(&self, claim: &Claimed) -> Option<Attempted> {
        let slot = self.slots.of(claim.subscription.id);
        // The semaphore is never closed; without a permit, send anyway
        // rather than strand the claim.
        let _permit = slot.acquire_owned().await.ok();
        if !self.lease_covers_a_request(claim) {
            tracing::debug!(
                delivery_id = claim.delivery.id,
                "lease too short for a request; left to lapse"
            );
            return None;
        }
        // Timed from the slot on: the receiver's latency, not our queue.
        let started = std::time::Instant::now();
        let result = self.attempt(claim).await;
        let took = started.elapsed();
        let subscription = claim.subscription.id.to_string();
        metrics::histogram!("leadpipe_subscription_attempt_duration_seconds", "subscription_id" => subscription.clone())
            .record(took.as_secs_f64());
        let ok = matches!(&result, AttemptResult::Answered { status, .. } if (200..300).contains(status));
        metrics::counter!("leadpipe_subscription_attempts_total", "subscription_id" => subscription, "outcome" => if ok { "success" } else { "failure" })
            .increment(1);
        Some((result, took))
    }

    /// Whether the claim's lease outlasts a request that starts now (with a
    /// second to spare for clocks and the settlement).
    fn lease_covers_a_request(&self, claim: &Claimed) -> bool {
        let needed = chrono::Duration::from_std(self.settings.request_timeout)
            .unwrap_or(chrono::Duration::MAX)
            .checked_add(&chrono::Duration::seconds(1))
            .unwrap_or(chrono::Duration::MAX);
        match claim.delivery.locked_until {
            Some(until) => domain::clock::now()
                .checked_add_signed(needed)
                .is_some_and(|by| by < until),
            None => false,
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

/// The publisher's apalis task. Its pipeline keeps claims queued ahead of
/// the requests and settles attempts in batches across claims, so it is one
/// task that runs until stop (and on stop claims nothing more, hands back
/// what it did not send and waits for what is in flight), not a task per
/// claim.
#[derive(Debug, Clone, Copy)]
pub struct PublisherRun;

/// What the publisher's task needs.
pub(crate) struct PublisherTask {
    pub publisher: Publisher,
    pub idle: Duration,
    pub stop: watch::Receiver<bool>,
}

/// The apalis task function of the publisher: [`Publisher::run`] until stop.
///
/// Boxed: the task runs on a tokio task of its own, and rustc proves its
/// future `Send` only here, where the lifetimes are concrete.
pub(crate) fn run_task(
    _: PublisherRun,
    task: apalis::prelude::Data<Arc<PublisherTask>>,
) -> futures::future::BoxFuture<'static, Result<usize, apalis::prelude::BoxDynError>> {
    let task = (*task).clone();
    Box::pin(async move {
        task.publisher
            .clone()
            .run(task.idle, task.stop.clone())
            .await;
        // Not a pass that found work: the task metric counts no run.
        Ok(0)
    })
}

/// The metric and log line of one settled attempt.
fn report(claim: &Claimed, result: &AttemptResult, settlement: &Settlement) {
    let label = match settlement {
        Settlement::Delivered => "delivered",
        Settlement::RetryIn(_) => "retry",
        Settlement::Dead => "dead",
        Settlement::Gone => "gone",
    };
    metrics::counter!("leadpipe_outbox_deliveries_total", "result" => label).increment(1);
    let delivery_id = claim.delivery.id;
    let subscription_id = claim.subscription.id;
    match settlement {
        Settlement::Delivered => tracing::debug!(delivery_id, subscription_id, "delivered"),
        Settlement::RetryIn(delay) => {
            tracing::info!(delivery_id, subscription_id, retry_in_ms = delay.as_millis() as u64, result = ?result_kind(result), "delivery failed; will retry")
        }
        Settlement::Dead => {
            tracing::warn!(delivery_id, subscription_id, result = ?result_kind(result), "delivery dead")
        }
        Settlement::Gone => {
            tracing::warn!(
                delivery_id,
                subscription_id,
                "receiver answered 410; subscription disabled"
            )
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
