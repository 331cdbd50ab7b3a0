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
                    .table(Subscription::Table)
                    .col(big_pk_auto(Subscription::Id))
                    .col(string_len(Subscription::Url, 2048))
                    .col(string_len_null(Subscription::Description, 255))
                    // JSON array of event types; empty means every type.
                    .col(json_binary(Subscription::EventTypes))
                    // Needed in clear to sign; shown to the client once, never returned again.
                    .col(string_len(Subscription::Secret, 128))
                    .col(string_len(Subscription::State, 16).default("active"))
                    .col(string_len_null(Subscription::DisabledReason, 255))
                    .col(timestamp_with_time_zone(Subscription::CreatedAt))
                    .col(timestamp_with_time_zone(Subscription::UpdatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Subscription::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum Subscription {
    Table,
    Id,
    Url,
    Description,
    EventTypes,
    Secret,
    State,
    DisabledReason,
    CreatedAt,
    UpdatedAt,
}
