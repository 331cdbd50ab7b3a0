//! For PATCH fields: `null` (`Some(None)`) and absent (`None`, with
//! `#[serde(default)]`) are different things.

/// `#[serde(default, deserialize_with = "present")]` on an
/// `Option<Option<T>>`: a field given (even as `null`) is `Some`.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}
