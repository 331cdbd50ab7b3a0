//! Building the HTTP application; `main` and the tests both start it here.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use sea_orm::DatabaseConnection;

use crate::config::HttpSettings;
use crate::{correlation, error::ApiError, routes};

/// What every handler may reach.
#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub http: Arc<HttpSettings>,
    pub idempotency: domain::idempotency::Policy,
    /// Recently authenticated tokens.
    pub principals: domain::auth::PrincipalCache,
    /// Batches intake upserts when enabled.
    pub group_commit: Option<domain::group_commit::GroupCommitter>,
    /// Where the webhook receiver and ops retries queue inbox jobs.
    pub jobs: workers::InboxQueue,
    /// Executes reconcile runs started over HTTP.
    pub reconciler: Arc<workers::reconcile::Reconciler>,
}

pub struct Application {
    port: u16,
    server: Server,
}

impl Application {
    /// Binds `settings.bind` (port 0 picks a free port, as the tests do).
    pub fn build(db: DatabaseConnection, settings: HttpSettings) -> std::io::Result<Self> {
        crate::metrics::handle();
        let listener = TcpListener::bind(&settings.bind)?;
        let port = listener.local_addr()?.port();
        // Uploads a crashed run left behind (the live ones are locked).
        let spool_dir = crate::spool::dir(settings.spool_dir.as_deref());
        match crate::spool::remove_stale(&spool_dir) {
            Ok(0) => {}
            Ok(removed) => {
                tracing::info!(removed, dir = %spool_dir.display(), "removed stale upload spools")
            }
            Err(error) => {
                tracing::warn!(%error, dir = %spool_dir.display(), "could not clean the upload spool directory")
            }
        }
        let group_commit = settings.group_commit.then(|| {
            domain::group_commit::GroupCommitter::start(
                db.clone(),
                domain::group_commit::GroupCommitSettings {
                    max_batch: settings.group_commit_max_batch.max(1),
                    committers: settings.group_commit_committers.max(1),
                    ..Default::default()
                },
            )
        });
        let jobs = workers::InboxQueue::for_connection(&db).map_err(std::io::Error::other)?;
        // Runs started over HTTP open secrets with the server's own keys.
        let reconcile = workers::reconcile::ReconcileSettings {
            keyring: settings.keyring.clone(),
            ..settings.reconcile.clone()
        };
        let reconciler = Arc::new(
            workers::reconcile::Reconciler::new(db.clone(), reconcile)
                .map_err(std::io::Error::other)?,
        );
        let principals = domain::auth::PrincipalCache::new(
            std::time::Duration::from_secs(settings.auth_cache_secs),
            10_000,
        );
        let state = web::Data::new(AppState {
            principals,
            reconciler,
            group_commit,
            db,
            idempotency: settings.idempotency_policy(),
            http: Arc::new(settings),
            jobs,
        });
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .app_data(web::PathConfig::default().error_handler(|err, _| {
                    ApiError::NotFound(format!("no such resource: {err}")).into()
                }))
                .app_data(web::QueryConfig::default().error_handler(|err, _| {
                    ApiError::Validation(vec![domain::FieldError::new("query", err.to_string())])
                        .into()
                }))
                .wrap(from_fn(crate::body_limit::middleware))
                .wrap(from_fn(correlation::middleware))
                .configure(routes::configure)
                .default_service(web::to(|| async {
                    Err::<actix_web::HttpResponse, _>(ApiError::NotFound("no such route".into()))
                }))
        })
        .listen(listener)?
        .shutdown_timeout(10)
        .run();
        Ok(Self { port, server })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}
