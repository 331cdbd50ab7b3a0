//! People sign in: a principal may have an `email` (stored lower-case, so
//! the unique index makes it unique whatever its case), an argon2id
//! `password_hash`, and a `disabled_at` time. Existing principals keep
//! their tokens and get none of these. A `user_session` row is a page's
//! signed-in session: only the SHA-256 of its id and of its CSRF token are
//! stored, with when it started, was last used and ends at the latest.

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
        // One column a statement: SQLite alters one at a time.
        for column in [
            string_len_null(User::Email, 320),
            string_len_null(User::PasswordHash, 255),
            timestamp_with_time_zone_null(User::DisabledAt),
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
        manager
            .create_index(
                Index::create()
                    .name("principal_email")
                    .table(Principal::Table)
                    .col(User::Email)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(UserSession::Table)
                    .col(big_pk_auto(UserSession::Id))
                    .col(big_integer(UserSession::PrincipalId))
                    .col(string_len_uniq(UserSession::IdHash, 64))
                    .col(string_len(UserSession::CsrfHash, 64))
                    .col(timestamp_with_time_zone(UserSession::CreatedAt))
                    .col(timestamp_with_time_zone(UserSession::LastSeenAt))
                    .col(timestamp_with_time_zone(UserSession::ExpiresAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("user_session_principal_fk")
                            .from(UserSession::Table, UserSession::PrincipalId)
                            .to(Principal::Table, Principal::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, column) in [
            ("user_session_principal", UserSession::PrincipalId),
            ("user_session_expires", UserSession::ExpiresAt),
            ("user_session_last_seen", UserSession::LastSeenAt),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(UserSession::Table)
                        .col(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(UserSession::Table).to_owned())
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("principal_email")
                    .table(Principal::Table)
                    .to_owned(),
            )
            .await?;
        for column in [User::DisabledAt, User::PasswordHash, User::Email] {
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

/// The principal's new columns.
#[derive(DeriveIden)]
enum User {
    Email,
    PasswordHash,
    DisabledAt,
}

#[derive(DeriveIden)]
enum UserSession {
    Table,
    Id,
    PrincipalId,
    IdHash,
    CsrfHash,
    CreatedAt,
    LastSeenAt,
    ExpiresAt,
}
