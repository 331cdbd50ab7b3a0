//! Tombstones: natural keys that must not come back after an erasure. The
//! write path ([`crate::lead::ingest`]) checks a batch's keys
//! ([`BatchKeys`]; on PostgreSQL inside its upsert statement) before it
//! writes, so every door — intake, webhooks, reconcile, import — answers a buried key
//! with `suppressed` and creates nothing.
//!
//! A tombstone holds a keyed hash of `(source, source_ref)` (HMAC-SHA256 under
//! a subkey of the secret keyring), never the key itself. Hashes under every
//! key of the ring are checked, so a rotation keeps tombstones working while
//! the old key stays in the ring.
//!
//! On PostgreSQL an erasure holds an exclusive transaction advisory lock on
//! the key while it deletes and buries; every ingest takes the same lock
//! shared before it looks for tombstones. So an ingest of that key either
//! commits before the erasure reads (and the erasure removes what it wrote),
//! or waits and then sees the tombstone: a concurrent redelivery cannot
//! resurrect the lead. SQLite has one writer, so the question does not arise.

use std::collections::HashSet;
use std::sync::{PoisonError, RwLock};

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseBackend, DbErr, EntityTrait, QueryFilter, Statement,
};

use crate::entities::lead_tombstone::{self, Column};
use crate::sealed::Keyring;

/// The hashing subkeys in use, current first. Every door's write path needs
/// them and the doors live in three crates and many call sites, so the keys
/// are installed once per process at start-up (`install`) rather than passed
/// down every one of them.
static KEYS: RwLock<Vec<[u8; 32]>> = RwLock::new(Vec::new());

/// Uses `keyring`'s hashing subkeys from now on (start-up).
pub fn install(keyring: &Keyring) {
    let mut keys = KEYS.write().unwrap_or_else(PoisonError::into_inner);
    *keys = keyring.hashing_keys();
}

fn keys() -> Vec<[u8; 32]> {
    let keys = KEYS.read().unwrap_or_else(PoisonError::into_inner);
    if keys.is_empty() {
        Keyring::none().hashing_keys()
    } else {
        keys.clone()
    }
}

fn hash_with(key: &[u8; 32], source: &str, source_ref: &str) -> String {
    hex::encode(crate::inbound::signature::hmac_sha256_bytes(
        key,
        &[source.as_bytes(), b"\0", source_ref.as_bytes()],
    ))
}

/// The tombstone key of `(source, source_ref)` under the current key.
pub fn key_hash(source: &str, source_ref: &str) -> String {
    let keys = keys();
    keys.first()
        .map(|key| hash_with(key, source, source_ref))
        .unwrap_or_default()
}

/// The key's hashes under every key of the ring, current first: rows
/// hashed before a key rotation still match.
pub fn key_hashes(source: &str, source_ref: &str) -> Vec<String> {
    keys()
        .iter()
        .map(|key| hash_with(key, source, source_ref))
        .collect()
}

/// A PostgreSQL advisory lock id for a tombstone key.
fn lock_id(hash: &str) -> i64 {
    let prefix = hash.get(..16).unwrap_or("0");
    u64::from_str_radix(prefix, 16).map_or(0, |v| v as i64)
}

/// Takes the key's lock exclusively until the transaction ends (PostgreSQL;
/// nothing on SQLite, whose write transactions are already exclusive).
pub async fn lock_for_erasure<C: ConnectionTrait>(txn: &C, hash: &str) -> Result<(), DbErr> {
    if txn.get_database_backend() == DatabaseBackend::Postgres {
        txn.execute_raw(Statement::from_sql_and_values(
            DatabaseBackend::Postgres,
            "SELECT pg_advisory_xact_lock($1)",
            [lock_id(hash).into()],
        ))
        .await?;
    }
    Ok(())
}

/// Which of `keys` are buried. On PostgreSQL it first takes each key's lock
/// shared (until the transaction ends), so a running erasure of one of them
/// finishes before the look-up.
pub async fn suppressed<'k, C: ConnectionTrait>(
    txn: &C,
    natural_keys: impl IntoIterator<Item = (&'k str, &'k str)>,
) -> Result<HashSet<(String, String)>, DbErr> {
    let keys = BatchKeys::of(natural_keys);
    keys.lock_shared(txn).await?;
    keys.buried(txn).await
}

/// A batch's natural keys with their hashes under every key of the ring.
pub struct BatchKeys<'k> {
    /// Each record's hashes in a row, the current key's first.
    by_hash: Vec<(String, (&'k str, &'k str))>,
    keys_per_record: usize,
}

impl<'k> BatchKeys<'k> {
    pub fn of(natural_keys: impl IntoIterator<Item = (&'k str, &'k str)>) -> Self {
        let keys = keys();
        let by_hash = natural_keys
            .into_iter()
            .flat_map(|key| {
                keys.iter()
                    .map(move |hashing| (hash_with(hashing, key.0, key.1), key))
            })
            .collect();
        Self {
            by_hash,
            keys_per_record: keys.len().max(1),
        }
    }

    /// Takes every key's lock shared until the transaction ends, so a running
    /// erasure of one of them finishes first (PostgreSQL; nothing on SQLite).
    /// A look-up must be a later statement: its snapshot is taken after the
    /// locks are granted.
    pub async fn lock_shared<C: ConnectionTrait>(&self, txn: &C) -> Result<(), DbErr> {
        if self.by_hash.is_empty() || txn.get_database_backend() != DatabaseBackend::Postgres {
            return Ok(());
        }
        // The current key's hash names the lock. Sorted, so two batches take
        // their locks in one order.
        let mut locks: Vec<i64> = self
            .by_hash
            .iter()
            .step_by(self.keys_per_record)
            .map(|(hash, _)| lock_id(hash))
            .collect();
        locks.sort_unstable();
        locks.dedup();
        txn.execute_raw(Statement::from_sql_and_values(
            DatabaseBackend::Postgres,
            "SELECT count(pg_advisory_xact_lock_shared(id)) FROM unnest($1::bigint[]) AS id",
            [locks.into()],
        ))
        .await?;
        Ok(())
    }

    /// Which of the keys are buried.
    pub async fn buried<C: ConnectionTrait>(
        &self,
        txn: &C,
    ) -> Result<HashSet<(String, String)>, DbErr> {
        if self.by_hash.is_empty() {
            return Ok(HashSet::new());
        }
        // One statement text whatever the batch size: SQLite caches a prepared
        // statement per distinct text and connection.
        let hashes: Vec<String> = self.by_hash.iter().map(|(h, _)| h.clone()).collect();
        let backend = txn.get_database_backend();
        let lookup = match backend {
            DatabaseBackend::Postgres => Statement::from_sql_and_values(
                backend,
                "SELECT key_hash FROM lead_tombstone WHERE key_hash = ANY($1)",
                [hashes.into()],
            ),
            _ => Statement::from_sql_and_values(
                backend,
                "SELECT key_hash FROM lead_tombstone WHERE key_hash IN (SELECT value FROM json_each(?))",
                [serde_json::to_string(&hashes)
                    .map_err(|e| DbErr::Json(e.to_string()))?
                    .into()],
            ),
        };
        let found: HashSet<String> = txn
            .query_all_raw(lookup)
            .await?
            .iter()
            .map(|row| row.try_get::<String>("", "key_hash"))
            .collect::<Result<_, _>>()?;
        Ok(self
            .by_hash
            .iter()
            .filter(|(hash, _)| found.contains(hash))
            .map(|(_, (s, r))| ((*s).to_owned(), (*r).to_owned()))
            .collect())
    }

    /// The hashes as three parallel arrays (hash, source, source_ref), for
    /// a statement that checks the tombstones itself (see
    /// `lead::pg_batch::upsert`).
    pub fn columns(&self) -> [Vec<String>; 3] {
        let mut columns: [Vec<String>; 3] = Default::default();
        for (hash, (source, source_ref)) in &self.by_hash {
            columns[0].push(hash.clone());
            columns[1].push((*source).to_owned());
            columns[2].push((*source_ref).to_owned());
        }
        columns
    }
}

/// Lifts the tombstone with this hash; false when there was none.
pub async fn lift<C: ConnectionTrait>(conn: &C, hash: &str) -> Result<bool, DbErr> {
    let deleted = lead_tombstone::Entity::delete_many()
        .filter(Column::KeyHash.eq(hash))
        .exec(conn)
        .await?;
    if deleted.rows_affected > 0 {
        tracing::info!(key_hash = hash, "tombstone lifted");
    }
    Ok(deleted.rows_affected > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_keyed_and_names_nobody() {
        let a = hash_with(&[1; 32], "web", "ada@example.com");
        let b = hash_with(&[2; 32], "web", "ada@example.com");
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(!a.contains("ada"));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(
            hash_with(&[1; 32], "ab", "c"),
            hash_with(&[1; 32], "a", "bc")
        );
    }
}
