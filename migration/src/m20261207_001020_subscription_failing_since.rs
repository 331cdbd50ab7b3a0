//! A subscription remembers since when its deliveries have failed without
//! a success in between, so one whose receiver has been down for days can
//! be disabled (as Svix does after five) instead of staying `active`.

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
            .alter_table(
                Table::alter()
                    .table(Subscription::Table)
                    .add_column(timestamp_with_time_zone_null(Subscription::FailingSince))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Subscription::Table)
                    .drop_column(Subscription::FailingSince)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Subscription {
    Table,
    FailingSince,
}
