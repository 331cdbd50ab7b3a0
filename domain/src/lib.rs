//! leadpipe's model and rules. Free of HTTP and job-runtime types: every door
//! (REST intake, webhooks, reconcile, import) calls into this crate.

/// `Display`, `FromStr` (by `as_str` over `ALL`; the error names the
/// value and `$what`) and comparison with the stored text, for the
/// state-machine enums kept as text columns.
macro_rules! text_enum {
    ($name:ident, $what:literal) => {
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| format!($what, s))
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

pub mod actor;
pub mod auth;
pub mod business_hours;
pub mod clock;
pub mod crm;
pub mod crypto;
pub mod db;
pub mod entities;
pub mod erasure;
pub mod error;
pub mod field_presence;
pub mod idempotency;
pub mod ids;
pub mod import;
pub mod inbound;
pub mod json_number;
pub mod lead;
pub mod lifecycle;
pub mod natural_key;
pub mod net_guard;
pub mod ops;
pub mod outbound;
pub mod page;
pub mod precondition;
pub mod reconcile;
pub mod redact;
pub mod retention;
pub mod retry;
pub mod routing;
pub mod sealed;
pub mod secret_rotation;
pub mod session;
pub mod source_name;
pub mod spreadsheet;
pub mod store;
pub mod text;
pub mod users;

pub use error::{Error, FieldError};
