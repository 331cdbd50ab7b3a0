use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000401_create_company::Company;

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
                    .table(Contact::Table)
                    .col(big_pk_auto(Contact::Id))
                    // Normalised (trimmed, lower-case); contacts are matched on it.
                    // NULLs never collide, so contacts without an address are allowed.
                    .col(string_len_null(Contact::Email, 320).unique_key())
                    .col(string_len_null(Contact::Name, 255))
                    .col(string_len_null(Contact::Phone, 32))
                    .col(big_integer_null(Contact::CompanyId))
                    .col(big_integer(Contact::Version).default(1))
                    .col(timestamp_with_time_zone(Contact::CreatedAt))
                    .col(timestamp_with_time_zone(Contact::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("contact_company_fk")
                            .from(Contact::Table, Contact::CompanyId)
                            .to(Company::Table, Company::Id),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, col) in [
            ("contact_updated_at_idx", Contact::UpdatedAt),
            ("contact_created_at_idx", Contact::CreatedAt),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(Contact::Table)
                        .col(col)
                        .col(Contact::Id)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_index(
                Index::create()
                    .name("contact_company_idx")
                    .table(Contact::Table)
                    .col(Contact::CompanyId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Contact::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum Contact {
    Table,
    Id,
    Email,
    Name,
    Phone,
    CompanyId,
    Version,
    CreatedAt,
    UpdatedAt,
}
