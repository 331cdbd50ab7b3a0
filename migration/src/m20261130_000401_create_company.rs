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
                    .table(Company::Table)
                    .col(big_pk_auto(Company::Id))
                    .col(string_len(Company::Name, 255))
                    .col(string_len_null(Company::Domain, 255))
                    // `domain:<normalised domain>` or, lacking one, `name:<normalised name>`:
                    // the unique key every conversion and create upserts on.
                    .col(string_len_uniq(Company::MatchKey, 300))
                    .col(big_integer(Company::Version).default(1))
                    .col(timestamp_with_time_zone(Company::CreatedAt))
                    .col(timestamp_with_time_zone(Company::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        for (name, col) in [
            ("company_updated_at_idx", Company::UpdatedAt),
            ("company_created_at_idx", Company::CreatedAt),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(Company::Table)
                        .col(col)
                        .col(Company::Id)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Company::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum Company {
    Table,
    Id,
    Name,
    Domain,
    MatchKey,
    Version,
    CreatedAt,
    UpdatedAt,
}
