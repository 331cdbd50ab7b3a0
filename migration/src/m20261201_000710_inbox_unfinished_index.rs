//! The work list of the inbox workers: events not yet finished. Partial, so
//! claiming a batch (oldest first) and counting the backlog read an index
//! as small as the backlog, however many processed events the table keeps.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Same statement on SQLite and PostgreSQL.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX inbox_event_unfinished_idx ON inbox_event (id) \
                 WHERE state IN ('received', 'failed', 'processing')",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX inbox_event_unfinished_idx")
            .await?;
        Ok(())
    }
}
