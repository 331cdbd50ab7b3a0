//! A record whose `version` is its `ETag`: a wire notion the HTTP layer
//! reads (`ETag`, `If-Match`), so it lives with the wire types.

/// A record whose `version` is its `ETag` and the `If-Match` it accepts.
pub trait Versioned {
    fn version(&self) -> i64;
}

/// `Versioned` for types with a `version` field.
macro_rules! versioned {
    ($($model:ty),*) => {$(
        impl $crate::wire::versioned::Versioned for $model {
            fn version(&self) -> i64 {
                self.version
            }
        }
    )*};
}
pub(crate) use versioned;
