use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000002_create_lead::Lead;
use crate::m20261130_000101_create_source::Source;

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
                    .table(InboxEvent::Table)
                    .col(big_pk_auto(InboxEvent::Id))
                    .col(string_len(InboxEvent::Source, 64))
                    // The sender's identity of the EVENT (not of the delivery
                    // attempt), or a hash of source and body when it has none.
                    .col(string_len(InboxEvent::EventId, 255))
                    .col(string_len(InboxEvent::EventIdFrom, 16))
                    .col(string_len_null(InboxEvent::EventType, 255))
                    .col(json_binary(InboxEvent::Headers))
                    .col(blob(InboxEvent::Body))
                    .col(string_len(InboxEvent::State, 16))
                    .col(integer(InboxEvent::Deliveries).default(1))
                    .col(integer(InboxEvent::Attempts).default(0))
                    .col(integer(InboxEvent::Retries).default(0))
                    .col(text_null(InboxEvent::LastError))
                    .col(timestamp_with_time_zone_null(InboxEvent::NextAttemptAt))
                    .col(timestamp_with_time_zone_null(InboxEvent::EnqueuedAt))
                    .col(timestamp_with_time_zone_null(InboxEvent::LockedAt))
                    .col(string_len_null(InboxEvent::LockedBy, 128))
                    .col(string_len_null(InboxEvent::Outcome, 16))
                    .col(big_integer_null(InboxEvent::LeadId))
                    .col(string_len_null(InboxEvent::CorrelationId, 64))
                    .col(timestamp_with_time_zone(InboxEvent::ReceivedAt))
                    .col(timestamp_with_time_zone(InboxEvent::LastDeliveryAt))
                    .col(timestamp_with_time_zone_null(InboxEvent::ProcessedAt))
                    .col(timestamp_with_time_zone(InboxEvent::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("inbox_event_source_fk")
                            .from(InboxEvent::Table, InboxEvent::Source)
                            .to(Source::Table, Source::Name),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("inbox_event_lead_fk")
                            .from(InboxEvent::Table, InboxEvent::LeadId)
                            .to(Lead::Table, Lead::Id)
                            .on_delete(ForeignKeyAction::SetNull),
                    )
                    .to_owned(),
            )
            .await?;
        // Dedupe: a redelivered event hits this key and is answered from the
        // original row, whatever the delivery attempt looked like.
        manager
            .create_index(
                Index::create()
                    .name("inbox_event_source_event_id_key")
                    .table(InboxEvent::Table)
                    .col(InboxEvent::Source)
                    .col(InboxEvent::EventId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        // The sweeper looks for work by state and due time; ops list by
        // state/source, newest first.
        for (name, cols) in [
            (
                "inbox_event_state_due_idx",
                vec![InboxEvent::State, InboxEvent::NextAttemptAt],
            ),
            (
                "inbox_event_source_id_idx",
                vec![InboxEvent::Source, InboxEvent::Id],
            ),
            (
                "inbox_event_received_at_idx",
                vec![InboxEvent::ReceivedAt, InboxEvent::Id],
            ),
        ] {
            let mut index = Index::create();
            index.name(name).table(InboxEvent::Table);
            for col in cols {
                index.col(col);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(InboxEvent::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum InboxEvent {
    Table,
    Id,
    Source,
    EventId,
    EventIdFrom,
    EventType,
    Headers,
    Body,
    State,
    Deliveries,
    Attempts,
    Retries,
    LastError,
    NextAttemptAt,
    EnqueuedAt,
    LockedAt,
    LockedBy,
    Outcome,
    LeadId,
    CorrelationId,
    ReceivedAt,
    LastDeliveryAt,
    ProcessedAt,
    UpdatedAt,
}
