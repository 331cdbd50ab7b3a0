//! A source may carry several events in one delivery (`events_pointer`, a
//! JSON pointer whose `*` stands for every element of an array), and a
//! Meta Lead Ads source keeps the token its subscription handshake must
//! name (`verify_token`, sealed like the source's secrets).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        for column in [Source::EventsPointer, Source::VerifyToken] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Source::Table)
                        .add_column(text_null(column))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Source::EventsPointer, Source::VerifyToken] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Source::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum Source {
    Table,
    EventsPointer,
    VerifyToken,
}
