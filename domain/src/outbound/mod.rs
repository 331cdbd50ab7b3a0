//! What goes out to downstream systems: events written in the same
//! transaction as the change ([`outbox`]), the systems that receive them
//! ([`subscription`]), one delivery per event and subscription
//! ([`delivery`]) and the payload type of each event ([`events`]). The
//! guard that keeps every outgoing request off internal addresses is
//! [`crate::net_guard`].

pub mod delivery;
pub mod events;
pub mod outbox;
pub mod subscription;
