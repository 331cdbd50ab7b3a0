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
                    .table(Lead::Table)
                    .col(big_pk_auto(Lead::Id))
                    // Sender-owned: refreshed by every ingest.
                    .col(string_len(Lead::Source, 64))
                    .col(string_len(Lead::SourceRef, 255))
                    .col(string_len_null(Lead::Email, 320))
                    .col(string_len_null(Lead::Phone, 32))
                    .col(string_len_null(Lead::Name, 255))
                    .col(string_len_null(Lead::Company, 255))
                    .col(json_binary(Lead::Payload))
                    .col(string_len(Lead::ContentHash, 64))
                    .col(timestamp_with_time_zone_null(Lead::SourceUpdatedAt))
                    // Human-owned: written on insert, never by an ingest update.
                    .col(string_len(Lead::Status, 16).default("new"))
                    .col(big_integer_null(Lead::OwnerId))
                    .col(big_integer(Lead::Version).default(1))
                    .col(timestamp_with_time_zone(Lead::CreatedAt))
                    .col(timestamp_with_time_zone(Lead::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_owner_fk")
                            .from(Lead::Table, Lead::OwnerId)
                            .to(Principal::Table, Principal::Id),
                    )
                    .to_owned(),
            )
            .await?;
        // The natural key: the one thing that makes every repeat harmless.
        manager
            .create_index(
                Index::create()
                    .name("lead_source_source_ref_key")
                    .table(Lead::Table)
                    .col(Lead::Source)
                    .col(Lead::SourceRef)
                    .unique()
                    .to_owned(),
            )
            .await?;
        // Keyset pagination orders by (timestamp, id).
        for (name, col) in [
            ("lead_updated_at_idx", Lead::UpdatedAt),
            ("lead_created_at_idx", Lead::CreatedAt),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(Lead::Table)
                        .col(col)
                        .col(Lead::Id)
                        .to_owned(),
                )
                .await?;
        }
        for (name, col) in [
            ("lead_status_idx", Lead::Status),
            ("lead_owner_idx", Lead::OwnerId),
            ("lead_email_idx", Lead::Email),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(Lead::Table)
                        .col(col)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Lead::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum Lead {
    Table,
    Id,
    Source,
    SourceRef,
    Email,
    Phone,
    Name,
    Company,
    Payload,
    ContentHash,
    SourceUpdatedAt,
    Status,
    OwnerId,
    Version,
    CreatedAt,
    UpdatedAt,
}
