use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000406_create_import::ImportRun;
use crate::m20261130_000501_create_reconcile::ReconcileRun;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
pub enum LeadTombstone {
    Table,
    KeyHash,
    LeadId,
    ErasureId,
    CreatedAt,
}

#[derive(DeriveIden)]
pub enum LeadErasure {
    Table,
    Id,
    LeadId,
    KeyHash,
    ErasedBy,
    Reason,
    Counts,
    ErasedAt,
}

#[derive(DeriveIden)]
enum Suppressed {
    Suppressed,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // The record of an erasure: ids, who, when, why and how many rows,
        // never the person's data. No foreign keys: the lead is gone.
        manager
            .create_table(
                Table::create()
                    .table(LeadErasure::Table)
                    .col(big_pk_auto(LeadErasure::Id))
                    .col(big_integer(LeadErasure::LeadId).unique_key())
                    .col(string_len(LeadErasure::KeyHash, 64))
                    .col(big_integer_null(LeadErasure::ErasedBy))
                    .col(text(LeadErasure::Reason))
                    .col(json_binary(LeadErasure::Counts))
                    .col(timestamp_with_time_zone(LeadErasure::ErasedAt))
                    .to_owned(),
            )
            .await?;
        // A natural key that must not come back: a keyed hash of
        // `(source, source_ref)`, so the row itself names nobody.
        manager
            .create_table(
                Table::create()
                    .table(LeadTombstone::Table)
                    .col(string_len(LeadTombstone::KeyHash, 64).primary_key())
                    .col(big_integer(LeadTombstone::LeadId))
                    .col(big_integer_null(LeadTombstone::ErasureId))
                    .col(timestamp_with_time_zone(LeadTombstone::CreatedAt))
                    .to_owned(),
            )
            .await?;
        // Runs count the records a tombstone suppressed.
        for table in runs() {
            manager
                .alter_table(
                    Table::alter()
                        .table(table)
                        .add_column(big_integer(Suppressed::Suppressed).default(0))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in runs() {
            manager
                .alter_table(
                    Table::alter()
                        .table(table)
                        .drop_column(Suppressed::Suppressed)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .drop_table(Table::drop().table(LeadTombstone::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(LeadErasure::Table).to_owned())
            .await
    }
}

fn runs() -> [TableRef; 2] {
    [
        ImportRun::Table.into_table_ref(),
        ReconcileRun::Table.into_table_ref(),
    ]
}
