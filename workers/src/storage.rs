//! Where the job tables live. PostgreSQL: apalis-postgres's `apalis` schema
//! in the app's database (it needs the `hstore` and `pgcrypto` extensions).
//! SQLite: apalis-sqlite's `Jobs` and `Workers` in a file of their own beside
//! the app's (`FILE-jobs`), written through one connection per process.
//!
//! Why a file of their own: SQLite has one writer per file, and apalis writes
//! on its own schedule (every fetch is an `UPDATE`, every heartbeat too),
//! outside the process's write turn (`domain::db::write_turn`). In the app's
//! file each of those writes could put a batch writer to sleep in the busy
//! handler, in steps of up to 100 ms. In their own file they lock only each
//! other, and their one connection queues them in the pool instead. Nothing
//! is lost with the file: the inbox and lead rows decide what runs, and the
//! sweeper queues again whatever a job row was meant to start. An in-memory
//! database keeps its jobs in itself (it belongs to one process).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use apalis_sqlite::SqlitePool;
use sea_orm::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sea_orm::{DatabaseBackend, DatabaseConnection, SqlxSqliteConnector};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("apalis-sqlite setup failed: {0}")]
    Sqlite(#[from] apalis_sqlite::Error),
    #[error("apalis-postgres setup failed: {0}")]
    Postgres(#[from] apalis_postgres::Error),
    #[error("opening the job database {path}: {cause}")]
    JobFile { path: PathBuf, cause: String },
    #[error("jobs need SQLite or PostgreSQL, not {0:?}")]
    Unsupported(DatabaseBackend),
}

/// Creates or upgrades the job tables. Run it with the schema migrations,
/// holding their lock. On SQLite apalis's setup also sets
/// `synchronous = OFF` on the connection it runs on, so it runs on a
/// connection of its own that is closed afterwards, never an app
/// connection.
pub async fn setup(db: &DatabaseConnection) -> Result<(), StorageError> {
    match db.get_database_backend() {
        DatabaseBackend::Sqlite => match sqlite_jobs_file(db) {
            Some(path) => {
                create_private(&path)?;
                let pool = SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(jobs_options(&path))
                    .await
                    .map_err(|e| job_file_error(&path, e))?;
                let applied = apalis_sqlite::SqliteStorage::setup(&pool).await;
                pool.close().await;
                applied?;
            }
            None => apalis_sqlite::SqliteStorage::setup(db.get_sqlite_connection_pool()).await?,
        },
        DatabaseBackend::Postgres => {
            apalis_postgres::PostgresStorage::setup(db.get_postgres_connection_pool()).await?;
        }
        other => return Err(StorageError::Unsupported(other)),
    }
    Ok(())
}

/// The file holding the job tables of the SQLite database `db`: its own
/// file's name with `-jobs` after it. `None` for PostgreSQL and for an
/// in-memory database.
pub fn sqlite_jobs_file(db: &DatabaseConnection) -> Option<PathBuf> {
    if db.get_database_backend() != DatabaseBackend::Sqlite {
        return None;
    }
    let options = db.get_sqlite_connection_pool().connect_options();
    let file = options.get_filename();
    if file.as_os_str().is_empty() || file.as_os_str() == ":memory:" {
        return None;
    }
    let mut jobs = file.as_os_str().to_owned();
    jobs.push("-jobs");
    Some(PathBuf::from(jobs))
}

/// The pool apalis's SQLite storage of `db` works through: one connection on
/// the jobs file, shared by every queue of this process, or `db`'s own pool
/// for an in-memory database. Connects on first use.
pub fn sqlite_job_pool(db: &DatabaseConnection) -> SqlitePool {
    let Some(path) = sqlite_jobs_file(db) else {
        return db.get_sqlite_connection_pool().clone();
    };
    static POOLS: LazyLock<Mutex<HashMap<PathBuf, SqlitePool>>> = LazyLock::new(Default::default);
    let mut pools = POOLS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    pools
        .entry(path)
        .or_insert_with_key(|path| {
            // No idle timeout or lifetime: sqlx's reaper is never started
            // (see api::storage::pool_options).
            SqlitePoolOptions::new()
                .max_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .acquire_timeout(Duration::from_secs(30))
                .connect_lazy_with(jobs_options(path))
        })
        .clone()
}

/// A connection to `db`'s job tables, for statements of our own on them
/// (pruning finished rows): `db` itself on PostgreSQL.
pub fn job_connection(db: &DatabaseConnection) -> DatabaseConnection {
    match db.get_database_backend() {
        DatabaseBackend::Sqlite => SqlxSqliteConnector::from_sqlx_sqlite_pool(sqlite_job_pool(db)),
        _ => db.clone(),
    }
}

/// The app's settings for a file it writes to: WAL, `synchronous = NORMAL`,
/// a busy timeout for writers in other processes, a small page cache.
fn jobs_options(path: &Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .pragma("cache_size", "-512")
        .statement_cache_capacity(32)
}

/// Creates `path` empty and readable by its owner alone, unless it exists:
/// SQLite would create it with the umask's mode (its `-wal` and `-shm` take
/// the file's).
fn create_private(path: &Path) -> Result<(), StorageError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(job_file_error(path, e)),
    }
}

fn job_file_error(path: &Path, cause: impl std::fmt::Display) -> StorageError {
    StorageError::JobFile {
        path: path.to_owned(),
        cause: cause.to_string(),
    }
}
