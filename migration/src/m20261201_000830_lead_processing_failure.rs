//! Lead processing's failures, one row per lead: the attempts at its current
//! version, the last error, when it is retried, or that it is dead. The lead
//! row stays the backlog (`processed_version < version`); this table only
//! says which of those leads must wait or were given up.

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
                    .table(LeadProcessingFailure::Table)
                    .col(big_integer(LeadProcessingFailure::LeadId).primary_key())
                    .col(big_integer(LeadProcessingFailure::Version))
                    .col(string_len(LeadProcessingFailure::State, 16))
                    .col(integer(LeadProcessingFailure::Attempts))
                    .col(text(LeadProcessingFailure::LastError))
                    .col(timestamp_with_time_zone_null(
                        LeadProcessingFailure::NextAttemptAt,
                    ))
                    .col(timestamp_with_time_zone(LeadProcessingFailure::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_processing_failure_lead_fk")
                            .from(LeadProcessingFailure::Table, LeadProcessingFailure::LeadId)
                            .to(Lead::Table, Lead::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(LeadProcessingFailure::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum LeadProcessingFailure {
    Table,
    LeadId,
    Version,
    State,
    Attempts,
    LastError,
    NextAttemptAt,
    UpdatedAt,
}
