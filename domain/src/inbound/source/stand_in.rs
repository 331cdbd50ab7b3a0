//! What a delivery to a name nobody configured is verified against: a source
//! of its own for each scheme, with a random sealed secret, chosen by the
//! signature header the delivery carries. An unknown name then costs what a
//! known one costs (the sealed secret opened, the scheme's header parsed,
//! the signature computed and compared), so the answer's timing does not
//! tell configured names apart.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::Utc;
use rand::RngCore;

use super::{Source, to_source};
use crate::entities::source;
use crate::inbound::signature::{
    HeaderLookup, Scheme, calendly, github, hmac_header, hubspot, meta, slack, standard_webhooks,
    typeform,
};
use crate::sealed::{Keyring, Place};

/// Built once at start; see the module docs.
pub struct StandIn {
    /// One per scheme, in `Scheme::ALL` order.
    models: Vec<(Scheme, source::Model)>,
}

const NAME: &str = "unknown-source";

impl StandIn {
    pub fn new(keys: &Keyring) -> Self {
        let models = Scheme::ALL
            .into_iter()
            .map(|scheme| (scheme, model(scheme, keys)))
            .collect();
        Self { models }
    }

    /// The stand-in for the scheme whose signature header `headers` carry
    /// (plain `hmac-sha256` when none), its secret opened just as
    /// [`super::find`] opens a configured source's.
    pub fn source(&self, keys: &Keyring, headers: &dyn HeaderLookup) -> Option<Source> {
        let scheme = Scheme::ALL
            .into_iter()
            .find(|scheme| headers.header(signature_header(*scheme)).is_some())
            .or_else(|| {
                headers
                    .header(standard_webhooks::SVIX_SIGNATURE_HEADER)
                    .map(|_| Scheme::StandardWebhooks)
            })
            .unwrap_or(Scheme::HmacSha256);
        let (_, model) = self.models.iter().find(|(s, _)| *s == scheme)?;
        to_source(model, Some(keys)).ok()
    }
}

fn signature_header(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::StandardWebhooks => "webhook-signature",
        Scheme::Stripe => "stripe-signature",
        Scheme::Github => github::SIGNATURE_HEADER,
        Scheme::HmacSha256 => hmac_header::DEFAULT_SIGNATURE_HEADER,
        Scheme::Typeform => typeform::SIGNATURE_HEADER,
        Scheme::Calendly => calendly::SIGNATURE_HEADER,
        Scheme::Slack => slack::SIGNATURE_HEADER,
        // GitHub's header: a delivery carrying it gets GitHub's stand-in,
        // the same work.
        Scheme::MetaLeadAds => meta::SIGNATURE_HEADER,
        Scheme::HubspotV3 => hubspot::SIGNATURE_HEADER,
    }
}

fn model(scheme: Scheme, keys: &Keyring) -> source::Model {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = match scheme {
        Scheme::StandardWebhooks => format!("whsec_{}", STANDARD.encode(bytes)),
        _ => hex::encode(bytes),
    };
    // Sealed as a configured source's secret is (plaintext when this
    // process has no key, as such a process's sources are).
    let stored = keys
        .seal(&secret, &Place::source_secrets(NAME))
        .unwrap_or(secret);
    let now = Utc::now();
    source::Model {
        name: NAME.to_owned(),
        scheme: scheme.as_str().to_owned(),
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
        expected_interval_secs: None,
        events_pointer: None,
        verify_token: None,
        version: 1,
        state: "active".into(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::sealed;

    #[test]
    fn the_stand_in_takes_the_scheme_of_the_signature_header_sent() {
        let keys = Keyring::for_tests();
        let stand_in = StandIn::new(&keys);
        for (scheme, model) in &stand_in.models {
            let stored: Vec<String> = serde_json::from_value(model.secrets.clone()).unwrap();
            assert!(
                sealed::is_sealed(&stored[0]),
                "{scheme:?}: opening costs the same"
            );
        }
        for (header, scheme) in [
            ("X-Hub-Signature-256", Scheme::Github),
            ("Stripe-Signature", Scheme::Stripe),
            ("webhook-signature", Scheme::StandardWebhooks),
            ("svix-signature", Scheme::StandardWebhooks),
            ("x-signature", Scheme::HmacSha256),
            ("Typeform-Signature", Scheme::Typeform),
            ("Calendly-Webhook-Signature", Scheme::Calendly),
            ("X-Slack-Signature", Scheme::Slack),
            ("X-HubSpot-Signature-v3", Scheme::HubspotV3),
            ("x-other", Scheme::HmacSha256),
        ] {
            let headers = [(header, "v")];
            let source = stand_in.source(&keys, &headers).unwrap();
            assert_eq!(source.scheme.scheme, scheme, "{header}");
        }
        // Without a key, configured sources hold plaintext; so does the stand-in.
        let plain = StandIn::new(&Keyring::none());
        let headers: [(&str, &str); 0] = [];
        assert!(plain.source(&Keyring::none(), &headers).is_some());
    }
}
