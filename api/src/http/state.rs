//! `AppState`: what every handler may reach.

use domain::store::Store;
use std::sync::Arc;

use crate::config::HttpSettings;

/// What every handler may reach.
#[derive(Clone)]
pub struct AppState {
    pub db: Store,
    /// Where read-only listings go: a replica within its lag bound, else `db`.
    pub reads: crate::http::read_replica::Reads,
    pub http: Arc<HttpSettings>,
    pub idempotency: domain::idempotency::Policy,
    /// Recently authenticated tokens.
    pub principals: domain::auth::PrincipalCache,
    /// Batches intake upserts when enabled.
    pub group_commit: Option<domain::lead::group_commit::GroupCommitter>,
    /// Executes reconcile runs started over HTTP.
    pub reconciler: Arc<workers::reconcile::Reconciler>,
    /// Whether the configured keys open the stored secrets (`/readyz`).
    pub key_health: Arc<crate::http::key_health::KeyHealth>,
    /// What a delivery to an unconfigured source name is verified against.
    pub unknown_source: Arc<domain::inbound::source::StandIn>,
    /// Failed-authentication and webhook rate limits.
    pub limits: Arc<crate::http::rate_limit::Limits>,
    /// Imports started over HTTP, which a graceful stop waits for.
    pub imports: crate::http::imports::ImportTasks,
    /// Refuses webhooks while the inbox backlog is at its limit.
    pub admission: Arc<crate::http::admission::Admission>,
    /// The database gauges, refreshed in the background for `/metrics`.
    pub gauges: Arc<crate::http::metrics::Gauges>,
}
