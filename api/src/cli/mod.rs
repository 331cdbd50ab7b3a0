//! `leadpipe …`: serve, migrate, and the admin commands.

use clap::{Parser, Subcommand};
use domain::auth::Role;

pub mod delivery;
pub mod demo;
pub mod import;
pub mod inbox;
pub mod reconcile;
pub mod source;
pub mod subscription;
pub mod worker_args;

use crate::cli::inbox::InboxCommand;
use crate::cli::source::SourceCommand;
use crate::cli::worker_args::WorkerArgs;
use crate::config::{DbSettings, HttpSettings, OutboundSettings, SecretSettings};
use crate::startup::Application;
use crate::storage;

#[derive(Debug, Parser)]
#[command(
    name = "leadpipe",
    version,
    about = "Lead-pipeline CRM backend: every repeat harmless"
)]
pub struct Cli {
    #[command(flatten)]
    pub db: DbSettings,
    #[command(flatten)]
    pub outbound: OutboundSettings,
    #[command(flatten)]
    pub secrets: SecretSettings,
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per run: the size of the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API and the background workers (migrating the database
    /// first unless --no-migrate).
    Serve {
        #[command(flatten)]
        http: HttpSettings,
        /// Do not apply pending migrations on start (run `leadpipe migrate` yourself).
        #[arg(long, env = "LEADPIPE_NO_MIGRATE")]
        no_migrate: bool,
        /// Serve HTTP only; run the workers elsewhere with `leadpipe work`.
        #[arg(long, env = "LEADPIPE_NO_WORKERS")]
        no_workers: bool,
        #[command(flatten)]
        workers: WorkerArgs,
    },
    /// Run only the background workers (inbox processing, sweeper).
    Work {
        #[arg(long, env = "LEADPIPE_NO_MIGRATE")]
        no_migrate: bool,
        /// Serve this process's `GET /metrics` on this address, without a
        /// token (e.g. `127.0.0.1:9101`): the workers' counters (attempts,
        /// dead letters, deliveries, reconcile runs) live only here.
        #[arg(long, env = "LEADPIPE_METRICS_BIND")]
        metrics_bind: Option<String>,
        /// How often the gauges read from the database are refreshed, in seconds.
        #[arg(long, env = "LEADPIPE_METRICS_REFRESH_SECS", default_value_t = 5.0)]
        metrics_refresh_secs: f64,
        #[command(flatten)]
        workers: WorkerArgs,
    },
    /// Apply pending database migrations and exit.
    Migrate,
    /// Delete what has outlived its retention (expired Idempotency-Keys) and exit.
    Prune,
    /// Print the intake upsert as PostgreSQL SQL with sample rows (for bench/run's pgbench).
    #[command(hide = true)]
    BenchSql {
        #[arg(long, default_value_t = 1)]
        rows: usize,
    },
    /// Import leads from a CSV (header row) or NDJSON file, through the same
    /// write path as the API; safe to re-run (see README, "Bulk import").
    Import(crate::cli::import::ImportArgs),
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Manage webhook sources.
    Source {
        #[command(subcommand)]
        command: SourceCommand,
    },
    /// Manage downstream subscriptions to lead events.
    Subscription {
        #[command(subcommand)]
        command: crate::cli::subscription::SubscriptionCommand,
    },
    /// Inspect and retry outgoing webhook deliveries.
    Delivery {
        #[command(subcommand)]
        command: crate::cli::delivery::DeliveryCommand,
    },
    /// Sealed secrets: re-seal every stored secret under the current key.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
    /// Inspect and retry webhook inbox events.
    Inbox {
        #[command(subcommand)]
        command: InboxCommand,
    },
    /// Pull a source's records since its cursor through the write path,
    /// repairing what its webhooks missed (see README, "Reconcile").
    Reconcile(crate::cli::reconcile::ReconcileArgs),
    /// The whole pipeline in one command, on a fresh SQLite file: a fake
    /// source, signed webhooks (some redelivered, some dropped), a reconcile.
    Demo(crate::cli::demo::DemoArgs),
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Re-seal every stored secret (source secrets, pull auth values,
    /// subscription secrets, stored replies that reveal one) under the first
    /// configured key, and seal legacy plaintext ones. Safe to re-run.
    Rotate,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a principal and print its bearer token (shown only this once).
    Create {
        #[arg(long)]
        name: String,
        /// intake, sales, ops or admin
        #[arg(long)]
        role: Role,
        /// The source an intake token may post leads for.
        #[arg(long)]
        source: Option<String>,
    },
    /// List principals: id, name, role, source, active (never tokens).
    List,
    /// Revoke a principal's token. Servers accept it for at most
    /// LEADPIPE_AUTH_CACHE_SECS more.
    Revoke {
        /// The principal's id (`leadpipe token list`).
        #[arg(long)]
        id: i64,
    },
}

pub async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let db = &cli.db;
    match cli.command {
        Command::Serve {
            http,
            no_migrate,
            no_workers,
            workers,
        } => {
            let keyring = cli.secrets.keyring()?;
            crate::config::log_keyring(&keyring);
            let settings = workers
                .settings(cli.outbound.policy())
                .with_keyring(&keyring);
            if !no_workers {
                // Refuse bad worker settings before serving anything.
                settings.validate().map_err(anyhow::Error::msg)?;
            }
            let mut http = http;
            http.outbound_allow = cli.outbound.outbound_allow.clone();
            http.reconcile = settings.reconcile.clone();
            http.keyring = keyring;
            let conn = storage::open(&db.database_url, db.db_max_connections, !no_migrate).await?;
            let app = Application::build(conn.clone(), http.clone())?;
            tracing::info!(bind = %http.bind, port = app.port(), "leadpipe listening");
            if let Some(port) = app.metrics_port() {
                tracing::info!(port, "metrics on their own listener (no token)");
            }
            if no_workers {
                app.run_until_stopped().await?;
            } else {
                // actix stops on SIGINT/SIGTERM by itself; the workers get
                // the same signals and finish their in-flight jobs.
                let work = workers::runtime::run(conn, settings, shutdown_signal());
                let (served, worked) = tokio::join!(app.run_until_stopped(), work);
                served?;
                worked?;
            }
        }
        Command::Work {
            no_migrate,
            metrics_bind,
            metrics_refresh_secs,
            workers,
        } => {
            let keyring = cli.secrets.keyring()?;
            crate::config::log_keyring(&keyring);
            let conn = storage::open(&db.database_url, db.db_max_connections, !no_migrate).await?;
            let settings = workers
                .settings(cli.outbound.policy())
                .with_keyring(&keyring);
            let metrics = match metrics_bind {
                Some(bind) => {
                    crate::http::metrics::handle();
                    let listener = std::net::TcpListener::bind(&bind)?;
                    tracing::info!(address = %listener.local_addr()?, "metrics listening");
                    let every = crate::http::metrics::refresh_period(metrics_refresh_secs);
                    let gauges = crate::http::metrics::Gauges::start(conn.clone(), every);
                    Some(crate::routes::metrics::metrics_only_server(
                        listener, gauges,
                    )?)
                }
                None => None,
            };
            match metrics {
                Some(server) => {
                    let handle = server.handle();
                    let served = tokio::spawn(server);
                    let worked = workers::runtime::run(conn, settings, shutdown_signal()).await;
                    handle.stop(true).await;
                    served.await??;
                    worked?;
                }
                None => workers::runtime::run(conn, settings, shutdown_signal()).await?,
            }
        }
        Command::Prune => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            let deleted = workers::housekeeping::sweep_once(&conn).await?;
            println!("deleted {deleted} expired idempotency keys");
        }
        Command::BenchSql { rows } => {
            println!(
                "{}",
                domain::lead::ingest::upsert_sql_for_benchmark(rows.max(1))?
            );
        }
        Command::Import(args) => {
            let conn = storage::open(&db.database_url, 2, true).await?;
            crate::cli::import::run(&conn, args).await?;
        }
        Command::Migrate => {
            storage::migrate(&db.database_url).await?;
            println!("migrations applied");
        }
        Command::Token {
            command: TokenCommand::Create { name, role, source },
        } => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            let issued =
                domain::auth::create_principal(&conn, &name, role, source.as_deref()).await?;
            eprintln!(
                "created principal {} '{}' with role {}{}; the token below is shown only once:",
                issued.principal.id,
                issued.principal.name,
                issued.principal.role,
                issued
                    .principal
                    .source
                    .map(|s| format!(" for source '{s}'"))
                    .unwrap_or_default()
            );
            println!("{}", issued.token);
        }
        Command::Token {
            command: TokenCommand::List,
        } => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            println!(
                "{:>6}  {:<24} {:<7} {:<16} {:<7} created",
                "id", "name", "role", "source", "active"
            );
            for row in domain::auth::list_principals(&conn).await? {
                let p = &row.principal;
                println!(
                    "{:>6}  {:<24} {:<7} {:<16} {:<7} {}",
                    p.id,
                    p.name,
                    p.role.as_str(),
                    p.source.as_deref().unwrap_or("-"),
                    if row.active { "yes" } else { "revoked" },
                    row.created_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                );
            }
        }
        Command::Token {
            command: TokenCommand::Revoke { id },
        } => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            if !domain::auth::revoke(&conn, id).await? {
                anyhow::bail!("no principal {id}");
            }
            println!(
                "revoked principal {id}; servers accept its token for at most LEADPIPE_AUTH_CACHE_SECS more"
            );
        }
        Command::Source { command } => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            let keyring = cli.secrets.keyring()?;
            crate::cli::source::run_source(&conn, command, &cli.outbound.policy(), &keyring)
                .await?;
        }
        Command::Subscription { command } => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            let keyring = cli.secrets.keyring()?;
            crate::cli::subscription::run_subscription(
                &conn,
                &cli.outbound.policy(),
                &keyring,
                command,
            )
            .await?;
        }
        Command::Secrets {
            command: SecretsCommand::Rotate,
        } => {
            let keyring = cli.secrets.keyring()?;
            let Some(key_id) = keyring.current_key_id().map(str::to_owned) else {
                anyhow::bail!(domain::sealed::SealError::NoKey);
            };
            let conn = storage::open(&db.database_url, 1, true).await?;
            let report = domain::sealed::rotation::rotate(&conn, &keyring).await?;
            println!(
                "re-sealed under key '{key_id}': {} source secrets, {} pull auth values, {} \
                 subscription secrets, {} stored replies; {} already current; {} changed while \
                 rotating (run again)",
                report.source_secrets,
                report.pull_auth_values,
                report.subscription_secrets,
                report.stored_replies,
                report.already_current,
                report.raced,
            );
        }
        Command::Delivery { command } => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            crate::cli::delivery::run_delivery(&conn, command).await?;
        }
        Command::Inbox { command } => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            crate::cli::inbox::run_inbox(&conn, command).await?;
        }
        Command::Reconcile(args) => {
            let conn = storage::open(&db.database_url, 2, true).await?;
            let keyring = cli.secrets.keyring()?;
            crate::cli::reconcile::run(&conn, args, cli.outbound.policy(), keyring).await?;
        }
        Command::Demo(mut args) => {
            let keyring = cli.secrets.keyring()?;
            args.keyring = if keyring.can_seal() {
                keyring
            } else {
                domain::sealed::Keyring::insecure_dev()
            };
            crate::cli::demo::run(args).await?
        }
    }
    Ok(())
}

/// A domain error as the command line says it: field errors as
/// `field: message`, joined by `; `.
pub fn describe(err: domain::Error) -> anyhow::Error {
    match err {
        domain::Error::Invalid(fields) => anyhow::anyhow!(
            "{}",
            fields
                .iter()
                .map(|f| format!("{}: {}", f.field, f.message))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        other => other.into(),
    }
}

/// [`describe`], with `NotFound` said as "no such {what}".
pub fn describe_missing(what: &'static str) -> impl Fn(domain::Error) -> anyhow::Error {
    move |err| match err {
        domain::Error::NotFound => anyhow::anyhow!("no such {what}"),
        other => describe(other),
    }
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutdown requested");
}
