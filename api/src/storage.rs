//! Opening the database: SQLite file by default, PostgreSQL in production.
//! Schema changes run on a dedicated one-connection pool before the app pool
//! opens, so no pooled SQLite connection caches a half-built schema (PITFALLS 2-3).

use std::str::FromStr;
use std::time::Duration;

use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sea_orm::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sea_orm::{DatabaseConnection, SqlxPostgresConnector, SqlxSqliteConnector};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else {
            anyhow::bail!("DATABASE_URL must start with sqlite: or postgres://")
        }
    }
}

fn sqlite_options(url: &str) -> anyhow::Result<SqliteConnectOptions> {
    Ok(SqliteConnectOptions::from_str(url)?
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true)
        // Memory, not speed: each pooled connection keeps its own page cache
        // and prepared statements (group commit prepares one per batch
        // size), and SQLite's defaults (2 MiB, 100) multiplied by the pool
        // were most of the server's resident memory. The OS caches the file.
        .pragma("cache_size", "-1024")
        .statement_cache_capacity(32))
}

/// Applies every pending migration, and creates or upgrades the job tables
/// (apalis) on the same one-connection pool.
pub async fn migrate(url: &str) -> anyhow::Result<()> {
    let db = open_pool(url, 1).await?;
    workers::storage::setup(&db).await?;
    Migrator::up(&db, None).await?;
    db.close().await?;
    Ok(())
}

/// Opens the application's pool, migrating first when asked.
pub async fn open(
    url: &str,
    max_connections: u32,
    run_migrations: bool,
) -> anyhow::Result<DatabaseConnection> {
    if run_migrations {
        migrate(url).await?;
    }
    open_pool(url, max_connections).await
}

async fn open_pool(url: &str, max_connections: u32) -> anyhow::Result<DatabaseConnection> {
    let acquire = Duration::from_secs(10);
    Ok(match Backend::of(url)? {
        Backend::Sqlite => {
            let pool = SqlitePoolOptions::new()
                .max_connections(max_connections)
                .acquire_timeout(acquire)
                .connect_with(sqlite_options(url)?)
                .await?;
            SqlxSqliteConnector::from_sqlx_sqlite_pool(pool)
        }
        Backend::Postgres => {
            let pool = PgPoolOptions::new()
                .max_connections(max_connections)
                .acquire_timeout(acquire)
                .connect_with(PgConnectOptions::from_str(url)?)
                .await?;
            SqlxPostgresConnector::from_sqlx_postgres_pool(pool)
        }
    })
}
