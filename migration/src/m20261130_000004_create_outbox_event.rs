use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000002_create_lead::Lead;

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
                    .table(OutboxEvent::Table)
                    .col(big_pk_auto(OutboxEvent::Id))
                    // Stable across every delivery attempt: receivers dedupe on it.
                    .col(string_len_uniq(OutboxEvent::EventId, 64))
                    .col(string_len(OutboxEvent::EventType, 64))
                    .col(big_integer_null(OutboxEvent::LeadId))
                    .col(json_binary(OutboxEvent::Payload))
                    .col(string_len_null(OutboxEvent::CorrelationId, 64))
                    .col(string_len(OutboxEvent::State, 16).default("pending"))
                    .col(timestamp_with_time_zone(OutboxEvent::CreatedAt))
                    .col(timestamp_with_time_zone_null(OutboxEvent::PublishedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("outbox_event_lead_fk")
                            .from(OutboxEvent::Table, OutboxEvent::LeadId)
                            .to(Lead::Table, Lead::Id)
                            .on_delete(ForeignKeyAction::SetNull),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("outbox_event_state_idx")
                    .table(OutboxEvent::Table)
                    .col(OutboxEvent::State)
                    .col(OutboxEvent::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(OutboxEvent::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum OutboxEvent {
    Table,
    Id,
    EventId,
    EventType,
    LeadId,
    Payload,
    CorrelationId,
    State,
    CreatedAt,
    PublishedAt,
}
