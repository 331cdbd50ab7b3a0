use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000102_create_inbox_event::InboxEvent;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum BodyHash {
    BodySha256,
}

const INDEX: &str = "ux_inbox_event_source_body_sha256";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Set only where the event id is not covered by the signature (a
        // GitHub delivery id, a configured hmac-sha256 id header): there a
        // replayed signed body with a fresh id must still be a duplicate.
        // NULLs do not collide, so signed-id events are unaffected.
        manager
            .alter_table(
                Table::alter()
                    .table(InboxEvent::Table)
                    .add_column(string_len_null(BodyHash::BodySha256, 64))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(InboxEvent::Table)
                    .col(InboxEvent::Source)
                    .col(BodyHash::BodySha256)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(INDEX)
                    .table(InboxEvent::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(InboxEvent::Table)
                    .drop_column(BodyHash::BodySha256)
                    .to_owned(),
            )
            .await
    }
}
