//! A record's id in a request path, spelled only as the API writes it:
//! decimal digits without a sign or a leading zero. `web::Path<i64>` also
//! takes `01` and `+1`, so one record had many addresses, and anything
//! keyed by the address (a stored idempotent response) missed its twins.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// `/api/leads/{id}`'s `{id}`; any other spelling is `404`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathId(pub i64);

impl PathId {
    pub fn parse(text: &str) -> Option<Self> {
        let canonical = text == "0"
            || (!text.is_empty()
                && !text.starts_with('0')
                && text.bytes().all(|b| b.is_ascii_digit()));
        if !canonical {
            return None;
        }
        text.parse().ok().map(Self)
    }
}

impl<'de> Deserialize<'de> for PathId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Canonical;

        impl Visitor<'_> for Canonical {
            type Value = PathId;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an id: decimal digits, no sign, no leading zero")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<PathId, E> {
                PathId::parse(text)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(text), &self))
            }
        }

        deserializer.deserialize_str(Canonical)
    }
}

#[cfg(test)]
mod tests {
    use super::PathId;

    #[test]
    fn only_the_canonical_spelling_is_an_id() {
        assert_eq!(PathId::parse("1"), Some(PathId(1)));
        assert_eq!(PathId::parse("0"), Some(PathId(0)));
        assert_eq!(PathId::parse("9223372036854775807"), Some(PathId(i64::MAX)));
        for other in [
            "01",
            "+1",
            "-1",
            " 1",
            "1 ",
            "",
            "1e3",
            "0x1",
            "9223372036854775808",
            "١",
        ] {
            assert_eq!(PathId::parse(other), None, "{other:?}");
        }
    }
}
