//! Indexes for per-lead delivery order by outbox event: a delivery waits for
//! earlier events of its lead (by event id) that are not yet fanned out or
//! not yet settled for its subscription.

use sea_orm_migration::prelude::*;

use crate::m20261130_000004_create_outbox_event::OutboxEvent;
use crate::m20261130_000302_create_outbox_delivery::OutboxDelivery;

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
                    .name("outbox_event_lead_idx")
                    .table(OutboxEvent::Table)
                    .col(OutboxEvent::LeadId)
                    .col(OutboxEvent::Id)
                    .to_owned(),
            )
            .await?;
        // Replaces the (subscription, lead, delivery id) index: order is now
        // the event's, not the delivery's.
        manager
            .drop_index(
                Index::drop()
                    .name("outbox_delivery_order_idx")
                    .table(OutboxDelivery::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("outbox_delivery_event_order_idx")
                    .table(OutboxDelivery::Table)
                    .col(OutboxDelivery::SubscriptionId)
                    .col(OutboxDelivery::LeadId)
                    .col(OutboxDelivery::OutboxEventId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("outbox_delivery_event_order_idx")
                    .table(OutboxDelivery::Table)
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
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("outbox_event_lead_idx")
                    .table(OutboxEvent::Table)
                    .to_owned(),
            )
            .await
    }
}
