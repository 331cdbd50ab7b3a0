//! What a delivery to a name nobody configured is verified against: a source
//! of its own with a random sealed secret. An unknown name then costs what a
//! known one costs (the sealed secret opened, the signature computed and
//! compared), so the answer's timing does not tell configured names apart.

use chrono::Utc;
use rand::RngCore;

use super::{Source, to_source};
use crate::entities::source;
use crate::sealed::{Keyring, Place};

/// Built once at start; see the module docs.
pub struct StandIn {
    model: source::Model,
}

const NAME: &str = "unknown-source";

impl StandIn {
    pub fn new(keys: &Keyring) -> Self {
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let secret = hex::encode(secret);
        // Sealed as a configured source's secret is (plaintext when this
        // process has no key, as such a process's sources are).
        let stored = keys
            .seal(&secret, &Place::source_secrets(NAME))
            .unwrap_or(secret);
        let now = Utc::now();
        Self {
            model: source::Model {
                name: NAME.to_owned(),
                scheme: "hmac-sha256".to_owned(),
                secrets: serde_json::json!([stored]),
                tolerance_secs: 300,
                signature_header: None,
                event_id_header: None,
                event_id_pointer: None,
                event_type_header: None,
                event_type_pointer: None,
                allowed_event_types: None,
                record_pointer: String::new(),
                source_ref_pointer: "/id".to_owned(),
                email_pointer: None,
                name_pointer: None,
                phone_pointer: None,
                company_pointer: None,
                updated_at_pointer: None,
                created_at: now,
                updated_at: now,
                pull_url: None,
                pull_auth_header: None,
                pull_auth_secret: None,
                pull_page_size: 100,
                reconcile_cron: None,
                reconcile_cursor: None,
                version: 1,
            },
        }
    }

    /// The stand-in, its secret opened just as [`super::find`] opens a
    /// configured source's.
    pub fn source(&self, keys: &Keyring) -> Option<Source> {
        to_source(&self.model, Some(keys)).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::sealed;

    #[test]
    fn the_stand_in_opens_a_sealed_secret_as_a_configured_source_does() {
        let keys = Keyring::for_tests();
        let stand_in = StandIn::new(&keys);
        let stored: Vec<String> = serde_json::from_value(stand_in.model.secrets.clone()).unwrap();
        assert!(
            sealed::is_sealed(&stored[0]),
            "the secret is sealed, so opening it costs the same"
        );
        let source = stand_in.source(&keys).unwrap();
        assert_eq!(source.name, NAME);
        // Without a key, configured sources hold plaintext; so does the stand-in.
        let plain = StandIn::new(&Keyring::none());
        let stored: Vec<String> = serde_json::from_value(plain.model.secrets.clone()).unwrap();
        assert!(!sealed::is_sealed(&stored[0]));
        assert!(plain.source(&Keyring::none()).is_some());
    }
}
