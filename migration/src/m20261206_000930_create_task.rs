//! Follow-up tasks on leads, contacts and deals: who does what by when.
//! `subject_type`/`subject_id` name the record, as on the CRM timeline.

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
        manager
            .create_table(
                Table::create()
                    .table(Task::Table)
                    .col(big_pk_auto(Task::Id))
                    .col(string_len(Task::SubjectType, 16))
                    .col(big_integer(Task::SubjectId))
                    .col(string_len(Task::Title, 255))
                    .col(text_null(Task::Description))
                    .col(big_integer(Task::OwnerId))
                    .col(timestamp_with_time_zone(Task::DueAt))
                    .col(string_len(Task::Status, 16).default("open"))
                    .col(timestamp_with_time_zone_null(Task::CompletedAt))
                    .col(big_integer_null(Task::CompletedBy))
                    .col(big_integer_null(Task::CreatedBy))
                    .col(big_integer(Task::Version).default(1))
                    .col(timestamp_with_time_zone(Task::CreatedAt))
                    .col(timestamp_with_time_zone(Task::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("task_owner_fk")
                            .from(Task::Table, Task::OwnerId)
                            .to(Principal::Table, Principal::Id),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, cols) in [
            // "My open tasks by due time": the list a rep opens every morning.
            (
                "task_owner_due_idx",
                vec![Task::OwnerId, Task::Status, Task::DueAt, Task::Id],
            ),
            (
                "task_status_due_idx",
                vec![Task::Status, Task::DueAt, Task::Id],
            ),
            ("task_subject_idx", vec![Task::SubjectType, Task::SubjectId]),
        ] {
            let mut index = Index::create();
            index.name(name).table(Task::Table);
            for col in cols {
                index.col(col);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Task::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum Task {
    Table,
    Id,
    SubjectType,
    SubjectId,
    Title,
    Description,
    OwnerId,
    DueAt,
    Status,
    CompletedAt,
    CompletedBy,
    CreatedBy,
    Version,
    CreatedAt,
    UpdatedAt,
}
