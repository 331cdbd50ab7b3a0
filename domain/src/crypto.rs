//! Keyed hashing that signatures, tombstones and sealing share: a leaf, so
//! none of them names another's folder for it.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// HMAC-SHA256 of the concatenated `parts` under `key`. HMAC accepts keys of
/// any length, so the error arm is dead; were it ever hit, the empty tag
/// fails every comparison rather than panicking.
pub(crate) fn hmac_sha256_bytes(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        return Vec::new();
    };
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}
