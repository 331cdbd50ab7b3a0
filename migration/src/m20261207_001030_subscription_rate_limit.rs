//! A subscription may cap its deliveries a second (`rate_limit`), for a
//! receiver that cannot take more. Every publisher, in any process, takes
//! its deliveries in turns: a turn is `rate_next_at`, moved forward with a
//! compare-and-set in the database, so the cap holds across processes.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(Subscription::Table)
                    .add_column(integer_null(Subscription::RateLimit))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Subscription::Table)
                    .add_column(timestamp_with_time_zone_null(Subscription::RateNextAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Subscription::RateLimit, Subscription::RateNextAt] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Subscription::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Subscription {
    Table,
    RateLimit,
    RateNextAt,
}
