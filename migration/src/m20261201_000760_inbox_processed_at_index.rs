//! An index on when inbox events finished processing: the ops time series
//! counts processed events per minute over the last hour or day, and without
//! it each look at the Ops tab scans the whole inbox.

use sea_orm_migration::prelude::*;

use crate::m20261130_000102_create_inbox_event::InboxEvent;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("inbox_event_processed_at_idx")
                    .table(InboxEvent::Table)
                    .col(InboxEvent::ProcessedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("inbox_event_processed_at_idx")
                    .table(InboxEvent::Table)
                    .to_owned(),
            )
            .await
    }
}
