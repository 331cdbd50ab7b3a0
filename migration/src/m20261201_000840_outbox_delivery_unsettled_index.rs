//! The publisher's work list: deliveries not yet settled, in outbox event
//! order. Partial, so a claim walks only what is still to send instead of
//! every delivered row before it (the claim took seconds once tens of
//! thousands were delivered).

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
                "CREATE INDEX outbox_delivery_unsettled_idx ON outbox_delivery (outbox_event_id, id) \
                 WHERE state IN ('pending', 'failed', 'delivering')",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX outbox_delivery_unsettled_idx")
            .await?;
        Ok(())
    }
}
