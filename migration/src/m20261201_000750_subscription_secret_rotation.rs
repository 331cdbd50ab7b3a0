use sea_orm_migration::{prelude::*, schema::*};

/// Secret rotation keeps the replaced secret (sealed) until the end of its
/// overlap window, so receivers can switch over without missing a delivery.
/// A test event goes to one subscription only: the outbox row names it.
/// A subscription gets a `version` for `If-Match` on PATCH, like leads.
/// Each delivery keeps how long its last attempt took, for per-subscription
/// latency in the stats.
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
                    .add_column(text_null(Subscription::PreviousSecret))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Subscription::Table)
                    .add_column(timestamp_with_time_zone_null(
                        Subscription::PreviousSecretUntil,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Subscription::Table)
                    .add_column(big_integer(Subscription::Version).default(1))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(OutboxEvent::Table)
                    .add_column(big_integer_null(OutboxEvent::TargetSubscriptionId))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(OutboxDelivery::Table)
                    .add_column(integer_null(OutboxDelivery::LastDurationMs))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (table, column) in [
            (
                Subscription::Table.into_iden(),
                Subscription::PreviousSecret.into_iden(),
            ),
            (
                Subscription::Table.into_iden(),
                Subscription::PreviousSecretUntil.into_iden(),
            ),
            (
                Subscription::Table.into_iden(),
                Subscription::Version.into_iden(),
            ),
            (
                OutboxEvent::Table.into_iden(),
                OutboxEvent::TargetSubscriptionId.into_iden(),
            ),
            (
                OutboxDelivery::Table.into_iden(),
                OutboxDelivery::LastDurationMs.into_iden(),
            ),
        ] {
            manager
                .alter_table(Table::alter().table(table).drop_column(column).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Subscription {
    Table,
    PreviousSecret,
    PreviousSecretUntil,
    Version,
}

#[derive(DeriveIden)]
enum OutboxEvent {
    Table,
    TargetSubscriptionId,
}

#[derive(DeriveIden)]
enum OutboxDelivery {
    Table,
    LastDurationMs,
}
