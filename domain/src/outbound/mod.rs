//! What goes out to downstream systems: events written in the same
//! transaction as the change ([`outbox`]), the systems that receive them
//! ([`subscription`]), one delivery per event and subscription
//! ([`delivery`]), the payload type of each event ([`events`]), and the guard that keeps every outgoing request off
//! internal addresses ([`net_guard`]).

pub mod delivery;
pub mod events;
pub mod net_guard;
pub mod outbox;
pub mod subscription;
