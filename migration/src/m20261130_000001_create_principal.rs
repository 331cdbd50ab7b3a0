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
                    .table(Principal::Table)
                    .col(big_pk_auto(Principal::Id))
                    .col(string_len(Principal::Name, 128))
                    .col(string_len(Principal::Role, 16))
                    .col(string_len_null(Principal::Source, 64))
                    .col(string_len_uniq(Principal::TokenHash, 64))
                    .col(boolean(Principal::Active).default(true))
                    .col(timestamp_with_time_zone(Principal::CreatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Principal::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum Principal {
    Table,
    Id,
    Name,
    Role,
    Source,
    TokenHash,
    Active,
    CreatedAt,
}
