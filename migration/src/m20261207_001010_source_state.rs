use sea_orm_migration::{prelude::*, schema::*};

/// A source gets a `state`: `active`, `paused` (its deliveries are verified,
/// stored and answered, but the inbox workers leave its events until it is
/// resumed) or `removed` (`DELETE /api/sources/{name}`: its secrets are gone
/// and deliveries are refused as to an unknown name; the row stays, holding
/// its name, because its inbox events and reconcile runs name it).
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
                    .table(Source::Table)
                    .add_column(string_len(Source::State, 16).default("active"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Source::Table)
                    .drop_column(Source::State)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Source {
    Table,
    State,
}
