use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000004_create_outbox_event::OutboxEvent;
use crate::m20261130_000301_create_subscription::Subscription;

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
                    .table(OutboxDelivery::Table)
                    .col(big_pk_auto(OutboxDelivery::Id))
                    .col(big_integer(OutboxDelivery::OutboxEventId))
                    .col(big_integer(OutboxDelivery::SubscriptionId))
                    // Deliveries of one lead to one subscription go out in id order.
                    .col(big_integer_null(OutboxDelivery::LeadId))
                    .col(string_len(OutboxDelivery::State, 16).default("pending"))
                    .col(integer(OutboxDelivery::Attempts).default(0))
                    .col(timestamp_with_time_zone(OutboxDelivery::NextAttemptAt))
                    .col(timestamp_with_time_zone_null(OutboxDelivery::LockedUntil))
                    .col(small_integer_null(OutboxDelivery::LastStatus))
                    .col(string_len_null(OutboxDelivery::LastError, 512))
                    .col(timestamp_with_time_zone_null(OutboxDelivery::DeliveredAt))
                    .col(timestamp_with_time_zone(OutboxDelivery::CreatedAt))
                    .col(timestamp_with_time_zone(OutboxDelivery::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("outbox_delivery_event_fk")
                            .from(OutboxDelivery::Table, OutboxDelivery::OutboxEventId)
                            .to(OutboxEvent::Table, OutboxEvent::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("outbox_delivery_subscription_fk")
                            .from(OutboxDelivery::Table, OutboxDelivery::SubscriptionId)
                            .to(Subscription::Table, Subscription::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // Fan-out may run twice (two workers, a retry): the key makes it harmless.
        manager
            .create_index(
                Index::create()
                    .name("outbox_delivery_event_subscription_key")
                    .table(OutboxDelivery::Table)
                    .col(OutboxDelivery::OutboxEventId)
                    .col(OutboxDelivery::SubscriptionId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("outbox_delivery_due_idx")
                    .table(OutboxDelivery::Table)
                    .col(OutboxDelivery::State)
                    .col(OutboxDelivery::NextAttemptAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("outbox_delivery_order_idx")
                    .table(OutboxDelivery::Table)
                    .col(OutboxDelivery::SubscriptionId)
                    .col(OutboxDelivery::LeadId)
                    .col(OutboxDelivery::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(OutboxDelivery::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum OutboxDelivery {
    Table,
    Id,
    OutboxEventId,
    SubscriptionId,
    LeadId,
    State,
    Attempts,
    NextAttemptAt,
    LockedUntil,
    LastStatus,
    LastError,
    DeliveredAt,
    CreatedAt,
    UpdatedAt,
}
