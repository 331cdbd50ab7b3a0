//! Keyed hashing that signatures, tombstones and sealing share, and the
//! Standard Webhooks secrets both directions use: a leaf, so none of them
//! names another's folder for it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::Sha256;

/// The prefix of a Standard Webhooks signing secret.
pub const STANDARD_SECRET_PREFIX: &str = "whsec_";

/// Length of the random key in [`generate_standard_secret`]; the spec asks
/// for 24–64 bytes.
pub(crate) const GENERATED_SECRET_BYTES: usize = 24;

/// New `whsec_` secret: base64 of 24 bytes from the thread-local CSPRNG.
pub fn generate_standard_secret() -> String {
    let mut key = [0u8; GENERATED_SECRET_BYTES];
    rand::rng().fill_bytes(&mut key);
    format!("{STANDARD_SECRET_PREFIX}{}", STANDARD.encode(key))
}

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
