//! A tombstone also buries the look-alikes of its key: `folded_hash` is the
//! keyed hash of the key's folded form (invisible characters removed, NFKC;
//! `domain::lead::tombstone::fold`). Tombstones from before this migration
//! have none: their key was never kept, so it cannot be folded now, and they
//! keep burying the exact key by `key_hash`.

use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261201_000730_create_erasure::LeadTombstone;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum FoldedHash {
    FoldedHash,
}

const INDEX: &str = "lead_tombstone_folded_hash_idx";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(LeadTombstone::Table)
                    .add_column(string_len_null(FoldedHash::FoldedHash, 64))
                    .to_owned(),
            )
            .await?;
        // Not unique: look-alikes erased as two leads share a folded form.
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(LeadTombstone::Table)
                    .col(FoldedHash::FoldedHash)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(INDEX)
                    .table(LeadTombstone::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(LeadTombstone::Table)
                    .drop_column(FoldedHash::FoldedHash)
                    .to_owned(),
            )
            .await
    }
}
