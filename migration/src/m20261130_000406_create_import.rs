use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000001_create_principal::Principal;
use crate::m20261130_000002_create_lead::Lead;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One row per run of `leadpipe import` / `POST /api/imports`, with its counts.
        manager
            .create_table(
                Table::create()
                    .table(ImportRun::Table)
                    .col(big_pk_auto(ImportRun::Id))
                    .col(string_len(ImportRun::Source, 64))
                    .col(string_len_null(ImportRun::FileName, 255))
                    .col(string_len(ImportRun::Format, 8))
                    .col(string_len(ImportRun::FileHash, 64))
                    // SHA-256 of file hash + source + mapping: what a row's identity hangs on.
                    .col(string_len(ImportRun::Identity, 64))
                    .col(json_binary(ImportRun::Mapping))
                    .col(boolean(ImportRun::DryRun))
                    .col(string_len(ImportRun::State, 16))
                    .col(big_integer(ImportRun::Rows).default(0))
                    .col(big_integer(ImportRun::Created).default(0))
                    .col(big_integer(ImportRun::Updated).default(0))
                    .col(big_integer(ImportRun::Unchanged).default(0))
                    .col(big_integer(ImportRun::Stale).default(0))
                    .col(big_integer(ImportRun::Rejected).default(0))
                    .col(big_integer_null(ImportRun::BytesTotal))
                    .col(big_integer(ImportRun::BytesRead).default(0))
                    .col(string_len_null(ImportRun::Error, 1000))
                    .col(big_integer_null(ImportRun::StartedBy))
                    .col(timestamp_with_time_zone(ImportRun::StartedAt))
                    .col(timestamp_with_time_zone(ImportRun::UpdatedAt))
                    .col(timestamp_with_time_zone_null(ImportRun::FinishedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("import_run_started_by_fk")
                            .from(ImportRun::Table, ImportRun::StartedBy)
                            .to(Principal::Table, Principal::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("import_run_file_hash_idx")
                    .table(ImportRun::Table)
                    .col(ImportRun::FileHash)
                    .to_owned(),
            )
            .await?;
        // Each run's per-row report.
        manager
            .create_table(
                Table::create()
                    .table(ImportRow::Table)
                    .col(big_integer(ImportRow::RunId))
                    .col(big_integer(ImportRow::RowNumber))
                    .col(big_integer(ImportRow::Line))
                    .col(string_len_null(ImportRow::SourceRef, 255))
                    .col(string_len(ImportRow::Outcome, 16))
                    .col(big_integer_null(ImportRow::LeadId))
                    .col(string_len_null(ImportRow::Reason, 1000))
                    .primary_key(
                        Index::create()
                            .col(ImportRow::RunId)
                            .col(ImportRow::RowNumber),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("import_row_run_fk")
                            .from(ImportRow::Table, ImportRow::RunId)
                            .to(ImportRun::Table, ImportRun::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // The operation identity: a row of a given file (for a source and
        // mapping) is applied once, ever; a re-run finds it here.
        manager
            .create_table(
                Table::create()
                    .table(ImportAppliedRow::Table)
                    .col(string_len(ImportAppliedRow::Identity, 64))
                    .col(big_integer(ImportAppliedRow::RowNumber))
                    .col(big_integer(ImportAppliedRow::LeadId))
                    .col(big_integer(ImportAppliedRow::RunId))
                    .primary_key(
                        Index::create()
                            .col(ImportAppliedRow::Identity)
                            .col(ImportAppliedRow::RowNumber),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("import_applied_row_lead_fk")
                            .from(ImportAppliedRow::Table, ImportAppliedRow::LeadId)
                            .to(Lead::Table, Lead::Id),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            ImportAppliedRow::Table.into_iden(),
            ImportRow::Table.into_iden(),
            ImportRun::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
pub enum ImportRun {
    Table,
    Id,
    Source,
    FileName,
    Format,
    FileHash,
    Identity,
    Mapping,
    DryRun,
    State,
    Rows,
    Created,
    Updated,
    Unchanged,
    Stale,
    Rejected,
    BytesTotal,
    BytesRead,
    Error,
    StartedBy,
    StartedAt,
    UpdatedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
pub enum ImportRow {
    Table,
    RunId,
    RowNumber,
    Line,
    SourceRef,
    Outcome,
    LeadId,
    Reason,
}

#[derive(DeriveIden)]
pub enum ImportAppliedRow {
    Table,
    Identity,
    RowNumber,
    LeadId,
    RunId,
}
