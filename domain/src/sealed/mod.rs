//! Secrets sealed at rest: source secrets, pull auth values, subscription
//! signing secrets and replayable responses that reveal one are stored as
//! `lpsec:v1:<key id>:<base64(nonce ‖ ciphertext)>`, encrypted with
//! XChaCha20-Poly1305 (random 24-byte nonce, so no nonce bookkeeping).
//!
//! The associated data names the value's place (table, row, column): a sealed
//! value copied into another row or column does not open. The key id lets
//! several keys coexist: the first configured key seals, every configured key
//! opens, and `leadpipe secrets rotate` re-seals under the first
//! ([`crate::secret_rotation`]).
//!
//! Values without the `lpsec:` prefix are legacy plaintext, written before
//! sealing existed: they still open (as themselves) until rotated.

pub mod key_check;

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;
use sha2::{Digest, Sha256};

pub const PREFIX: &str = "lpsec:v1:";
/// The key id of development mode's well-known key.
pub const DEV_KEY_ID: &str = "dev";
const NONCE_LEN: usize = 24;
const KEY_LEN: usize = 32;
const MAX_KEY_ID_LEN: usize = 32;

/// Where a sealed value lives; bound into the ciphertext as associated data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place(String);

impl Place {
    fn new(table: &str, row: &str, column: &str) -> Self {
        // NUL cannot occur in any of the three, so the join is unambiguous.
        Self(format!("leadpipe\0{table}\0{row}\0{column}"))
    }

    pub fn source_secrets(source: &str) -> Self {
        Self::new("source", source, "secrets")
    }

    pub fn pull_auth_secret(source: &str) -> Self {
        Self::new("source", source, "pull_auth_secret")
    }

    pub fn verify_token(source: &str) -> Self {
        Self::new("source", source, "verify_token")
    }

    pub fn subscription_secret(id: i64) -> Self {
        Self::new("subscription", &id.to_string(), "secret")
    }

    pub fn subscription_previous_secret(id: i64) -> Self {
        Self::new("subscription", &id.to_string(), "previous_secret")
    }

    pub fn key_check(key_id: &str) -> Self {
        Self::new("sealing_key_check", key_id, "check_value")
    }

    pub fn idempotent_response(principal_id: i64, key: &str) -> Self {
        Self::new(
            "idempotency_key",
            &format!("{principal_id}\0{key}"),
            "response_body",
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error(
        "no secret key is configured: set LEADPIPE_SECRET_KEY (or LEADPIPE_SECRET_KEY_FILE), \
         or LEADPIPE_INSECURE_DEV_SECRETS=1 for a development setup without confidentiality"
    )]
    NoKey,
    #[error("the value is sealed under key '{0}', which is not configured")]
    UnknownKey(String),
    #[error("the sealed value is malformed")]
    Malformed,
    /// Wrong key material for the id, a tampered value, or one copied from
    /// another place.
    #[error("the sealed value does not open here (tampered, copied or wrong key)")]
    DoesNotOpen,
}

/// A mistake in the configured keys, said without the key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("secret key configuration: {0}")]
pub struct KeyConfigError(String);

struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
    /// A subkey for keyed hashes (`HMAC(key, purpose)`), so the sealing key
    /// itself never keys anything else.
    hashing: [u8; KEY_LEN],
}

#[derive(Default)]
struct Inner {
    /// Real keys, the sealing one first.
    keys: Vec<Key>,
    /// Development mode: seal under the well-known key when no real key is set.
    dev_mode: bool,
}

/// The configured keys. Cheap to clone; its `Debug` shows key ids only.
#[derive(Clone, Default)]
pub struct Keyring {
    inner: Arc<Inner>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("key_ids", &self.key_ids())
            .field("dev_mode", &self.inner.dev_mode)
            .finish()
    }
}

// By key ids and mode (settings compare equal when configured alike); the
// key material itself is never compared or shown.
impl PartialEq for Keyring {
    fn eq(&self, other: &Self) -> bool {
        self.key_ids() == other.key_ids() && self.inner.dev_mode == other.inner.dev_mode
    }
}

impl Eq for Keyring {}

fn dev_cipher() -> XChaCha20Poly1305 {
    // Public on purpose: development mode gives no confidentiality.
    let key: [u8; KEY_LEN] = Sha256::digest(b"leadpipe insecure development secret key").into();
    XChaCha20Poly1305::new(&key.into())
}

fn hashing_subkey(key: &[u8]) -> [u8; KEY_LEN] {
    let mac = crate::crypto::hmac_sha256_bytes(key, &[b"leadpipe hashing subkey v1"]);
    let mut out = [0u8; KEY_LEN];
    let n = KEY_LEN.min(mac.len());
    out[..n].copy_from_slice(&mac[..n]);
    out
}

fn derived_id(key: &[u8]) -> String {
    let digest = Sha256::new()
        .chain_update(b"leadpipe key id\0")
        .chain_update(key)
        .finalize();
    format!("k{}", &hex::encode(digest)[..8])
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_KEY_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Keyring {
    /// No key: sealing refuses, legacy plaintext and `dev` values still open.
    pub fn none() -> Self {
        Self::default()
    }

    /// Development mode only: seals under the well-known `dev` key.
    pub fn insecure_dev() -> Self {
        Self {
            inner: Arc::new(Inner {
                keys: Vec::new(),
                dev_mode: true,
            }),
        }
    }

    /// Keys from `spec`: entries separated by commas or line breaks, each
    /// `ID:BASE64` or just `BASE64` (the id is then derived from the key);
    /// every key is 32 bytes. Blank lines and `#` comments are ignored. The
    /// first entry seals; the others only open. `dev_mode` adds sealing under
    /// the well-known key when `spec` names no key.
    pub fn parse(spec: &str, dev_mode: bool) -> Result<Self, KeyConfigError> {
        let mut keys: Vec<Key> = Vec::new();
        let entries = spec
            .split(['\n', ','])
            .map(str::trim)
            .filter(|e| !e.is_empty() && !e.starts_with('#'));
        for (n, entry) in entries.enumerate() {
            let (id, b64) = match entry.split_once(':') {
                Some((id, b64)) => (Some(id.trim()), b64.trim()),
                None => (None, entry),
            };
            let bytes = STANDARD
                .decode(b64)
                .map_err(|_| KeyConfigError(format!("key #{} is not base64", n + 1)))?;
            if bytes.len() != KEY_LEN {
                return Err(KeyConfigError(format!(
                    "key #{} must be {KEY_LEN} bytes (base64 of 32 random bytes, e.g. `openssl rand -base64 32`), not {}",
                    n + 1,
                    bytes.len()
                )));
            }
            let id = match id {
                Some(id) if !valid_id(id) || id == DEV_KEY_ID => {
                    return Err(KeyConfigError(format!(
                        "key #{} has id '{id}': ids are 1 to 32 letters, digits, '-' or '_', and not '{DEV_KEY_ID}'",
                        n + 1
                    )));
                }
                Some(id) => id.to_owned(),
                None => derived_id(&bytes),
            };
            if keys.iter().any(|k| k.id == id) {
                return Err(KeyConfigError(format!("key id '{id}' is given twice")));
            }
            let cipher = XChaCha20Poly1305::new_from_slice(&bytes)
                .map_err(|_| KeyConfigError(format!("key #{} has the wrong length", n + 1)))?;
            let hashing = hashing_subkey(&bytes);
            keys.push(Key {
                id,
                cipher,
                hashing,
            });
        }
        Ok(Self {
            inner: Arc::new(Inner { keys, dev_mode }),
        })
    }

    /// A fixed key (id `test`) shared by every test app in a process.
    pub fn for_tests() -> Self {
        Self::parse(&format!("test:{}", STANDARD.encode([7u8; KEY_LEN])), false).unwrap_or_default()
    }

    /// The id new values are sealed under; `None`: sealing refuses.
    pub fn current_key_id(&self) -> Option<&str> {
        match self.inner.keys.first() {
            Some(key) => Some(&key.id),
            None if self.inner.dev_mode => Some(DEV_KEY_ID),
            None => None,
        }
    }

    pub fn can_seal(&self) -> bool {
        self.current_key_id().is_some()
    }

    /// Whether new values get the well-known development key.
    pub fn is_insecure_dev(&self) -> bool {
        self.inner.keys.is_empty() && self.inner.dev_mode
    }

    /// Subkeys for keyed hashes, the current key's first; the well-known
    /// development subkey when no key is configured (such hashes name nobody
    /// in clear but are as guessable as their input).
    pub fn hashing_keys(&self) -> Vec<[u8; KEY_LEN]> {
        if self.inner.keys.is_empty() {
            return vec![hashing_subkey(b"leadpipe insecure development secret key")];
        }
        self.inner.keys.iter().map(|k| k.hashing).collect()
    }

    pub fn key_ids(&self) -> Vec<&str> {
        self.inner.keys.iter().map(|k| k.id.as_str()).collect()
    }

    /// Seals `secret` for `place` under the current key.
    pub fn seal(&self, secret: &str, place: &Place) -> Result<String, SealError> {
        let (id, cipher) = match self.inner.keys.first() {
            Some(key) => (key.id.as_str(), key.cipher.clone()),
            None if self.inner.dev_mode => (DEV_KEY_ID, dev_cipher()),
            None => return Err(SealError::NoKey),
        };
        seal_with(id, &cipher, secret, place)
    }

    /// Seals under the configured key `key_id`, current or not (a key-check
    /// value is sealed under each key).
    pub fn seal_under(
        &self,
        key_id: &str,
        secret: &str,
        place: &Place,
    ) -> Result<String, SealError> {
        let key = self
            .inner
            .keys
            .iter()
            .find(|k| k.id == key_id)
            .ok_or_else(|| SealError::UnknownKey(key_id.to_owned()))?;
        seal_with(&key.id, &key.cipher, secret, place)
    }

    /// The secret in `stored` (legacy plaintext is returned as it is).
    pub fn open(&self, stored: &str, place: &Place) -> Result<String, SealError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return Ok(stored.to_owned());
        };
        let (id, b64) = rest.split_once(':').ok_or(SealError::Malformed)?;
        let cipher = if id == DEV_KEY_ID {
            dev_cipher()
        } else {
            self.inner
                .keys
                .iter()
                .find(|k| k.id == id)
                .map(|k| k.cipher.clone())
                .ok_or_else(|| SealError::UnknownKey(id.to_owned()))?
        };
        let bytes = STANDARD.decode(b64).map_err(|_| SealError::Malformed)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::Malformed);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| SealError::Malformed)?;
        let plain = cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: sealed,
                    aad: place.0.as_bytes(),
                },
            )
            .map_err(|_| SealError::DoesNotOpen)?;
        String::from_utf8(plain).map_err(|_| SealError::Malformed)
    }

    /// Whether `stored` should be re-sealed by a rotation: plaintext, or
    /// sealed under another key than the current one.
    pub fn needs_reseal(&self, stored: &str) -> bool {
        match (sealed_key_id(stored), self.current_key_id()) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(id), Some(current)) => id != current,
        }
    }
}

fn seal_with(
    id: &str,
    cipher: &XChaCha20Poly1305,
    secret: &str,
    place: &Place,
) -> Result<String, SealError> {
    let mut nonce = [0u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    let sealed = cipher
        .encrypt(
            &XNonce::from(nonce),
            Payload {
                msg: secret.as_bytes(),
                aad: place.0.as_bytes(),
            },
        )
        .map_err(|_| SealError::Malformed)?;
    let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok(format!("{PREFIX}{id}:{}", STANDARD.encode(out)))
}

/// The key id of a sealed value; `None` for legacy plaintext.
pub fn sealed_key_id(stored: &str) -> Option<&str> {
    stored
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.split_once(':'))
        .map(|(id, _)| id)
}

pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key(byte: u8) -> String {
        STANDARD.encode([byte; KEY_LEN])
    }

    #[test]
    fn seals_and_opens_in_place_only() {
        let ring = Keyring::parse(&format!("a:{}", key(1)), false).unwrap();
        let place = Place::source_secrets("partner");
        let sealed = ring.seal("whsec_secret-value", &place).unwrap();
        assert!(sealed.starts_with("lpsec:v1:a:"), "{sealed}");
        assert!(!sealed.contains("secret-value"));
        assert_eq!(ring.open(&sealed, &place).unwrap(), "whsec_secret-value");
        // Copied to another row or column: refused.
        assert_eq!(
            ring.open(&sealed, &Place::source_secrets("other")),
            Err(SealError::DoesNotOpen)
        );
        assert_eq!(
            ring.open(&sealed, &Place::pull_auth_secret("partner")),
            Err(SealError::DoesNotOpen)
        );
        // Two seals of one value differ (random nonce).
        assert_ne!(sealed, ring.seal("whsec_secret-value", &place).unwrap());
    }

    #[test]
    fn first_key_seals_every_key_opens() {
        let old = Keyring::parse(&format!("old:{}", key(1)), false).unwrap();
        let both = Keyring::parse(&format!("new:{},old:{}", key(2), key(1)), false).unwrap();
        let place = Place::subscription_secret(3);
        let sealed_old = old.seal("s3cret", &place).unwrap();
        assert_eq!(both.open(&sealed_old, &place).unwrap(), "s3cret");
        assert!(both.needs_reseal(&sealed_old));
        let sealed_new = both.seal("s3cret", &place).unwrap();
        assert_eq!(sealed_key_id(&sealed_new), Some("new"));
        assert!(!both.needs_reseal(&sealed_new));
        assert_eq!(
            old.open(&sealed_new, &place),
            Err(SealError::UnknownKey("new".into()))
        );
    }

    #[test]
    fn legacy_plaintext_opens_and_needs_reseal() {
        let ring = Keyring::for_tests();
        let place = Place::pull_auth_secret("x");
        assert_eq!(ring.open("Bearer abc", &place).unwrap(), "Bearer abc");
        assert!(ring.needs_reseal("Bearer abc"));
        assert!(!Keyring::none().needs_reseal("Bearer abc"));
    }

    #[test]
    fn no_key_refuses_to_seal_dev_mode_uses_the_dev_key() {
        let place = Place::source_secrets("x");
        assert_eq!(Keyring::none().seal("s", &place), Err(SealError::NoKey));
        let dev = Keyring::insecure_dev();
        let sealed = dev.seal("s", &place).unwrap();
        assert_eq!(sealed_key_id(&sealed), Some(DEV_KEY_ID));
        // Any keyring opens dev values, and a real key upgrades them.
        assert_eq!(Keyring::none().open(&sealed, &place).unwrap(), "s");
        assert!(Keyring::for_tests().needs_reseal(&sealed));
    }

    #[test]
    fn bad_configuration_is_refused_without_echoing_keys() {
        for bad in [
            "nope!".to_owned(),
            format!("a:{}", STANDARD.encode([1u8; 16])),
            format!("dev:{}", key(1)),
            format!("a:{},a:{}", key(1), key(2)),
            format!("bad id:{}", key(1)),
        ] {
            let err = Keyring::parse(&bad, false).unwrap_err().to_string();
            assert!(!err.contains(&key(1)), "{err}");
        }
        let derived = Keyring::parse(&format!("# comment\n{}\n", key(9)), false).unwrap();
        assert_eq!(derived.key_ids().len(), 1);
        assert!(derived.key_ids()[0].starts_with('k'));
    }

    #[test]
    fn debug_shows_ids_only() {
        let ring = Keyring::parse(&format!("prod-1:{}", key(5)), false).unwrap();
        let debug = format!("{ring:?}");
        assert!(debug.contains("prod-1"));
        assert!(!debug.contains(&key(5)));
    }
}
