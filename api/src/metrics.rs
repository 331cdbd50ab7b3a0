//! Prometheus metrics: counters and histograms recorded where things happen
//! (the `metrics` facade), gauges computed from the database at scrape time.

use std::sync::OnceLock;

use actix_web::{HttpResponse, web};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sea_orm::sea_query::{Expr, ExprTrait, Func};
use sea_orm::{
    ColumnTrait, DatabaseConnection, DbErr, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect,
};

use crate::error::ApiError;
use crate::startup::AppState;
use domain::entities::{lead, outbox_delivery, outbox_event};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Installs the process-wide recorder once; later calls reuse it.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("duration_seconds".into()), LATENCY_BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be installed (tests embedding us):
        // then our handle renders what we record through it only.
        let _ = metrics::set_global_recorder(recorder);
        describe();
        handle
    })
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

async fn scrape(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    refresh_gauges(&state.db).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(handle().render()))
}

/// Gauges read from the database, so they are right whichever process did the work.
async fn refresh_gauges(db: &DatabaseConnection) -> Result<(), DbErr> {
    let pending = outbox_event::Entity::find()
        .filter(outbox_event::Column::State.eq(domain::outbox::PENDING))
        .count(db)
        .await?;
    metrics::gauge!("leadpipe_outbox_events_pending").set(pending as f64);

    let by_state: Vec<(String, i64)> = outbox_delivery::Entity::find()
        .select_only()
        .column(outbox_delivery::Column::State)
        .column_as(Expr::col(outbox_delivery::Column::Id).count(), "n")
        .filter(outbox_delivery::Column::State.ne(domain::delivery::DELIVERED))
        .group_by(outbox_delivery::Column::State)
        .into_tuple()
        .all(db)
        .await?;
    for state in [
        domain::delivery::PENDING,
        domain::delivery::DELIVERING,
        domain::delivery::FAILED,
        domain::delivery::DEAD,
    ] {
        let n = by_state
            .iter()
            .find(|(s, _)| s == state)
            .map_or(0, |(_, n)| *n);
        metrics::gauge!("leadpipe_outbox_deliveries", "state" => state).set(n as f64);
    }

    let oldest: Option<Option<chrono::DateTime<chrono::Utc>>> = outbox_delivery::Entity::find()
        .select_only()
        .expr(Func::min(Expr::col(outbox_delivery::Column::CreatedAt)))
        .filter(
            outbox_delivery::Column::State
                .is_in([domain::delivery::PENDING, domain::delivery::FAILED]),
        )
        .into_tuple()
        .one(db)
        .await?;
    let age = oldest.flatten().map_or(0.0, |t| {
        std::cmp::max((domain::clock::now() - t).num_milliseconds(), 0) as f64 / 1000.0
    });
    metrics::gauge!("leadpipe_outbox_oldest_undelivered_age_seconds").set(age);

    let backlog = lead::Entity::find()
        .filter(Expr::col(lead::Column::ProcessedVersion).lt(Expr::col(lead::Column::Version)))
        .count(db)
        .await?;
    metrics::gauge!("leadpipe_leads_processing_backlog").set(backlog as f64);
    Ok(())
}
