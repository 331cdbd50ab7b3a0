//! Bearer tokens get a row of their own: a principal may have several (a
//! user's personal tokens for its REST clients), each with a name, an
//! optional expiry and the time it was last used. Every principal's token
//! from before moves here unchanged (same hash, no expiry), so every token
//! issued so far keeps working. `principal.token_hash` is no longer read
//! (SQLite cannot drop a unique column in place); new principals get the
//! hash of a token nobody was shown.

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
                    .table(ApiToken::Table)
                    .col(big_pk_auto(ApiToken::Id))
                    .col(big_integer(ApiToken::PrincipalId))
                    .col(string_len(ApiToken::Name, 128))
                    .col(string_len_uniq(ApiToken::TokenHash, 64))
                    .col(timestamp_with_time_zone(ApiToken::CreatedAt))
                    .col(timestamp_with_time_zone_null(ApiToken::ExpiresAt))
                    .col(timestamp_with_time_zone_null(ApiToken::LastUsedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("api_token_principal_fk")
                            .from(ApiToken::Table, ApiToken::PrincipalId)
                            .to(Principal::Table, Principal::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("api_token_principal")
                    .table(ApiToken::Table)
                    .col(ApiToken::PrincipalId)
                    .to_owned(),
            )
            .await?;
        // Users (an email) have no token of their own yet: theirs are the
        // hashes of tokens nobody was shown.
        manager
            .get_connection()
            .execute_unprepared(
                "INSERT INTO api_token (principal_id, name, token_hash, created_at) \
                 SELECT id, name, token_hash, created_at FROM principal WHERE email IS NULL",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ApiToken::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum ApiToken {
    Table,
    Id,
    PrincipalId,
    Name,
    TokenHash,
    CreatedAt,
    ExpiresAt,
    LastUsedAt,
}
