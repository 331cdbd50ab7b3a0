//! Keyed hashes of natural keys `(source, source_ref)`: what a tombstone,
//! an erasure and a stored reply's subjects hold instead of the key. A
//! leaf: the store holds the hasher, the write paths use it.

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

use crate::sealed::Keyring;

/// Hashes natural keys under the keyring's hashing subkeys, current first.
/// One per [`crate::store::Store`]: every door's write path reaches it
/// there.
#[derive(Clone)]
pub struct KeyHasher {
    keys: Vec<[u8; 32]>,
}

impl KeyHasher {
    /// The hashing subkeys, current first.
    pub(crate) fn keys(&self) -> &[[u8; 32]] {
        &self.keys
    }

    pub fn new(keyring: &Keyring) -> Self {
        Self {
            keys: keyring.hashing_keys(),
        }
    }

    /// The tombstone key of `(source, source_ref)` under the current key.
    pub fn key_hash(&self, source: &str, source_ref: &str) -> String {
        self.keys
            .first()
            .map(|key| hash_with(key, source, source_ref))
            .unwrap_or_default()
    }

    /// The hash of the key's folded form under the current key: a
    /// tombstone's `folded_hash`, and the name of the key's lock.
    pub fn folded_hash(&self, source: &str, source_ref: &str) -> String {
        self.key_hash(source, &fold(source_ref))
    }

    /// The key's hashes under every key of the ring, current first: rows
    /// hashed before a key rotation still match.
    pub fn key_hashes(&self, source: &str, source_ref: &str) -> Vec<String> {
        self.keys
            .iter()
            .map(|key| hash_with(key, source, source_ref))
            .collect()
    }
}

pub(crate) fn hash_with(key: &[u8; 32], source: &str, source_ref: &str) -> String {
    hex::encode(crate::crypto::hmac_sha256_bytes(
        key,
        &[source.as_bytes(), b"\0", source_ref.as_bytes()],
    ))
}

/// The form in which a tombstone compares a `source_ref`: invisible
/// characters (zero-width, byte-order mark, bidirectional controls) removed,
/// then Unicode NFKC, which composes accents (`e` + U+0301 is `é`) and
/// folds compatibility forms (full-width `Ａ１` is `A1`). Keys with the same
/// folded form read as one key. Letter case is kept: senders' keys may
/// differ by case alone.
pub fn fold(source_ref: &str) -> Cow<'_, str> {
    if source_ref.is_ascii() {
        // NFKC leaves ASCII as it is, and no invisible character is ASCII.
        return Cow::Borrowed(source_ref);
    }
    Cow::Owned(
        source_ref
            .chars()
            .filter(|c| !crate::text::is_invisible(*c))
            .nfkc()
            .collect(),
    )
}
