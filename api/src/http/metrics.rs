//! Prometheus metrics: counters and histograms recorded where things happen
//! (the `metrics` facade), and gauges read from the database by a background
//! task every `LEADPIPE_METRICS_REFRESH_SECS` (less often when counting
//! takes long: [`pause_after`]). A scrape renders what is in
//! memory: it never queries the database, so it is cheap and it answers
//! while the database is slow or down (the age gauge tells how old the
//! database figures are).

use domain::store::Store;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use actix_web::HttpResponse;
use domain::inbound::source::SourceState;
use domain::ops::stats::Stats;
use metrics_exporter_prometheus::formatting::sanitize_label_value;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

const BATCH_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Installs the process-wide recorder once; later calls reuse it.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("duration_seconds".into()), LATENCY_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("leadpipe_group_commit_batch_size".into()),
                    BATCH_SIZE_BUCKETS,
                )
            })
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be installed (tests embedding us):
        // then our handle renders what we record through it only.
        let _ = metrics::set_global_recorder(recorder);
        describe();
        spawn_upkeep(handle.clone());
        handle
    })
}

/// Histogram samples queue up until the exporter folds them into buckets,
/// which it otherwise does only at a scrape: an unscraped server would
/// grow by every request's sample. Fold them every few seconds.
fn spawn_upkeep(handle: PrometheusHandle) {
    let upkeep = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(5));
                handle.run_upkeep();
            }
        });
    if let Err(err) = upkeep {
        tracing::warn!(error = %err, "metrics upkeep thread did not start");
    }
}

fn describe() {
    use metrics::{describe_counter, describe_histogram};
    describe_counter!(
        "leadpipe_http_requests_total",
        "HTTP requests by method, route and status"
    );
    describe_histogram!(
        "leadpipe_http_request_duration_seconds",
        "HTTP request latency by method, route and status"
    );
    describe_counter!(
        "leadpipe_ingest_total",
        "Ingest outcomes by origin (api, webhook, reconcile, import) and outcome"
    );
    describe_counter!(
        "leadpipe_idempotency_requests_total",
        "Keyed requests: executed, replayed, in_flight (409), mismatch (422)"
    );
    describe_counter!(
        "leadpipe_outbox_deliveries_total",
        "Outgoing webhook attempts by result: delivered, retry, dead, gone"
    );
    describe_counter!(
        "leadpipe_subscription_attempts_total",
        "Outgoing webhook attempts by subscription_id and outcome (success: a 2xx; failure)"
    );
    describe_counter!(
        "leadpipe_subscriptions_disabled_total",
        "Subscriptions disabled because their deliveries failed for LEADPIPE_SUBSCRIPTION_DISABLE_AFTER"
    );
    describe_histogram!(
        "leadpipe_subscription_attempt_duration_seconds",
        "Outgoing webhook attempt latency by subscription_id, request to answer or failure"
    );
    describe_counter!(
        "leadpipe_rate_limited_total",
        "Requests refused with 429, by limit (auth_failures, webhook)"
    );
    describe_counter!(
        "leadpipe_reconcile_runs_total",
        "Reconcile runs ended, by source and state (done, failed, abandoned)"
    );
    describe_counter!(
        "leadpipe_reconcile_records_total",
        "Records pulled by reconcile, by source and outcome (created, updated, unchanged, stale, rejected)"
    );
    metrics::describe_gauge!(
        "leadpipe_read_replica_lag_seconds",
        "How far the read replica is behind the primary (+Inf when it does not answer)"
    );
    metrics::describe_gauge!(
        "leadpipe_read_replica_in_use",
        "1 while reads go to the replica, 0 while they go to the primary"
    );
    describe_counter!(
        "leadpipe_reconcile_missed_total",
        "Records reconcile had to create or update: webhook deliveries that never arrived, by source"
    );
}

impl crate::config::MetricsSettings {
    /// The background gauge refresh period (at least 100 ms).
    pub fn refresh(&self) -> std::time::Duration {
        refresh_period(self.refresh_secs)
    }
}

/// The background gauge refresh period from seconds (at least 100 ms).
pub fn refresh_period(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs)
        .unwrap_or_default()
        .max(Duration::from_millis(100))
}

/// The Prometheus text: the recorder's counters and histograms, then the
/// gauges.
pub fn render(gauges: &Gauges) -> HttpResponse {
    let mut text = handle().render();
    gauges.render_into(&mut text);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(text)
}

/// The database gauges of one application: the last figures read, when,
/// and how many refreshes failed since start.
#[derive(Default)]
pub struct Gauges {
    last: RwLock<Option<(Instant, Stats)>>,
    failures: AtomicU64,
}

impl Gauges {
    /// Refreshes every `every` in the background while the returned value
    /// lives (the task holds only a weak reference). A refresh that takes
    /// longer than `every` (at least a second) is abandoned and counted.
    pub fn start(db: Store, every: Duration) -> Arc<Self> {
        let gauges = Arc::new(Self::default());
        let weak = Arc::downgrade(&gauges);
        let timeout = every.max(Duration::from_secs(1));
        tokio::spawn(refresh_loop(weak, db, every, timeout));
        gauges
    }

    fn store(&self, stats: Stats) {
        if let Ok(mut last) = self.last.write() {
            *last = Some((Instant::now(), stats));
        }
    }

    fn failed(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    fn render_into(&self, out: &mut String) {
        let failures = self.failures.load(Ordering::Relaxed);
        let last = self.last.read().ok();
        let last = last.as_ref().and_then(|l| l.as_ref());
        let age = last.map(|(at, _)| at.elapsed().as_secs_f64());
        family(
            out,
            "leadpipe_metrics_gauges_age_seconds",
            "gauge",
            "Seconds since the database gauges were last refreshed (+Inf before the first refresh)",
            [(String::new(), age.unwrap_or(f64::INFINITY))],
        );
        family(
            out,
            "leadpipe_metrics_gauges_refresh_failures_total",
            "counter",
            "Background refreshes of the database gauges that failed or timed out",
            [(String::new(), failures as f64)],
        );
        let (Some((_, stats)), Some(age)) = (last, age) else {
            return;
        };
        // Ages grow while the figures wait for the next refresh.
        let aged = |a: Option<f64>| a.map_or(0.0, |a| a + age);
        let mut inbox = Vec::new();
        let mut oldest = Vec::new();
        let mut leads = Vec::new();
        let mut paused = Vec::new();
        let mut quiet = Vec::new();
        let mut usual_gap = Vec::new();
        let mut reconciled = Vec::new();
        let mut missed = Vec::new();
        for source in &stats.sources {
            let name = sanitize_label_value(&source.source);
            let held = source.state == Some(SourceState::Paused.as_str());
            if matches!(source.state, Some(state) if state != SourceState::Removed.as_str()) {
                paused.push((format!("{{source=\"{name}\"}}"), f64::from(u8::from(held))));
            }
            for (state, n) in &source.inbox {
                inbox.push((
                    format!("{{source=\"{name}\",state=\"{state}\"}}"),
                    *n as f64,
                ));
            }
            // A paused source's events wait for it, not for the workers.
            oldest.push((
                format!("{{source=\"{name}\"}}"),
                if held {
                    0.0
                } else {
                    aged(source.oldest_unprocessed_age_seconds)
                },
            ));
            leads.push((format!("{{source=\"{name}\"}}"), source.leads as f64));
            if let Some(q) = source.quiet_seconds {
                quiet.push((format!("{{source=\"{name}\"}}"), q + age));
            }
            if let Some(gap) = source.usual_gap_seconds {
                usual_gap.push((format!("{{source=\"{name}\"}}"), gap));
            }
            let recent = &source.recent_reconcile;
            if recent.reconciled > 0 {
                reconciled.push((format!("{{source=\"{name}\"}}"), recent.reconciled as f64));
                missed.push((format!("{{source=\"{name}\"}}"), recent.missed as f64));
            }
        }
        family(
            out,
            "leadpipe_inbox_events",
            "gauge",
            "Inbox events by source and state",
            inbox,
        );
        family(
            out,
            "leadpipe_inbox_oldest_unprocessed_age_seconds",
            "gauge",
            "Age of the oldest inbox event not yet processed, by source",
            oldest,
        );
        family(out, "leadpipe_leads", "gauge", "Leads by source", leads);
        family(
            out,
            "leadpipe_source_paused",
            "gauge",
            "1 while a webhook source is paused (its events wait), else 0",
            paused,
        );
        family(
            out,
            "leadpipe_source_quiet_seconds",
            "gauge",
            "Seconds since the source's newest inbox event was received, by configured source that has delivered",
            quiet,
        );
        family(
            out,
            "leadpipe_source_usual_gap_seconds",
            "gauge",
            "The source's usual gap between deliveries: its expected_interval, else the median of its recent gaps (absent with too few deliveries)",
            usual_gap,
        );
        family(
            out,
            "leadpipe_source_reconciled_records",
            "gauge",
            "Records reconcile pulled from the source's API in the last 6 hours (runs that wrote then, dry runs aside), whichever process ran them",
            reconciled,
        );
        family(
            out,
            "leadpipe_source_missed_records",
            "gauge",
            "Of those, the records the webhooks had not brought (reconcile created or updated them)",
            missed,
        );
        family(
            out,
            "leadpipe_outbox_events_pending",
            "gauge",
            "Outbox events not yet fanned out to subscriptions",
            [(String::new(), stats.outbox.events_pending as f64)],
        );
        family(
            out,
            "leadpipe_outbox_deliveries",
            "gauge",
            "Outgoing deliveries not yet delivered, by state",
            stats
                .outbox
                .deliveries
                .iter()
                .map(|(state, n)| (format!("{{state=\"{state}\"}}"), *n as f64)),
        );
        family(
            out,
            "leadpipe_outbox_oldest_undelivered_age_seconds",
            "gauge",
            "Age of the oldest pending or failed outgoing delivery",
            [(
                String::new(),
                aged(stats.outbox.oldest_undelivered_age_seconds),
            )],
        );
        family(
            out,
            "leadpipe_leads_processing_backlog",
            "gauge",
            "Leads whose current version the lead processor has not handled yet",
            [(String::new(), stats.leads_processing_backlog as f64)],
        );
        family(
            out,
            "leadpipe_leads_response_overdue",
            "gauge",
            "Open, owned leads nobody answered by their response due time",
            [(String::new(), stats.leads_response_overdue as f64)],
        );
        let processing = &stats.lead_processing;
        family(
            out,
            "leadpipe_lead_processing_failures",
            "gauge",
            "Leads whose processing failed, by state: failed (will retry) or dead (given up)",
            [("failed", processing.failed), ("dead", processing.dead)]
                .map(|(state, n)| (format!("{{state=\"{state}\"}}"), n as f64)),
        );
        family(
            out,
            "leadpipe_lead_processing_oldest_unprocessed_age_seconds",
            "gauge",
            "Age of the change of the lead longest waiting for processing",
            [(
                String::new(),
                aged(processing.oldest_unprocessed_age_seconds),
            )],
        );
    }
}

/// One metric family in the text format: HELP, TYPE, then `name{labels} value`
/// lines (`labels` already rendered, with braces, or empty).
fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: impl IntoIterator<Item = (String, f64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        if value.is_infinite() {
            let _ = writeln!(out, "{name}{labels} +Inf");
        } else {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    }
    out.push('\n');
}

async fn refresh_loop(gauges: Weak<Gauges>, db: Store, every: Duration, timeout: Duration) {
    loop {
        let Some(target) = gauges.upgrade() else {
            return;
        };
        let started = Instant::now();
        match tokio::time::timeout(timeout, domain::ops::stats::collect_gauges(db.db())).await {
            Ok(Ok(stats)) => target.store(stats),
            Ok(Err(err)) => {
                target.failed();
                tracing::warn!(error = %err, "metrics gauges not refreshed; serving the last figures");
            }
            Err(_) => {
                target.failed();
                tracing::warn!(
                    timeout_ms = timeout.as_millis() as u64,
                    "metrics gauges refresh timed out; serving the last figures"
                );
            }
        }
        drop(target);
        tokio::time::sleep(pause_after(every, started.elapsed())).await;
    }
}

/// A refresh keeps a connection busy at most this share of the time.
const REFRESH_BUSY_SHARE: u32 = 20;

/// How long to wait after a refresh that took `took`: `every`, or longer
/// when counting the tables takes a while (millions of leads), so the
/// gauges age instead of keeping a database core busy.
fn pause_after(every: Duration, took: Duration) -> Duration {
    every.max(took.saturating_mul(REFRESH_BUSY_SHARE - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quick_refresh_waits_the_period() {
        let every = Duration::from_secs(5);
        assert_eq!(pause_after(every, Duration::from_millis(40)), every);
    }

    #[test]
    fn a_slow_refresh_waits_nineteen_times_its_length() {
        // 400 ms counting a large table: 7.6 s of rest, 5% of the time busy.
        let pause = pause_after(Duration::from_secs(5), Duration::from_millis(400));
        assert_eq!(pause, Duration::from_millis(7_600));
    }
}
