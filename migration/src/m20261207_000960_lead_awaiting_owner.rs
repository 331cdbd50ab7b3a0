//! The leads routing could find no one for (everyone in the pool away or at
//! capacity): one row each, so the wait is said once on the lead's timeline
//! and the leads are routed again when someone can take them. The lead row
//! stays the work (`processed_version < version`); this only says who waits.

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
                    .table(LeadAwaitingOwner::Table)
                    .col(big_integer(LeadAwaitingOwner::LeadId).primary_key())
                    .col(timestamp_with_time_zone(LeadAwaitingOwner::Since))
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_awaiting_owner_lead_fk")
                            .from(LeadAwaitingOwner::Table, LeadAwaitingOwner::LeadId)
                            .to(Lead::Table, Lead::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(LeadAwaitingOwner::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum LeadAwaitingOwner {
    Table,
    LeadId,
    Since,
}
