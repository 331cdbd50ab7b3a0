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
                    .table(IdempotencyKey::Table)
                    .col(big_integer(IdempotencyKey::PrincipalId))
                    .col(string_len(IdempotencyKey::Key, 255))
                    .col(string_len(IdempotencyKey::Fingerprint, 64))
                    .col(string_len(IdempotencyKey::Method, 8))
                    .col(string_len(IdempotencyKey::Path, 512))
                    .col(string_len(IdempotencyKey::State, 16))
                    // Fencing token: only the holder of the current lease may complete.
                    .col(string_len(IdempotencyKey::LeaseToken, 64))
                    .col(timestamp_with_time_zone(IdempotencyKey::LockedAt))
                    .col(small_integer_null(IdempotencyKey::ResponseStatus))
                    .col(json_binary_null(IdempotencyKey::ResponseHeaders))
                    .col(text_null(IdempotencyKey::ResponseBody))
                    .col(timestamp_with_time_zone(IdempotencyKey::CreatedAt))
                    .col(timestamp_with_time_zone(IdempotencyKey::ExpiresAt))
                    .primary_key(
                        Index::create()
                            .col(IdempotencyKey::PrincipalId)
                            .col(IdempotencyKey::Key),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idempotency_key_expires_idx")
                    .table(IdempotencyKey::Table)
                    .col(IdempotencyKey::ExpiresAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(IdempotencyKey::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum IdempotencyKey {
    Table,
    PrincipalId,
    Key,
    Fingerprint,
    Method,
    Path,
    State,
    LeaseToken,
    LockedAt,
    ResponseStatus,
    ResponseHeaders,
    ResponseBody,
    CreatedAt,
    ExpiresAt,
}
