//! `leadpipe …`: serve, migrate, and the admin commands.

use clap::{Parser, Subcommand};
use domain::auth::Role;

use crate::config::{DbSettings, HttpSettings, WorkerSettings};
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
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API (migrating the database first unless --no-migrate).
    Serve {
        #[command(flatten)]
        http: HttpSettings,
        #[command(flatten)]
        workers: WorkerSettings,
        /// Run the API only, no background work (several processes can share one PostgreSQL).
        #[arg(long, env = "LEADPIPE_NO_WORKERS")]
        no_workers: bool,
        /// Do not apply pending migrations on start (run `leadpipe migrate` yourself).
        #[arg(long, env = "LEADPIPE_NO_MIGRATE")]
        no_migrate: bool,
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
    Import(crate::import_cmd::ImportArgs),
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
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
}

pub async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let db = &cli.db;
    match cli.command {
        Command::Serve {
            http,
            workers,
            no_workers,
            no_migrate,
        } => {
            let conn = storage::open(&db.database_url, db.db_max_connections, !no_migrate).await?;
            let app = Application::build(conn.clone(), http.clone())?;
            if !no_workers {
                crate::background::spawn(&conn, &http, &workers)?;
            }
            tracing::info!(bind = %http.bind, port = app.port(), "leadpipe listening");
            app.run_until_stopped().await?;
        }
        Command::Prune => {
            let conn = storage::open(&db.database_url, 1, true).await?;
            let deleted = workers::sweeper::sweep_once(&conn).await?;
            println!("deleted {deleted} expired idempotency keys");
        }
        Command::BenchSql { rows } => {
            println!("{}", domain::ingest::upsert_sql_for_benchmark(rows.max(1))?);
        }
        Command::Import(args) => {
            let conn = storage::open(&db.database_url, 2, true).await?;
            crate::import_cmd::run(&conn, args).await?;
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
    }
    Ok(())
}
