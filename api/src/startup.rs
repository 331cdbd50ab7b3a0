//! Building the HTTP application; `main` and the tests both start it here.

use domain::store::{Dialect, Store};
use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpRequest, HttpServer, web};
use domain::lead::group_commit::{GroupCommitSettings, GroupCommitter};

use crate::config::HttpSettings;
use crate::http::allow::AllowedMethods;
use crate::http::correlation;
use crate::http::error::ApiError;
use crate::http::security_headers::security_headers;
use crate::http::state::AppState;
use crate::routes;

pub struct Application {
    port: u16,
    metrics_port: Option<u16>,
    server: Server,
    metrics_server: Option<Server>,
    imports: crate::http::imports::ImportTasks,
}

impl Application {
    /// Binds `settings.bind` (port 0 picks a free port, as the tests do).
    pub fn build(db: Store, settings: HttpSettings) -> std::io::Result<Self> {
        crate::http::metrics::handle();
        let listener = TcpListener::bind(&settings.bind)?;
        let port = listener.local_addr()?.port();
        // Uploads a crashed run left behind (the live ones are locked).
        let spool_dir = crate::http::spool::dir(settings.spool_dir.as_deref());
        match crate::http::spool::remove_stale(&spool_dir) {
            Ok(0) => {}
            Ok(removed) => {
                tracing::info!(removed, dir = %spool_dir.display(), "removed stale upload spools")
            }
            Err(error) => {
                tracing::warn!(%error, dir = %spool_dir.display(), "could not clean the upload spool directory")
            }
        }
        let http_workers = settings.http_workers;
        let group_commit = GroupCommitPlan::new(&settings, db.dialect());
        // Workers in other processes learn of committed work by NOTIFY.
        tokio::spawn(workers::wake::announce(db.clone()));
        let admission =
            crate::http::admission::Admission::start(db.clone(), settings.inbox_backlog_limit);
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
        let gauges = crate::http::metrics::Gauges::start(db.clone(), settings.metrics.refresh());
        let limits = Arc::new(crate::http::rate_limit::Limits::new(&settings));
        let metrics_listener = settings
            .metrics
            .bind
            .as_deref()
            .map(TcpListener::bind)
            .transpose()?;
        let metrics_port = metrics_listener
            .as_ref()
            .map(|l| l.local_addr().map(|a| a.port()))
            .transpose()?;
        let metrics_public = metrics_listener.is_none();
        let metrics_server = metrics_listener
            .map(|listener| crate::routes::metrics::metrics_only_server(listener, gauges.clone()))
            .transpose()?;
        let reads = match &settings.database_read_url {
            Some(_) if db.dialect() != Dialect::Postgres => {
                return Err(std::io::Error::other(
                    "DATABASE_READ_URL needs a PostgreSQL DATABASE_URL: read replicas follow a PostgreSQL primary",
                ));
            }
            Some(url) => crate::http::read_replica::Reads::with_replica(
                db.clone(),
                db.with_pool(
                    crate::storage::open_read_replica(url, 8).map_err(std::io::Error::other)?,
                ),
                settings.read_max_lag(),
            ),
            None => crate::http::read_replica::Reads::primary_only(db.clone()),
        };
        let imports = crate::http::imports::ImportTasks::on_current_runtime(&db);
        let unknown_source = Arc::new(domain::inbound::source::StandIn::new(&settings.keyring));
        let state = web::Data::new(AppState {
            key_health: Arc::default(),
            unknown_source,
            imports: imports.clone(),
            admission,
            reads,
            limits,
            gauges,
            principals,
            reconciler,
            group_commit: group_commit.shared(&db),
            db,
            idempotency: settings.idempotency_policy(),
            http: Arc::new(settings),
        });
        let allowed = Arc::new(AllowedMethods::from_paths(
            &routes::registered_with(metrics_public).0,
        ));
        let server = HttpServer::new(move || {
            let state = group_commit.for_this_worker(&state);
            App::new()
                .app_data(state)
                .app_data(web::PathConfig::default().error_handler(|err, _| {
                    ApiError::NotFound(format!("no such resource: {err}")).into()
                }))
                .app_data(
                    web::QueryConfig::default()
                        .error_handler(|err, _| ApiError::invalid("query", err.to_string()).into()),
                )
                .wrap(from_fn(crate::http::body_limit::middleware))
                .wrap(from_fn(correlation::middleware))
                .wrap(security_headers())
                .wrap(from_fn(crate::http::kept_alive::middleware))
                .configure(|cfg| routes::configure(&mut routes::Routes::new(cfg), metrics_public))
                .default_service(web::to({
                    let allowed = allowed.clone();
                    move |req: HttpRequest| {
                        let answer = no_route(&allowed, &req);
                        async move { Err::<actix_web::HttpResponse, _>(answer) }
                    }
                }))
        })
        .keep_alive(crate::http::kept_alive::KEEP_ALIVE)
        .client_request_timeout(crate::http::kept_alive::HEAD_TIMEOUT)
        .on_connect(crate::http::kept_alive::on_connect)
        .listen(listener)?
        .shutdown_timeout(10);
        let server = if http_workers > 0 {
            server.workers(http_workers)
        } else {
            server
        }
        .run();
        Ok(Self {
            port,
            metrics_port,
            server,
            metrics_server,
            imports,
        })
    }

    /// The imports this server runs: `serve` waits for them on a stop.
    pub fn imports(&self) -> crate::http::imports::ImportTasks {
        self.imports.clone()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the metrics listener, when `metrics_bind` is set.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_port
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        match self.metrics_server {
            Some(metrics) => {
                let (served, metered) = tokio::join!(self.server, metrics);
                served.and(metered)
            }
            None => self.server.await,
        }
    }
}

/// What a request no route took is answered: `405` with `Allow` when its
/// path is served with other methods, else `404`.
fn no_route(allowed: &AllowedMethods, req: &HttpRequest) -> ApiError {
    match allowed.allow(req.path()) {
        Some(allow) => ApiError::MethodNotAllowed {
            method: req.method().to_string(),
            allow,
        },
        None => ApiError::NotFound("no such route".into()),
    }
}

/// Where intake's group committers run. On PostgreSQL each HTTP worker
/// starts its own share on its own thread, with a connection each opened
/// there: a request's hand-off to its batch, the batch's statements and the
/// reply all stay on that thread, with no wake-up across threads.
/// SQLite has one writer, so one shared committer serves every worker.
#[derive(Clone, Copy)]
enum GroupCommitPlan {
    Off,
    Shared(GroupCommitSettings),
    PerWorker(GroupCommitSettings),
}

impl GroupCommitPlan {
    fn new(settings: &HttpSettings, dialect: Dialect) -> Self {
        if !settings.group_commit {
            return Self::Off;
        }
        let all = GroupCommitSettings {
            max_batch: settings.group_commit_max_batch.max(1),
            committers: settings.group_commit_committers.max(1),
            max_wait: std::time::Duration::from_micros(settings.group_commit_max_wait_us),
        };
        // One writer: one set of committers for the whole server.
        if dialect.has_one_writer() {
            return Self::Shared(all);
        }
        // actix-web's default: one worker per core.
        let workers = match settings.http_workers {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        Self::PerWorker(GroupCommitSettings {
            committers: all.committers.div_ceil(workers),
            ..all
        })
    }

    /// The committers every worker shares, started on this runtime.
    fn shared(&self, db: &Store) -> Option<GroupCommitter> {
        match self {
            Self::Shared(settings) => Some(GroupCommitter::start(db.clone(), *settings)),
            Self::Off | Self::PerWorker(_) => None,
        }
    }

    /// The state one HTTP worker serves with; called on that worker's
    /// thread, so its own committers start on its runtime.
    fn for_this_worker(&self, state: &web::Data<AppState>) -> web::Data<AppState> {
        match self {
            Self::PerWorker(settings) => {
                let mut own = AppState::clone(state);
                // Connections of its own, opened on this thread's runtime;
                // twice the committers, so a committer need not wait for its
                // last connection's release (sqlx pings it on the way back).
                let connections = u32::try_from(settings.committers * 2).unwrap_or(u32::MAX);
                let db = crate::storage::thread_local_pool(&own.db, connections)
                    .unwrap_or_else(|| own.db.clone());
                own.group_commit = Some(GroupCommitter::start(db, *settings));
                web::Data::new(own)
            }
            Self::Off | Self::Shared(_) => state.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(dialect: Dialect, committers: usize, http_workers: usize) -> GroupCommitPlan {
        let mut settings = HttpSettings::for_tests();
        settings.group_commit_committers = committers;
        settings.http_workers = http_workers;
        GroupCommitPlan::new(&settings, dialect)
    }

    /// PostgreSQL splits the committers among the workers (rounding up, so
    /// every worker has one); SQLite's one writer gets one shared set.
    #[test]
    fn committers_are_split_among_workers_on_postgres_only() {
        let per_worker = |p| match p {
            GroupCommitPlan::PerWorker(s) => Some(s.committers),
            _ => None,
        };
        assert_eq!(per_worker(plan(Dialect::Postgres, 4, 2)), Some(2));
        assert_eq!(per_worker(plan(Dialect::Postgres, 4, 3)), Some(2));
        assert_eq!(per_worker(plan(Dialect::Postgres, 1, 4)), Some(1));
        assert!(matches!(
            plan(Dialect::Sqlite, 4, 2),
            GroupCommitPlan::Shared(s) if s.committers == 4
        ));
        let mut off = HttpSettings::for_tests();
        off.group_commit = false;
        assert!(matches!(
            GroupCommitPlan::new(&off, Dialect::Postgres),
            GroupCommitPlan::Off
        ));
    }
}
