use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000501_create_reconcile::ReconcileRun;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Records a reconcile page could not map to a lead, kept so they can
        // be re-applied after a mapping fix (the cursor has moved past them).
        manager
            .create_table(
                Table::create()
                    .table(ReconcileRejected::Table)
                    .col(big_pk_auto(ReconcileRejected::Id))
                    .col(string_len(ReconcileRejected::Source, 64))
                    // The run that rejected it last.
                    .col(big_integer(ReconcileRejected::RunId))
                    .col(json_binary(ReconcileRejected::Record))
                    // One row per distinct record of a source: a page read
                    // again does not add a second.
                    .col(string_len(ReconcileRejected::RecordSha256, 64))
                    .col(text(ReconcileRejected::Reason))
                    // rejected, resolved
                    .col(string_len(ReconcileRejected::State, 16))
                    .col(integer(ReconcileRejected::Retries).default(0))
                    .col(big_integer_null(ReconcileRejected::LeadId))
                    .col(timestamp_with_time_zone(ReconcileRejected::CreatedAt))
                    .col(timestamp_with_time_zone(ReconcileRejected::UpdatedAt))
                    .col(timestamp_with_time_zone_null(ReconcileRejected::ResolvedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("reconcile_rejected_run_fk")
                            .from(ReconcileRejected::Table, ReconcileRejected::RunId)
                            .to(ReconcileRun::Table, ReconcileRun::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_reconcile_rejected_source_record")
                    .table(ReconcileRejected::Table)
                    .col(ReconcileRejected::Source)
                    .col(ReconcileRejected::RecordSha256)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_reconcile_rejected_state")
                    .table(ReconcileRejected::Table)
                    .col(ReconcileRejected::State)
                    .col(ReconcileRejected::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ReconcileRejected::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum ReconcileRejected {
    Table,
    Id,
    Source,
    RunId,
    Record,
    RecordSha256,
    Reason,
    State,
    Retries,
    LeadId,
    CreatedAt,
    UpdatedAt,
    ResolvedAt,
}
