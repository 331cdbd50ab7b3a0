//! The webhook door's policy: a delivery to a source name is verified
//! against that source's signature scheme (or, for a name nobody
//! configured, against a stand-in, so the answer's timing does not tell
//! names apart), spends the source's allowance only once verified, and is
//! stored in the inbox once per event, waking the inbox workers. Each
//! outcome is counted (`leadpipe_webhook_deliveries_total{source, result,
//! reason}`) and logged by source and reason only, never a signature or a
//! secret. Reading the body and limiting clients are the HTTP side's.

use chrono::{DateTime, Utc};

use crate::Error;
use crate::inbound::inbox::InboxState;
use crate::inbound::inbox::receive::{Delivery, Received, receive, receive_events};
use crate::inbound::signature::standard_webhooks::SvixNames;
use crate::inbound::signature::{self, Scheme, VerifyRequest, meta, slack};
use crate::inbound::source::{self, Source, StandIn};
use crate::sealed::Keyring;
use crate::source_name::is_valid_source_name;
use crate::store::{Store, Work};

/// The metric label of a delivery to a name nobody configured: not the
/// caller's name, since anyone may post to any path.
pub const UNKNOWN_SOURCE: &str = "(unknown)";

/// A delivery's source, looked up by the name it was posted to.
pub struct Door {
    found: Option<Source>,
}

/// What a verified delivery came to.
#[derive(Debug)]
pub enum Accepted {
    /// Stored in the inbox (or found there: a repeat).
    Stored(Received),
    /// A delivery of a source with an `events_pointer`: each event it
    /// carried, stored or found.
    Batch(Vec<Received>),
    /// A sender's handshake, answered with this challenge and not stored:
    /// a `slack` source's `url_verification`.
    Challenge(String),
}

/// Why a delivery was not stored.
#[derive(Debug)]
pub enum Refused<E> {
    /// No such source, or the signature did not verify (the reason, for
    /// logs and metrics only: the sender gets one answer for all).
    Unverified(&'static str),
    /// The source's allowance refused it (the allowance's own error).
    OverAllowance(E),
    Failed(Error),
}

/// Finds the source `name` names (a name that is not a source name finds
/// none, without a query).
pub async fn door(store: &Store, keys: &Keyring, name: &str) -> Result<Door, Error> {
    let found = if is_valid_source_name(name) {
        source::find(store, name, keys).await?
    } else {
        None
    };
    Ok(Door { found })
}

impl Door {
    /// The source's name as metrics label it.
    pub fn label(&self) -> &str {
        self.found
            .as_ref()
            .map_or(UNKNOWN_SOURCE, |s| s.name.as_str())
    }

    /// Meta's subscription handshake: the challenge to answer when the
    /// source is a `meta-lead-ads` one and the handshake names its
    /// `verify_token`; `None` for anything else, a name nobody configured
    /// included (the same work and answer, so names cannot be probed).
    pub fn handshake(&self, handshake: &meta::Handshake) -> Option<String> {
        let token = self
            .found
            .as_ref()
            .filter(|s| s.scheme.scheme == Scheme::MetaLeadAds)
            .and_then(|s| s.verify_token.as_ref())
            .map(|token| token.0.as_str());
        let challenge = meta::handshake_challenge(handshake, token);
        match &challenge {
            Some(_) => {
                count(self.label(), "challenge", "");
                tracing::info!(source = %self.label(), "webhook handshake answered");
            }
            None => {
                count(self.label(), "rejected", "handshake_refused");
                tracing::warn!(source = %self.label(), reason = "handshake_refused", "webhook rejected");
            }
        }
        challenge
    }

    /// Counts a delivery refused before its signature could be checked
    /// (its body too large, too slow or unreadable).
    pub fn refused_unread(&self, reason: &'static str) {
        count(self.label(), "rejected", reason);
    }

    /// Verifies `delivery` and stores it once: `allowance(source)` is asked
    /// only for a verified delivery, so nobody spends a sender's allowance
    /// with junk.
    pub async fn accept<E>(
        self,
        store: &Store,
        keys: &Keyring,
        stand_in: &StandIn,
        delivery: &Delivery<'_>,
        now: DateTime<Utc>,
        allowance: impl FnOnce(&str) -> Result<(), E>,
    ) -> Result<Accepted, Refused<E>> {
        // A name nobody configured is verified against a stand-in: the same
        // work, so the answer's timing does not tell the names apart.
        let known = self.found.is_some();
        let Some(source) = self
            .found
            .or_else(|| stand_in.source(keys, delivery.headers))
        else {
            return Err(Refused::Failed(Error::Db(sea_orm::DbErr::Custom(
                "the stand-in source did not open".into(),
            ))));
        };
        // Svix's header names stand for the Standard Webhooks ones, for the
        // event's identity as for its signature.
        let svix_names = SvixNames::new(delivery.headers);
        let standard = Delivery {
            headers: &svix_names,
            body: delivery.body,
            correlation_id: delivery.correlation_id.clone(),
            target: delivery.target,
        };
        let delivery = if source.scheme.scheme == Scheme::StandardWebhooks {
            &standard
        } else {
            delivery
        };
        let verified = signature::verify_evenly(
            &source.scheme,
            &VerifyRequest {
                headers: delivery.headers,
                body: delivery.body,
                now_unix: now.timestamp(),
                target: delivery.target,
            },
        );
        let rejected = match (known, verified) {
            (true, Ok(_)) => None,
            (false, _) => Some("unknown_source"),
            (true, Err(err)) => Some(err.reason()),
        };
        if let Some(reason) = rejected {
            let label = if known { &source.name } else { UNKNOWN_SOURCE };
            tracing::warn!(source = %label, reason, "webhook rejected");
            count(label, "rejected", reason);
            return Err(Refused::Unverified(reason));
        }
        if let Err(over) = allowance(&source.name) {
            count(&source.name, "rejected", "rate_limited");
            return Err(Refused::OverAllowance(over));
        }
        if source.scheme.scheme == Scheme::Slack
            && let Some(challenge) = slack::url_verification_challenge(delivery.body)
        {
            count(&source.name, "challenge", "");
            tracing::info!(source = %source.name, "webhook handshake answered");
            return Ok(Accepted::Challenge(challenge));
        }
        // One statement on the pool a row: the store takes SQLite's write turn.
        if let Some(pointer) = &source.events {
            let batch = receive_events(store, store.hasher(), &source, delivery, pointer, now)
                .await
                .map_err(|error| {
                    if matches!(error, Error::Invalid(_)) {
                        tracing::warn!(source = %source.name, "webhook refused: too many events");
                        count(&source.name, "rejected", "too_many_events");
                    }
                    Refused::Failed(error)
                })?;
            for received in &batch {
                noted(&source.name, received);
            }
            if batch.iter().any(Received::needs_processing) {
                store.enqueued(Work::Inbox);
            }
            return Ok(Accepted::Batch(batch));
        }
        let received = receive(store, store.hasher(), &source, delivery, now)
            .await
            .map_err(Refused::Failed)?;
        noted(&source.name, &received);
        if received.needs_processing() {
            store.enqueued(Work::Inbox);
        }
        Ok(Accepted::Stored(received))
    }
}

/// Counts and logs a stored (or found) event.
fn noted(source: &str, received: &Received) {
    let result = if received.duplicate {
        "duplicate"
    } else if received.state == InboxState::Skipped {
        "skipped"
    } else {
        "accepted"
    };
    count(source, result, "");
    tracing::info!(
        source = %source,
        inbox_event_id = received.id,
        state = received.state.as_str(),
        duplicate = received.duplicate,
        "webhook received"
    );
}

/// `leadpipe_webhook_deliveries_total{source, result, reason}`.
pub fn count(source: &str, result: &'static str, reason: &'static str) {
    metrics::counter!(
        "leadpipe_webhook_deliveries_total",
        "source" => source.to_owned(),
        "result" => result,
        "reason" => reason
    )
    .increment(1);
}
