//! Reconcile runs by when they last wrote: the stats windows and the
//! missed-webhooks gauges sum the runs of the last hours, which otherwise
//! read every run ever recorded.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const NAME: &str = "reconcile_run_heartbeat_idx";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name(NAME)
                    .table(ReconcileRun::Table)
                    .col(ReconcileRun::HeartbeatAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(NAME)
                    .table(ReconcileRun::Table)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum ReconcileRun {
    Table,
    HeartbeatAt,
}
