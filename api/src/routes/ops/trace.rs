//! `GET /api/ops/trace/{correlation_id}`: follow one request through the pipeline.

use actix_web::get;
use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use domain::ops::trace::{InboxSummary, Trace, TraceEntry};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::routes::Routes;
use crate::routes::leads::LeadOut;
use crate::wire::deliveries::{OutboxDeliveryOut, OutboxEventOut};
use crate::wire::leads::ActivityOut;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(trace);
}

#[derive(Serialize, ToSchema)]
#[schema(as = Trace)]
struct TraceOut {
    correlation_id: String,
    /// The leads the correlated work touched, as they are now.
    leads: Vec<LeadOut>,
    entries: Vec<TraceEntryOut>,
}

#[derive(Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[schema(as = TraceEntry)]
enum TraceEntryOut {
    InboxEvent {
        at: DateTime<Utc>,
        event: InboxSummary,
    },
    Activity {
        at: DateTime<Utc>,
        activity: ActivityOut,
    },
    OutboxEvent {
        at: DateTime<Utc>,
        event: OutboxEventOut,
    },
    Delivery {
        at: DateTime<Utc>,
        delivery: OutboxDeliveryOut,
    },
}

impl From<Trace> for TraceOut {
    fn from(t: Trace) -> Self {
        Self {
            correlation_id: t.correlation_id,
            leads: t.leads.into_iter().map(LeadOut::from).collect(),
            entries: t.entries.into_iter().map(TraceEntryOut::from).collect(),
        }
    }
}

impl From<TraceEntry> for TraceEntryOut {
    fn from(e: TraceEntry) -> Self {
        match e {
            TraceEntry::InboxEvent { at, event } => Self::InboxEvent { at, event },
            TraceEntry::Activity { at, activity } => Self::Activity {
                at,
                activity: activity.into(),
            },
            TraceEntry::OutboxEvent { at, event } => Self::OutboxEvent {
                at,
                event: event.into(),
            },
            TraceEntry::Delivery { at, delivery } => Self::Delivery {
                at,
                delivery: delivery.into(),
            },
        }
    }
}

/// Everything that carries one correlation id, in time order.
///
/// The leads the correlated work touched (as they are now), and its timeline
/// entries, outbox events and their deliveries.
#[utoipa::path(
    operation_id = "trace",
    tag = "ops",
    params(("correlation_id" = String, Path, description = "An `X-Request-Id`")),
    responses(
        (status = 200, description = "The trace", body = TraceOut),
        (status = 404, description = "`/problems/not-found`: nothing carries this correlation id"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/trace/{correlation_id}")]
async fn trace(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    correlation_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let correlation_id = correlation_id.into_inner();
    let trace = domain::ops::trace::collect(state.reads.db(), &correlation_id)
        .await
        .map_err(|e| match e {
            domain::Error::NotFound => {
                ApiError::NotFound(format!("nothing carries correlation id '{correlation_id}'"))
            }
            other => other.into(),
        })?;
    Ok(HttpResponse::Ok().json(TraceOut::from(trace)))
}
