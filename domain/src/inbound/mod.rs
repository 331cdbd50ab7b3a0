//! What comes in from senders: a webhook source's configuration
//! ([`source`]), how its deliveries are signed and verified ([`signature`]),
//! how a delivery's body maps to a lead record ([`mapping`]), and the inbox
//! that stores each event once and turns it into a lead ([`inbox`]); the
//! webhook door's policy ([`accept`]).

pub mod accept;
pub mod events;
pub mod inbox;
pub mod mapping;
pub mod signature;
pub mod source;
