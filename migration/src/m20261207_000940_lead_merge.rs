//! Merging leads: a merged lead keeps its row and its natural key, pointing
//! at the lead it was merged into (`merged_into_id`), so a later delivery of
//! its key finds it and goes on to the survivor, and an undo has every value
//! it had. `lead_merge` records each merge: what was kept from where, and
//! what an undo puts back.

use sea_orm_migration::{prelude::*, schema::*};

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
                    .add_column(big_integer_null(Lead::MergedIntoId))
                    .to_owned(),
            )
            .await?;
        // Erasing a survivor finds its merged leads by it.
        manager
            .create_index(
                Index::create()
                    .name("lead_merged_into_idx")
                    .table(Lead::Table)
                    .col(Lead::MergedIntoId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(LeadMerge::Table)
                    .col(big_pk_auto(LeadMerge::Id))
                    .col(big_integer(LeadMerge::SurvivorId))
                    .col(json_binary(LeadMerge::MergedIds))
                    .col(big_integer_null(LeadMerge::MergedBy))
                    .col(timestamp_with_time_zone(LeadMerge::MergedAt))
                    .col(json_binary(LeadMerge::Fields))
                    .col(json_binary(LeadMerge::Moved))
                    .col(timestamp_with_time_zone_null(LeadMerge::UndoneAt))
                    .col(big_integer_null(LeadMerge::UndoneBy))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("lead_merge_survivor_idx")
                    .table(LeadMerge::Table)
                    .col(LeadMerge::SurvivorId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(LeadMerge::Table).to_owned())
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("lead_merged_into_idx")
                    .table(Lead::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Lead::Table)
                    .drop_column(Lead::MergedIntoId)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Lead {
    Table,
    MergedIntoId,
}

#[derive(DeriveIden)]
enum LeadMerge {
    Table,
    Id,
    SurvivorId,
    MergedIds,
    MergedBy,
    MergedAt,
    Fields,
    Moved,
    UndoneAt,
    UndoneBy,
}
