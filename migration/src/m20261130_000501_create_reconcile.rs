use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000001_create_principal::Principal;
use crate::m20261130_000101_create_source::Source;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // A source's pull API (reconcile). SQLite takes one ADD COLUMN per
        // ALTER TABLE, so one statement each.
        for column in [
            string_len_null(PullColumn::PullUrl, 2048),
            string_len_null(PullColumn::PullAuthHeader, 128),
            // Write-only like the webhook secrets: never returned nor logged.
            text_null(PullColumn::PullAuthSecret),
            big_integer(PullColumn::PullPageSize)
                .default(100)
                .to_owned(),
            string_len_null(PullColumn::ReconcileCron, 128),
            // Where the next run continues; advanced with each page's writes.
            text_null(PullColumn::ReconcileCursor),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Source::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }

        manager
            .create_table(
                Table::create()
                    .table(ReconcileRun::Table)
                    .col(big_pk_auto(ReconcileRun::Id))
                    .col(string_len(ReconcileRun::Source, 64))
                    // running, done, failed
                    .col(string_len(ReconcileRun::State, 16))
                    .col(boolean(ReconcileRun::DryRun))
                    // api, cli, schedule
                    .col(string_len(ReconcileRun::Trigger, 16))
                    // `schedule:{source}:{tick}`: a cron tick starts one run
                    // however many worker processes saw it (each one's cron fires).
                    .col(string_len_null(ReconcileRun::TickKey, 160).unique_key())
                    .col(text_null(ReconcileRun::CursorStart))
                    .col(text_null(ReconcileRun::Cursor))
                    .col(big_integer(ReconcileRun::Pages).default(0))
                    .col(big_integer(ReconcileRun::Fetched).default(0))
                    .col(big_integer(ReconcileRun::Created).default(0))
                    .col(big_integer(ReconcileRun::Updated).default(0))
                    .col(big_integer(ReconcileRun::Unchanged).default(0))
                    .col(big_integer(ReconcileRun::Stale).default(0))
                    .col(big_integer(ReconcileRun::Rejected).default(0))
                    .col(big_integer(ReconcileRun::Missed).default(0))
                    .col(string_len_null(ReconcileRun::Error, 1000))
                    .col(big_integer_null(ReconcileRun::StartedBy))
                    .col(timestamp_with_time_zone(ReconcileRun::StartedAt))
                    .col(timestamp_with_time_zone(ReconcileRun::HeartbeatAt))
                    .col(timestamp_with_time_zone_null(ReconcileRun::FinishedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("reconcile_run_source_fk")
                            .from(ReconcileRun::Table, ReconcileRun::Source)
                            .to(Source::Table, Source::Name),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("reconcile_run_started_by_fk")
                            .from(ReconcileRun::Table, ReconcileRun::StartedBy)
                            .to(Principal::Table, Principal::Id),
                    )
                    .to_owned(),
            )
            .await?;
        // One running run per source, decided by the database: a second
        // start's insert conflicts here. Same SQL on SQLite and PostgreSQL.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX reconcile_run_one_running ON reconcile_run (source) \
                 WHERE state = 'running'",
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("reconcile_run_source_idx")
                    .table(ReconcileRun::Table)
                    .col(ReconcileRun::Source)
                    .col(ReconcileRun::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ReconcileRun::Table).to_owned())
            .await?;
        for column in [
            PullColumn::ReconcileCursor,
            PullColumn::ReconcileCron,
            PullColumn::PullPageSize,
            PullColumn::PullAuthSecret,
            PullColumn::PullAuthHeader,
            PullColumn::PullUrl,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Source::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

/// The pull columns added to `source`.
#[derive(DeriveIden)]
enum PullColumn {
    PullUrl,
    PullAuthHeader,
    PullAuthSecret,
    PullPageSize,
    ReconcileCron,
    ReconcileCursor,
}

#[derive(DeriveIden)]
pub enum ReconcileRun {
    Table,
    Id,
    Source,
    State,
    DryRun,
    Trigger,
    TickKey,
    CursorStart,
    Cursor,
    Pages,
    Fetched,
    Created,
    Updated,
    Unchanged,
    Stale,
    Rejected,
    Missed,
    Error,
    StartedBy,
    StartedAt,
    HeartbeatAt,
    FinishedAt,
}
