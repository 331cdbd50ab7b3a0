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
        manager
            .create_table(
                Table::create()
                    .table(Activity::Table)
                    .col(big_pk_auto(Activity::Id))
                    .col(big_integer(Activity::LeadId))
                    .col(string_len(Activity::Kind, 32))
                    .col(string_len_null(Activity::Origin, 16))
                    .col(string_len_null(Activity::Outcome, 16))
                    .col(big_integer_null(Activity::AuthorId))
                    .col(json_binary_null(Activity::Detail))
                    .col(string_len_null(Activity::CorrelationId, 64))
                    .col(timestamp_with_time_zone(Activity::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("activity_lead_fk")
                            .from(Activity::Table, Activity::LeadId)
                            .to(Lead::Table, Lead::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("activity_author_fk")
                            .from(Activity::Table, Activity::AuthorId)
                            .to(Principal::Table, Principal::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("activity_lead_idx")
                    .table(Activity::Table)
                    .col(Activity::LeadId)
                    .col(Activity::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("activity_correlation_idx")
                    .table(Activity::Table)
                    .col(Activity::CorrelationId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Activity::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum Activity {
    Table,
    Id,
    LeadId,
    Kind,
    Origin,
    Outcome,
    AuthorId,
    Detail,
    CorrelationId,
    CreatedAt,
}
