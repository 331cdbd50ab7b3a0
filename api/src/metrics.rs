//! Prometheus metrics: counters and histograms recorded where things happen
//! (the `metrics` facade), gauges computed from the database at scrape time.

use std::sync::OnceLock;

use actix_web::{HttpResponse, web};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use sea_orm::{DatabaseConnection, DbErr};

use crate::error::ApiError;
use crate::startup::AppState;

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
    use metrics::{describe_counter, describe_gauge, describe_histogram};
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
    describe_gauge!(
        "leadpipe_outbox_events_pending",
        "Outbox events not yet fanned out to subscriptions"
    );
    describe_gauge!(
        "leadpipe_outbox_deliveries",
        "Outgoing deliveries not yet delivered, by state"
    );
    describe_gauge!(
        "leadpipe_outbox_oldest_undelivered_age_seconds",
        "Age of the oldest pending or failed outgoing delivery"
    );
    describe_counter!(
        "leadpipe_reconcile_runs_total",
        "Reconcile runs ended, by source and state (done, failed, abandoned)"
    );
    describe_counter!(
        "leadpipe_reconcile_records_total",
        "Records pulled by reconcile, by source and outcome (created, updated, unchanged, stale, rejected)"
    );
    describe_counter!(
        "leadpipe_reconcile_missed_total",
        "Records reconcile had to create or update: webhook deliveries that never arrived, by source"
    );
    describe_gauge!(
        "leadpipe_leads_processing_backlog",
        "Leads whose current version the lead processor has not handled yet"
    );
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(scrape));
}

/// Prometheus metrics.
///
/// **Roles:** anyone (no token).
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "meta",
    responses(
        (status = 200, description = "The Prometheus text exposition format", content_type = "text/plain; version=0.0.4", body = String),
        (status = 503, description = "`/problems/unavailable`: the database does not answer (gauges are read from it)"),
    ),
)]
pub async fn scrape(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    refresh_gauges(&state.db).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(handle().render()))
}

/// Gauges read from the database, so they are right whichever process did the work.
async fn refresh_gauges(db: &DatabaseConnection) -> Result<(), DbErr> {
    let stats = domain::stats::collect(db).await?;
    for source in &stats.sources {
        for (state, n) in &source.inbox {
            metrics::gauge!("leadpipe_inbox_events", "source" => source.source.clone(), "state" => *state)
                .set(*n as f64);
        }
        metrics::gauge!("leadpipe_inbox_oldest_unprocessed_age_seconds", "source" => source.source.clone())
            .set(source.oldest_unprocessed_age_seconds.unwrap_or(0.0));
        metrics::gauge!("leadpipe_leads", "source" => source.source.clone())
            .set(source.leads as f64);
    }
    metrics::gauge!("leadpipe_outbox_events_pending").set(stats.outbox.events_pending as f64);
    for (state, n) in &stats.outbox.deliveries {
        metrics::gauge!("leadpipe_outbox_deliveries", "state" => *state).set(*n as f64);
    }
    metrics::gauge!("leadpipe_outbox_oldest_undelivered_age_seconds")
        .set(stats.outbox.oldest_undelivered_age_seconds.unwrap_or(0.0));
    metrics::gauge!("leadpipe_leads_processing_backlog").set(stats.leads_processing_backlog as f64);
    Ok(())
}
