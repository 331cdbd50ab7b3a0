//! `leadpipe …`: serve, migrate, and the admin commands.

use clap::{CommandFactory, Parser, Subcommand};
use domain::store::Store;

pub mod delivery;
pub mod demo;
mod entry;
pub mod import;
pub mod inbox;
pub mod lead;
pub mod output;
pub mod reconcile;
pub mod secrets;
pub mod settings_doc;
pub mod source;
pub mod subscription;
pub mod task;
pub mod team;
pub mod token;
pub mod user;

pub use entry::main;

use self::inbox::InboxCommand;
use self::source::SourceCommand;
use crate::config::{
    DbSettings, HttpSettings, LogSettings, OutboundSettings, RetiredWorkerSettings, SecretSettings,
};
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
    #[command(flatten)]
    pub logs: LogSettings,
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
        workers: workers::WorkerSettings,
        #[command(flatten)]
        retired: RetiredWorkerSettings,
    },
    /// Run only the background workers (inbox processing, sweeper).
    Work {
        /// Do not apply pending migrations on start (run `leadpipe migrate` yourself).
        #[arg(long, env = "LEADPIPE_NO_MIGRATE")]
        no_migrate: bool,
        #[command(flatten)]
        metrics: crate::config::MetricsSettings,
        #[command(flatten)]
        workers: workers::WorkerSettings,
        #[command(flatten)]
        retired: RetiredWorkerSettings,
    },
    /// Apply pending database migrations and exit.
    Migrate,
    /// Delete what has outlived its retention (expired Idempotency-Keys) and exit.
    Prune,
    /// Copy the SQLite database to a new file (0600) while the service runs:
    /// a consistent snapshot. For PostgreSQL use `pg_dump` (see README,
    /// "Data protection").
    Backup {
        /// The copy; must not exist yet.
        file: std::path::PathBuf,
    },
    /// Import leads from a CSV (header row) or NDJSON file, through the same
    /// write path as the API; safe to re-run (see README, "Bulk import").
    Import(import::ImportArgs),
    /// Manage API tokens.
    #[command(mut_subcommand("create", describe_token_create))]
    Token {
        #[command(subcommand)]
        command: token::TokenCommand,
    },
    /// Manage users: people who sign in to the page.
    User {
        #[command(subcommand)]
        command: user::UserCommand,
    },
    /// Manage webhook sources.
    Source {
        #[command(subcommand)]
        command: SourceCommand,
    },
    /// Manage downstream subscriptions to lead events.
    Subscription {
        #[command(subcommand)]
        command: subscription::SubscriptionCommand,
    },
    /// Inspect and retry outgoing webhook deliveries.
    Delivery {
        #[command(subcommand)]
        command: delivery::DeliveryCommand,
    },
    /// Sealed secrets: re-seal every stored secret under the current key.
    Secrets {
        #[command(subcommand)]
        command: secrets::SecretsCommand,
    },
    /// Teams' working hours, response targets and escalation.
    Team {
        #[command(subcommand)]
        command: team::TeamCommand,
    },
    /// Reports: speed to lead.
    Report {
        #[command(subcommand)]
        command: team::ReportCommand,
    },
    /// List follow-up tasks (who owes what by when).
    Task {
        #[command(subcommand)]
        command: task::TaskCommand,
    },
    /// Erase a lead (and bury its natural key), lift a tombstone, or list
    /// and retry failed lead processing.
    Lead {
        #[command(subcommand)]
        command: lead::LeadCommand,
    },
    /// Write every lead the filters match to stdout as CSV or NDJSON.
    Export(lead::ExportArgs),
    /// Inspect and retry webhook inbox events.
    Inbox {
        #[command(subcommand)]
        command: InboxCommand,
    },
    /// Pull a source's records since its cursor through the write path,
    /// repairing what its webhooks missed (see README, "Reconcile").
    Reconcile(reconcile::ReconcileArgs),
    /// The whole pipeline in one command, on a fresh SQLite file: a fake
    /// source, signed webhooks (some redelivered, some dropped), a reconcile.
    Demo(demo::DemoArgs),
    /// Print a shell completion script (e.g. `leadpipe completions bash >
    /// /etc/bash_completion.d/leadpipe`).
    Completions {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `leadpipe man | man -l -`).
    Man,
}

/// `token create --name` and `--role` described. (Here rather than beside
/// the flags in `token.rs`, which is being reworked elsewhere: move them
/// there then.)
fn describe_token_create(create: clap::Command) -> clap::Command {
    create
        .mut_arg("name", |arg| {
            arg.help("A name people recognise: who or what uses the token")
        })
        .mut_arg("role", |arg| {
            arg.help("What the token may do; intake needs --source")
        })
}

impl Cli {
    /// A setting given empty (`LEADPIPE_SPOOL_DIR=`, a line of the
    /// environment template uncommented as it is) is left unset: its
    /// default, not a refusal to start.
    pub fn empty_means_unset(&mut self) {
        self.secrets.empty_means_unset();
        match &mut self.command {
            Command::Serve { http, .. } => http.empty_means_unset(),
            Command::Work { metrics, .. } => {
                crate::config::unset_if_empty(&mut metrics.bind);
            }
            _ => {}
        }
    }
}

/// Accepts exactly these names (from the domain's own list): `--help` and
/// completions show them, and clap refuses any other value before the
/// command runs (exit code 2).
pub fn one_of(
    names: impl IntoIterator<Item = &'static str>,
) -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(names)
}

/// Exit codes, as `docs/guide/cli.md` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Any other failure.
    Other = 1,
    /// A bad command line or a value the command refuses (clap uses 2 too).
    Usage = 2,
    NotFound = 3,
    /// The change collides with the current state (a duplicate, a race).
    Conflict = 4,
    /// The database (or another service) could not be reached.
    Unavailable = 5,
}

/// A failure with the exit code it deserves.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn error(exit: Exit, message: impl Into<String>) -> anyhow::Error {
        Self {
            exit,
            message: message.into(),
        }
        .into()
    }
}

/// The exit code for an error: the first cause in its chain that says.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    let code = err.chain().find_map(|cause| {
        if let Some(failure) = cause.downcast_ref::<Failure>() {
            return Some(failure.exit);
        }
        if cause.is::<storage::Unreachable>() {
            return Some(Exit::Unavailable);
        }
        if cause.is::<storage::WriterTaken>() {
            return Some(Exit::Conflict);
        }
        if let Some(err) = cause.downcast_ref::<domain::Error>() {
            return match err {
                domain::Error::NotFound => Some(Exit::NotFound),
                domain::Error::Invalid(_) => Some(Exit::Usage),
                domain::Error::Conflict(_)
                | domain::Error::InboxEventErased { .. }
                | domain::Error::AlreadyConverted(_)
                | domain::Error::LeadMerged { .. }
                | domain::Error::PreconditionFailed { .. } => Some(Exit::Conflict),
                domain::Error::Db(db) if domain::error::is_transient_db(db) => {
                    Some(Exit::Unavailable)
                }
                _ => None,
            };
        }
        if let Some(db) = cause.downcast_ref::<sea_orm::DbErr>() {
            return domain::error::is_transient_db(db).then_some(Exit::Unavailable);
        }
        if let Some(sqlx) = cause.downcast_ref::<sea_orm::sqlx::Error>() {
            return matches!(
                sqlx,
                sea_orm::sqlx::Error::Io(_)
                    | sea_orm::sqlx::Error::PoolTimedOut
                    | sea_orm::sqlx::Error::Tls(_)
            )
            .then_some(Exit::Unavailable);
        }
        None
    });
    code.unwrap_or(Exit::Other) as u8
}

/// Parses the command line and runs it (logging is the caller's).
pub async fn run() -> anyhow::Result<()> {
    run_with(Cli::parse()).await
}

pub async fn run_with(mut cli: Cli) -> anyhow::Result<()> {
    cli.empty_means_unset();
    let db = &cli.db;
    // The keys for commands that never hash a natural key nor open a secret
    // (tokens, deliveries, pruning): a bad key setting is reported by the
    // commands that need the keys, not by these.
    let unused_keys = || cli.secrets.keyring().unwrap_or_default();
    match cli.command {
        Command::Completions { shell } => {
            // Generated into memory: a closed pipe is an error, not a panic.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "leadpipe", &mut script);
            std::io::Write::write_all(&mut std::io::stdout(), &script)?;
        }
        Command::Man => {
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
        }
        Command::Serve {
            http,
            no_migrate,
            no_workers,
            workers,
            retired: _,
        } => {
            // Before anything is logged: a second writer says only why not.
            let _writer = storage::sqlite_writer(&db.database_url, "serve")?;
            let keyring = cli.secrets.keyring()?;
            crate::config::log_keyring(&keyring);
            let settings = workers
                .with_outbound(cli.outbound.policy())
                .with_keyring(&keyring);
            if !no_workers {
                // Refuse bad worker settings before serving anything.
                settings.validate().map_err(anyhow::Error::msg)?;
            }
            let mut http = http;
            http.outbound_allow = cli.outbound.outbound_allow.clone();
            http.reconcile = settings.reconcile.clone();
            http.keyring = keyring;
            let conn = db
                .open(db.max_connections()?, !no_migrate, &http.keyring)
                .await?;
            refuse_keys_that_do_not_open(&conn, &http.keyring).await?;
            let app = Application::build(conn.clone(), http.clone())?;
            let imports = app.imports();
            let import_grace = std::time::Duration::from_secs(http.import_shutdown_grace_secs);
            tracing::info!(bind = %http.bind, port = app.port(), "leadpipe listening");
            if let Some(port) = app.metrics_port() {
                tracing::info!(port, "metrics on their own listener (no token)");
            }
            if no_workers {
                app.run_until_stopped().await?;
            } else {
                // On PostgreSQL the workers get connections of their own, so
                // receipts holding every pooled connection cannot starve
                // processing. (SQLite has one writer, taken in turns anyway.)
                // The same store otherwise: the API's commits wake these
                // workers directly.
                let worker_conn = match storage::Backend::of(&db.database_url)? {
                    storage::Backend::Postgres => {
                        storage::another_pool(
                            &conn,
                            &db.database_url,
                            settings.connections_wanted(),
                        )
                        .await?
                    }
                    storage::Backend::Sqlite => conn,
                };
                // actix stops on SIGINT/SIGTERM by itself; the workers get
                // the same signals and finish their in-flight jobs.
                let work = workers::runtime::run(worker_conn, settings, shutdown_signal());
                let (served, worked) = tokio::join!(app.run_until_stopped(), work);
                served?;
                worked?;
            }
            // Imports outlive the requests that started them.
            imports.drain(import_grace).await;
        }
        Command::Work {
            no_migrate,
            metrics,
            workers,
            retired: _,
        } => {
            let _writer = storage::sqlite_writer(&db.database_url, "work")?;
            let keyring = cli.secrets.keyring()?;
            crate::config::log_keyring(&keyring);
            let conn = db
                .open(db.max_connections()?, !no_migrate, &keyring)
                .await?;
            refuse_keys_that_do_not_open(&conn, &keyring).await?;
            let settings = workers
                .with_outbound(cli.outbound.policy())
                .with_keyring(&keyring);
            let metrics_server = match &metrics.bind {
                Some(bind) => {
                    crate::http::metrics::handle();
                    let listener = std::net::TcpListener::bind(bind)?;
                    tracing::info!(address = %listener.local_addr()?, "metrics listening");
                    let every = metrics.refresh();
                    let gauges = crate::http::metrics::Gauges::start(conn.clone(), every);
                    Some(crate::routes::metrics::metrics_only_server(
                        listener, gauges,
                    )?)
                }
                None => None,
            };
            match metrics_server {
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
            let conn = db.open(1, true, &unused_keys()).await?;
            let deleted = workers::housekeeping::sweep_once(&conn).await?;
            println!("deleted {deleted} expired idempotency keys");
        }
        Command::Backup { file } => {
            let bytes = storage::backup(&db.database_url, &file).await?;
            println!("backed up to {} ({bytes} bytes)", file.display());
        }
        Command::Import(args) => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(2, true, &keyring).await?;
            import::run(&conn, args).await?;
        }
        Command::Migrate => {
            db.migrate().await?;
            println!("migrations applied");
        }
        Command::Token { command } => {
            let conn = db.open(1, true, &unused_keys()).await?;
            token::run_token(&conn, command).await?;
        }
        Command::User { command } => {
            let conn = db.open(1, true, &unused_keys()).await?;
            user::run_user(&conn, command).await?;
        }
        Command::Source { command } => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(1, true, &keyring).await?;
            // A secret sealed under a wrong key would stop every process
            // that has the right one (without a key nothing is sealed).
            if !keyring.key_ids().is_empty() {
                refuse_keys_that_do_not_open(&conn, &keyring).await?;
            }
            source::run_source(&conn, command, &cli.outbound.policy(), &keyring).await?;
        }
        Command::Subscription { command } => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(1, true, &keyring).await?;
            if !keyring.key_ids().is_empty() {
                refuse_keys_that_do_not_open(&conn, &keyring).await?;
            }
            subscription::run_subscription(&conn, &cli.outbound.policy(), &keyring, command)
                .await?;
        }
        Command::Secrets { command } => {
            let keyring = cli.secrets.keyring()?;
            secrets::run_secrets(db, &keyring, command).await?;
        }
        Command::Delivery { command } => {
            let conn = db.open(1, true, &unused_keys()).await?;
            delivery::run_delivery(&conn, command).await?;
        }
        Command::Team { command } => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(1, true, &keyring).await?;
            team::run_team(&conn, command).await?;
        }
        Command::Report { command } => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(1, true, &keyring).await?;
            team::run_report(&conn, command).await?;
        }
        Command::Task { command } => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(1, true, &keyring).await?;
            task::run_task(&conn, command).await?;
        }
        Command::Lead { command } => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(1, true, &keyring).await?;
            lead::run_lead(&conn, command).await?;
        }
        Command::Export(args) => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(1, true, &keyring).await?;
            lead::run_export(&conn, args).await?;
        }
        Command::Inbox { command } => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(1, true, &keyring).await?;
            inbox::run_inbox(&conn, command).await?;
        }
        Command::Reconcile(args) => {
            let keyring = cli.secrets.keyring()?;
            let conn = db.open(2, true, &keyring).await?;
            reconcile::run(&conn, args, cli.outbound.policy(), keyring).await?;
        }
        Command::Demo(mut args) => {
            let keyring = cli.secrets.keyring()?;
            args.keyring = if keyring.can_seal() {
                keyring
            } else {
                domain::sealed::Keyring::insecure_dev()
            };
            demo::run(args).await?
        }
    }
    Ok(())
}

/// A domain error as the command line says it: field errors as
/// `field: message`, joined by `; ` (exit code 2).
pub fn describe(err: domain::Error) -> anyhow::Error {
    match err {
        domain::Error::Invalid(fields) => Failure::error(
            Exit::Usage,
            fields
                .iter()
                .map(|f| format!("{}: {}", f.field, f.message))
                .collect::<Vec<_>>()
                .join("; "),
        ),
        other => other.into(),
    }
}

/// [`describe`], with `NotFound` said as "no such {what}" (exit code 3).
pub fn describe_missing(what: &'static str) -> impl Fn(domain::Error) -> anyhow::Error {
    move |err| match err {
        domain::Error::NotFound => Failure::error(Exit::NotFound, format!("no such {what}")),
        other => describe(other),
    }
}

/// Before a process takes traffic: the configured keys must open what is
/// stored (a wrong key under a known id was otherwise found only when every
/// webhook to a sealed source answered 500).
async fn refuse_keys_that_do_not_open(
    conn: &Store,
    keyring: &domain::sealed::Keyring,
) -> anyhow::Result<()> {
    if let Err(mismatch) = domain::sealed::key_check::verify(conn, keyring).await? {
        anyhow::bail!("refusing to start: {mismatch}");
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_has_its_exit_code() {
        let conflict: anyhow::Error = domain::Error::Conflict("taken".into()).into();
        assert_eq!(exit_code(&conflict), 4);
        let missing: anyhow::Error = domain::Error::NotFound.into();
        assert_eq!(exit_code(&missing), 3);
        let lost: anyhow::Error = domain::Error::Db(sea_orm::DbErr::Conn(
            sea_orm::RuntimeErr::Internal("gone".into()),
        ))
        .into();
        assert_eq!(exit_code(&lost), 5);
        assert_eq!(
            exit_code(&describe(domain::Error::invalid("url", "bad"))),
            2
        );
        assert_eq!(exit_code(&anyhow::anyhow!("disk full")), 1);
        let wrapped = Failure::error(Exit::NotFound, "no such thing").context("while removing");
        assert_eq!(exit_code(&wrapped), 3, "found anywhere in the chain");
    }
}
