use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000001_create_principal::Principal;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // The timeline of contacts, companies and deals (a lead's stays in
        // `activity`, whose `lead_id` is required).
        manager
            .create_table(
                Table::create()
                    .table(CrmActivity::Table)
                    .col(big_pk_auto(CrmActivity::Id))
                    .col(string_len(CrmActivity::SubjectType, 16))
                    .col(big_integer(CrmActivity::SubjectId))
                    .col(string_len(CrmActivity::Kind, 32))
                    .col(big_integer_null(CrmActivity::AuthorId))
                    .col(json_binary_null(CrmActivity::Detail))
                    .col(string_len_null(CrmActivity::CorrelationId, 64))
                    .col(timestamp_with_time_zone(CrmActivity::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("crm_activity_author_fk")
                            .from(CrmActivity::Table, CrmActivity::AuthorId)
                            .to(Principal::Table, Principal::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("crm_activity_subject_idx")
                    .table(CrmActivity::Table)
                    .col(CrmActivity::SubjectType)
                    .col(CrmActivity::SubjectId)
                    .col(CrmActivity::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(CrmActivity::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum CrmActivity {
    Table,
    Id,
    SubjectType,
    SubjectId,
    Kind,
    AuthorId,
    Detail,
    CorrelationId,
    CreatedAt,
}
