//! What a write's answer holds about people: recorded with a stored copy of
//! it (`Idempotency-Key`), so an erasure finds every copy by whom it is
//! about. A leaf: wire types name it without reaching the HTTP layer.

use domain::idempotency::Subject;

/// What a reply's body holds about people. Every body a write answers
/// with says so (the bound on `idempotency::Reply::new`), so a stored copy records its
/// subjects and an erasure finds it by them.
pub trait About {
    fn subjects(&self) -> Vec<Subject>;
}

/// `About` for bodies that hold nothing about a person.
macro_rules! about_nobody {
    ($($body:ty),* $(,)?) => {$(
        impl $crate::wire::about::About for $body {
            fn subjects(&self) -> Vec<domain::idempotency::Subject> {
                Vec::new()
            }
        }
    )*};
}
pub(crate) use about_nobody;
