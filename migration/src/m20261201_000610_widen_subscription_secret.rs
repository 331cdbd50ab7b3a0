use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DatabaseBackend;

/// Subscription secrets are stored sealed (`lpsec:v1:<key id>:<base64>`),
/// longer than the 128 characters a plaintext `whsec_` secret needed.
/// SQLite does not enforce lengths; PostgreSQL's column becomes text.
#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            manager
                .get_connection()
                .execute_unprepared("ALTER TABLE subscription ALTER COLUMN secret TYPE text")
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            manager
                .get_connection()
                .execute_unprepared(
                    "ALTER TABLE subscription ALTER COLUMN secret TYPE varchar(128)",
                )
                .await?;
        }
        Ok(())
    }
}
