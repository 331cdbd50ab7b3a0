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
//! Look-alikes: a `source_ref` that differs from an erased one only in how
//! its characters are encoded (composed or decomposed accents, full-width
//! letters and digits, zero-width or bidirectional characters) reads as the
//! same key, and is buried with it. A tombstone also holds the hash of the
//! key's [`fold`]ed form (`folded_hash`), and a key is buried when its own
//! hash or its folded form's hash is either of a tombstone's hashes. Keys
//! are stored as sent; only the comparison folds. Tombstones written before
//! `folded_hash` existed hold the raw hash alone (the key itself was never
//! kept, so it cannot be folded now): they bury the exact key, and a key
//! that is already in folded form.
//!
//! On PostgreSQL an erasure holds an exclusive transaction advisory lock on
//! the key (named by its folded form, so look-alikes share it) while it
//! deletes and buries; every ingest takes the same lock
//! shared before it looks for tombstones. So an ingest of that key either
//! commits before the erasure reads (and the erasure removes what it wrote),
//! or waits and then sees the tombstone: a concurrent redelivery cannot
//! resurrect the lead. SQLite has one writer, so the question does not arise.

use std::collections::HashSet;

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use crate::entities::lead_tombstone::{self, Column};
use crate::store::Dialect;

use crate::natural_key::hash_with;
pub use crate::natural_key::{KeyHasher, fold};

/// A PostgreSQL advisory lock id for a tombstone key.
fn lock_id(hash: &str) -> i64 {
    let prefix = hash.get(..16).unwrap_or("0");
    u64::from_str_radix(prefix, 16).map_or(0, |v| v as i64)
}

/// Takes the key's lock, named by its [`folded_hash`] (the one lock of the
/// key and its look-alikes), exclusively until the transaction ends
/// (PostgreSQL; nothing on SQLite, whose write transactions are already
/// exclusive).
pub async fn lock_for_erasure<C: ConnectionTrait>(
    txn: &C,
    folded_hash: &str,
) -> Result<(), crate::Error> {
    Dialect::of(txn)
        .lock_exclusive(txn, lock_id(folded_hash))
        .await
}

/// Which of `keys` are buried. On PostgreSQL it first takes each key's lock
/// shared (until the transaction ends), so a running erasure of one of them
/// finishes before the look-up.
pub async fn suppressed<'k, C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    natural_keys: impl IntoIterator<Item = (&'k str, &'k str)>,
) -> Result<HashSet<(String, String)>, crate::Error> {
    let keys = BatchKeys::of(hasher, natural_keys);
    keys.lock_shared(txn).await?;
    keys.buried(txn).await
}

/// A batch's natural keys with their hashes, and their folded forms'
/// hashes, under every key of the ring.
pub struct BatchKeys<'k> {
    /// Each record's hashes: the key's own under every key of the ring, then
    /// its folded form's (when that differs).
    by_hash: Vec<(String, (&'k str, &'k str))>,
    /// Each record's lock: its folded form's hash under the current key.
    locks: Vec<i64>,
}

impl<'k> BatchKeys<'k> {
    pub fn of(
        hasher: &KeyHasher,
        natural_keys: impl IntoIterator<Item = (&'k str, &'k str)>,
    ) -> Self {
        let keys = hasher.keys();
        let mut by_hash = Vec::new();
        let mut locks = Vec::new();
        for key @ (source, source_ref) in natural_keys {
            let folded = fold(source_ref);
            by_hash.extend(
                keys.iter()
                    .map(|hashing| (hash_with(hashing, source, source_ref), key)),
            );
            if folded != source_ref {
                by_hash.extend(
                    keys.iter()
                        .map(|hashing| (hash_with(hashing, source, &folded), key)),
                );
            }
            if let Some(current) = keys.first() {
                locks.push(lock_id(&hash_with(current, source, &folded)));
            }
        }
        Self { by_hash, locks }
    }

    /// Takes every key's lock shared until the transaction ends, so a running
    /// erasure of one of them finishes first (PostgreSQL; nothing on SQLite).
    /// A look-up must be a later statement: its snapshot is taken after the
    /// locks are granted.
    pub async fn lock_shared<C: ConnectionTrait>(&self, txn: &C) -> Result<(), crate::Error> {
        if self.locks.is_empty() {
            return Ok(());
        }
        // Sorted, so two batches take their locks in one order.
        let mut locks = self.locks.clone();
        locks.sort_unstable();
        locks.dedup();
        Dialect::of(txn).lock_shared(txn, locks).await
    }

    /// Which of the keys are buried: one of a record's hashes is a
    /// tombstone's `key_hash` or `folded_hash`.
    pub async fn buried<C: ConnectionTrait>(
        &self,
        txn: &C,
    ) -> Result<HashSet<(String, String)>, crate::Error> {
        if self.by_hash.is_empty() {
            return Ok(HashSet::new());
        }
        let hashes: Vec<String> = self.by_hash.iter().map(|(h, _)| h.clone()).collect();
        let lookup = Dialect::of(txn).find_tombstones(hashes)?;
        let mut found: HashSet<String> = HashSet::new();
        for row in txn.query_all_raw(lookup).await? {
            found.insert(row.try_get::<String>("", "key_hash")?);
            if let Some(folded) = row.try_get::<Option<String>>("", "folded_hash")? {
                found.insert(folded);
            }
        }
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

/// Buries `(source, source_ref)` for the erasure `erasure_id` of `lead_id`:
/// its hash, and its folded form's, so look-alikes stay out too. A key
/// buried already stays buried by its first tombstone.
pub async fn bury<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    source: &str,
    source_ref: &str,
    lead_id: i64,
    erasure_id: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), crate::Error> {
    use sea_orm::ActiveValue::Set;
    lead_tombstone::Entity::insert(lead_tombstone::ActiveModel {
        key_hash: Set(hasher.key_hash(source, source_ref)),
        folded_hash: Set(Some(hasher.folded_hash(source, source_ref))),
        lead_id: Set(lead_id),
        erasure_id: Set(Some(erasure_id)),
        created_at: Set(now),
    })
    .on_conflict(
        sea_orm::sea_query::OnConflict::column(Column::KeyHash)
            .do_nothing()
            .to_owned(),
    )
    .exec_without_returning(txn)
    .await?;
    Ok(())
}

/// Lifts every tombstone that buries `(source, source_ref)`, the key's own
/// and those of keys it is a look-alike of; how many.
pub async fn lift_key<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    source: &str,
    source_ref: &str,
) -> Result<u64, crate::Error> {
    let keys = BatchKeys::of(hasher, [(source, source_ref)]);
    let hashes: Vec<String> = keys.by_hash.into_iter().map(|(hash, _)| hash).collect();
    let deleted = lead_tombstone::Entity::delete_many()
        .filter(
            sea_orm::Condition::any()
                .add(Column::KeyHash.is_in(hashes.clone()))
                .add(Column::FoldedHash.is_in(hashes)),
        )
        .exec(conn)
        .await?;
    if deleted.rows_affected > 0 {
        tracing::info!(count = deleted.rows_affected, "tombstones lifted");
    }
    Ok(deleted.rows_affected)
}

/// Lifts the tombstone with this hash (for the key and its look-alikes);
/// false when there was none.
pub async fn lift<C: ConnectionTrait>(conn: &C, hash: &str) -> Result<bool, crate::Error> {
    let Some(found) = lead_tombstone::Entity::find_by_id(hash.to_owned())
        .one(conn)
        .await?
    else {
        return Ok(false);
    };
    // Look-alikes erased apart hold tombstones of their own that bury the
    // same folded key: lifting one must lift them all, or the key stays
    // suppressed after a `204`.
    let mut buried = sea_orm::Condition::any().add(Column::KeyHash.eq(hash));
    if let Some(folded) = &found.folded_hash {
        buried = buried
            .add(Column::KeyHash.eq(folded.as_str()))
            .add(Column::FoldedHash.eq(folded.as_str()));
    }
    let deleted = lead_tombstone::Entity::delete_many()
        .filter(buried)
        .exec(conn)
        .await?;
    if deleted.rows_affected > 0 {
        tracing::info!(key_hash = hash, "tombstone lifted");
    }
    Ok(deleted.rows_affected > 0)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

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

    #[test]
    fn look_alikes_fold_to_one_key_and_other_keys_do_not() {
        let composed = "caf\u{E9}";
        for look_alike in [
            composed,
            "cafe\u{301}",
            "caf\u{200B}\u{E9}",
            "\u{FEFF}caf\u{E9}",
            "\u{200E}ca\u{200D}fe\u{301}",
            "caf\u{202E}\u{E9}\u{202C}",
        ] {
            assert_eq!(fold(look_alike), composed, "{look_alike:?}");
        }
        for look_alike in [
            "\u{FF21}-123",
            "\u{FF21}-\u{FF11}\u{FF12}\u{FF13}",
            "A\u{2060}-123",
        ] {
            assert_eq!(fold(look_alike), "A-123", "{look_alike:?}");
        }
        for other in ["a-123", "cafe", "caf\u{E8}", "A-124"] {
            assert_ne!(fold(other), "A-123");
            assert_ne!(fold(other), composed);
        }
        // Folding twice changes nothing more.
        assert_eq!(
            fold(&fold("\u{FF21}\u{200B}e\u{301}")),
            fold("\u{FF21}\u{200B}e\u{301}")
        );
        assert!(matches!(fold("form-1"), Cow::Borrowed("form-1")));
    }
}
