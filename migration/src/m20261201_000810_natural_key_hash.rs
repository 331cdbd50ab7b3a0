//! The keyed hash of a natural key `(source, source_ref)` on the rows that
//! keep a sender's raw record without (necessarily) a lead: inbox events and
//! reconcile dead letters. Erasure finds a person's rows there by this hash
//! (the tombstone's, never the key itself) instead of reading every body.
//! Rows from before this migration have none; erasure falls back to reading
//! the bodies of those of the erased lead's source.

use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000102_create_inbox_event::InboxEvent;
use crate::m20261201_000740_create_reconcile_rejected::ReconcileRejected;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum KeyHash {
    KeyHash,
}

const INBOX_INDEX: &str = "inbox_event_key_hash_idx";
const REJECTED_INDEX: &str = "reconcile_rejected_key_hash_idx";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (table, index) in [
            (InboxEvent::Table.into_iden(), INBOX_INDEX),
            (ReconcileRejected::Table.into_iden(), REJECTED_INDEX),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(table.clone())
                        .add_column(string_len_null(KeyHash::KeyHash, 64))
                        .to_owned(),
                )
                .await?;
            manager
                .create_index(
                    Index::create()
                        .name(index)
                        .table(table)
                        .col(KeyHash::KeyHash)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (table, index) in [
            (InboxEvent::Table.into_iden(), INBOX_INDEX),
            (ReconcileRejected::Table.into_iden(), REJECTED_INDEX),
        ] {
            manager
                .drop_index(Index::drop().name(index).table(table.clone()).to_owned())
                .await?;
            manager
                .alter_table(
                    Table::alter()
                        .table(table)
                        .drop_column(KeyHash::KeyHash)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
