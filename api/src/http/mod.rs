//! The HTTP plumbing every endpoint shares: application state, the auth and
//! role extractors, the session cookie, body reading and limits, correlation ids, idempotency,
//! rate limits, the error type and its problem catalogue, metrics, upload
//! spools, the imports running in the background, the default response
//! headers and the watch that keeps a kept-alive connection's next request
//! in time.

pub mod admission;
pub mod admitted;
pub mod allow;
pub mod auth;
pub mod body;
pub mod body_limit;
pub mod correlation;
pub mod error;
pub mod idempotency;
pub mod imports;
pub mod kept_alive;
pub mod key_health;
pub mod list;
pub mod metrics;
pub mod params;
pub mod path_id;
pub mod rate_limit;
pub mod read_replica;
pub mod security_headers;
pub mod session;
pub mod spool;
pub mod state;
pub mod write;
