//! Speed to lead: when a lead got its owner, when someone first acted on it,
//! and when that was due by its team's response target in the team's
//! working hours (`team`).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            Lead::AssignedAt,
            Lead::FirstResponseAt,
            Lead::ResponseDueAt,
            Lead::ResponseBreachedAt,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Lead::Table)
                        .add_column(timestamp_with_time_zone_null(column))
                        .to_owned(),
                )
                .await?;
        }
        // The overdue scan: unanswered leads by due time.
        manager
            .create_index(
                Index::create()
                    .name("lead_response_due_idx")
                    .table(Lead::Table)
                    .col(Lead::FirstResponseAt)
                    .col(Lead::ResponseDueAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Team::Table)
                    .col(string_len(Team::Name, 64).primary_key())
                    .col(string_len(Team::TimeZone, 64))
                    .col(string_len(Team::WorkDays, 32))
                    .col(integer(Team::WorkStart))
                    .col(integer(Team::WorkEnd))
                    .col(integer(Team::ResponseTargetMinutes))
                    .col(string_len_null(Team::Escalation, 64))
                    .col(big_integer(Team::Version).default(1))
                    .col(timestamp_with_time_zone(Team::UpdatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Team::Table).to_owned())
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("lead_response_due_idx")
                    .table(Lead::Table)
                    .to_owned(),
            )
            .await?;
        for column in [
            Lead::AssignedAt,
            Lead::FirstResponseAt,
            Lead::ResponseDueAt,
            Lead::ResponseBreachedAt,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Lead::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Lead {
    Table,
    AssignedAt,
    FirstResponseAt,
    ResponseDueAt,
    ResponseBreachedAt,
}

#[derive(DeriveIden)]
enum Team {
    Table,
    Name,
    TimeZone,
    WorkDays,
    WorkStart,
    WorkEnd,
    ResponseTargetMinutes,
    Escalation,
    Version,
    UpdatedAt,
}
