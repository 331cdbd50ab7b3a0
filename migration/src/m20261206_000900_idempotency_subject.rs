//! What each stored idempotent response is about: one row per subject (a
//! lead, a contact, a natural key's keyed hash), written with the response.
//! Erasure removes stored responses by subject, never by the text of the
//! request target, which has many spellings (`/api/leads?`, `/api/leads/01`).

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
            .create_table(
                Table::create()
                    .table(IdempotencySubject::Table)
                    .col(big_integer(IdempotencySubject::PrincipalId))
                    .col(string_len(IdempotencySubject::Key, 255))
                    .col(string_len(IdempotencySubject::Subject, 100))
                    .primary_key(
                        Index::create()
                            .col(IdempotencySubject::PrincipalId)
                            .col(IdempotencySubject::Key)
                            .col(IdempotencySubject::Subject),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idempotency_subject_subject_idx")
                    .table(IdempotencySubject::Table)
                    .col(IdempotencySubject::Subject)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(IdempotencySubject::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum IdempotencySubject {
    Table,
    PrincipalId,
    Key,
    Subject,
}
