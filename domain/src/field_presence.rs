//! For PATCH fields: `null` and absent are different things. A change's
//! optional field is a [`Patch`]: not given (leave it), `null` (clear it), or
//! a value.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One field of a change. In a body: absent is [`Patch::Absent`], `null` is
/// [`Patch::Null`], anything else [`Patch::Value`]. A field takes
/// `#[serde(default, skip_serializing_if = "Patch::is_absent")]` and
/// `#[schema(value_type = Option<T>)]`: serde hands a missing field to a
/// type exactly as it hands `null` (so absent needs the field's default),
/// a type cannot leave itself out of its struct, and a container-level
/// `default` would put `"default": null` in every property's schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Patch<T> {
    /// Not given: the field stays as it is.
    #[default]
    Absent,
    /// Given as `null`: the field is cleared.
    Null,
    Value(T),
}

impl<T> Patch<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, Self::Absent)
    }

    /// `None`: leave the field alone; `Some(None)`: clear it;
    /// `Some(Some(v))`: set it.
    pub fn change(self) -> Option<Option<T>> {
        match self {
            Self::Absent => None,
            Self::Null => Some(None),
            Self::Value(value) => Some(Some(value)),
        }
    }

    /// The value given; `None` when absent or `null`.
    pub fn value(self) -> Option<T> {
        match self {
            Self::Value(value) => Some(value),
            Self::Absent | Self::Null => None,
        }
    }

    pub fn as_ref(&self) -> Patch<&T> {
        match self {
            Self::Absent => Patch::Absent,
            Self::Null => Patch::Null,
            Self::Value(value) => Patch::Value(value),
        }
    }
}

impl<T> From<Option<Option<T>>> for Patch<T> {
    fn from(change: Option<Option<T>>) -> Self {
        match change {
            None => Self::Absent,
            Some(None) => Self::Null,
            Some(Some(value)) => Self::Value(value),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<T>::deserialize(d).map(|value| value.map_or(Self::Null, Self::Value))
    }
}

impl<T: Serialize> Serialize for Patch<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Absent | Self::Null => s.serialize_none(),
            Self::Value(value) => value.serialize(s),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Change {
        #[serde(default, skip_serializing_if = "Patch::is_absent")]
        name: Patch<String>,
    }

    #[test]
    fn absent_null_and_a_value_are_three_things_and_write_back_as_read() {
        for (body, name) in [
            ("{}", Patch::Absent),
            (r#"{"name":null}"#, Patch::Null),
            (r#"{"name":"x"}"#, Patch::Value("x".to_owned())),
        ] {
            let read: Change = serde_json::from_str(body).unwrap();
            assert_eq!(read, Change { name: name.clone() });
            assert_eq!(serde_json::to_string(&read).unwrap(), body);
        }
        assert_eq!(Patch::from(Some(None::<i64>)), Patch::Null);
        assert_eq!(Patch::Value(3).change(), Some(Some(3)));
        assert_eq!(Patch::<i64>::Absent.change(), None);
    }
}
