//! The routing rules: one list, replaced whole under `If-Match` (`PUT
//! /api/routing-rules`), so one row holds it with its `version`. It starts
//! empty (never updated): every lead goes to the pool of all sales staff,
//! as before.

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
                    .table(RoutingRules::Table)
                    .col(integer(RoutingRules::Id).primary_key())
                    .col(json_binary(RoutingRules::Rules))
                    .col(big_integer(RoutingRules::Version))
                    .col(timestamp_with_time_zone_null(RoutingRules::UpdatedAt))
                    .col(big_integer_null(RoutingRules::UpdatedBy))
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::insert()
                    .into_table(RoutingRules::Table)
                    .columns([RoutingRules::Id, RoutingRules::Rules, RoutingRules::Version])
                    // A text literal both backends take for JSON.
                    .values_panic([1.into(), Expr::cust("'[]'"), 1i64.into()])
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(RoutingRules::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum RoutingRules {
    Table,
    Id,
    Rules,
    Version,
    UpdatedAt,
    UpdatedBy,
}
