//! One key-check value per sealing key id: a known text sealed under that
//! key. A process started with other key material under the same id finds
//! out before it takes traffic, not when a webhook fails to verify.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SealingKeyCheck::Table)
                    .col(string_len(SealingKeyCheck::KeyId, 32).primary_key())
                    .col(text(SealingKeyCheck::CheckValue))
                    .col(timestamp_with_time_zone(SealingKeyCheck::CreatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(SealingKeyCheck::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum SealingKeyCheck {
    Table,
    KeyId,
    CheckValue,
    CreatedAt,
}
