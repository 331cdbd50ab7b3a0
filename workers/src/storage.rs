//! The job tables live in the app's database: apalis-sqlite's `Jobs` and
//! `Workers`, or apalis-postgres's `apalis` schema (which needs the `hstore`
//! and `pgcrypto` extensions).

use sea_orm::{DatabaseBackend, DatabaseConnection};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("apalis-sqlite setup failed: {0}")]
    Sqlite(#[from] apalis_sqlite::Error),
    #[error("apalis-postgres setup failed: {0}")]
    Postgres(#[from] apalis_postgres::Error),
    #[error("jobs need SQLite or PostgreSQL, not {0:?}")]
    Unsupported(DatabaseBackend),
}

/// Creates or upgrades the job tables. Run it with the schema migrations, on
/// their one-connection pool: on SQLite it also sets `synchronous = OFF` on
/// the connection it runs on, which must not be an app connection.
pub async fn setup(db: &DatabaseConnection) -> Result<(), StorageError> {
    match db.get_database_backend() {
        DatabaseBackend::Sqlite => {
            apalis_sqlite::SqliteStorage::setup(db.get_sqlite_connection_pool()).await?;
        }
        DatabaseBackend::Postgres => {
            apalis_postgres::PostgresStorage::setup(db.get_postgres_connection_pool()).await?;
        }
        other => return Err(StorageError::Unsupported(other)),
    }
    Ok(())
}
