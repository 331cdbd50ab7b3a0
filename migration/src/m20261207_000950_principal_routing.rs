//! Sales principals get what routing needs to know about them: a `team`,
//! whether they are `available` or `away` (until `away_until`, if given),
//! and a `capacity` (the most open leads they own before routing passes
//! them by). And a `version`, for `If-Match` on `PATCH /api/principals/{id}`
//! like every other changeable record. Existing principals are available,
//! in no team, without a limit.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column a statement: SQLite alters one at a time.
        for column in [
            string_len_null(Principal::Team, 64),
            string_len(Principal::Availability, 16)
                .default("available")
                .to_owned(),
            timestamp_with_time_zone_null(Principal::AwayUntil),
            integer_null(Principal::Capacity),
            big_integer(Principal::Version).default(1).to_owned(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Principal::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            Principal::Version,
            Principal::Capacity,
            Principal::AwayUntil,
            Principal::Availability,
            Principal::Team,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Principal::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Principal {
    Table,
    Team,
    Availability,
    AwayUntil,
    Capacity,
    Version,
}
