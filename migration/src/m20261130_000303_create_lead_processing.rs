//! What the `process_lead` job needs: where round-robin assignment stands,
//! duplicate hints, and which version of a lead was last processed.

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
            .alter_table(
                Table::alter()
                    .table(Lead::Table)
                    .add_column(big_integer(LeadProcessing::ProcessedVersion).default(0))
                    .to_owned(),
            )
            .await?;
        // The work list of the lead processor; partial, so it stays as small
        // as the backlog (same statement on SQLite and PostgreSQL).
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX lead_unprocessed_idx ON lead (id) WHERE processed_version < version",
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("lead_phone_idx")
                    .table(Lead::Table)
                    .col(Lead::Phone)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(AssignmentCursor::Table)
                    .col(string_len(AssignmentCursor::Pool, 32).primary_key())
                    .col(big_integer(AssignmentCursor::Turn).default(0))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(LeadDuplicate::Table)
                    .col(big_integer(LeadDuplicate::LeadId))
                    .col(big_integer(LeadDuplicate::OtherLeadId))
                    .col(string_len(LeadDuplicate::Reason, 16))
                    .col(timestamp_with_time_zone(LeadDuplicate::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(LeadDuplicate::LeadId)
                            .col(LeadDuplicate::OtherLeadId),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_duplicate_lead_fk")
                            .from(LeadDuplicate::Table, LeadDuplicate::LeadId)
                            .to(Lead::Table, Lead::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_duplicate_other_fk")
                            .from(LeadDuplicate::Table, LeadDuplicate::OtherLeadId)
                            .to(Lead::Table, Lead::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(LeadDuplicate::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(AssignmentCursor::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Lead::Table)
                    .drop_column(LeadProcessing::ProcessedVersion)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum LeadProcessing {
    ProcessedVersion,
}

#[derive(DeriveIden)]
pub enum AssignmentCursor {
    Table,
    Pool,
    Turn,
}

#[derive(DeriveIden)]
pub enum LeadDuplicate {
    Table,
    LeadId,
    OtherLeadId,
    Reason,
    CreatedAt,
}
