//! `If-Match` on versioned records (RFC 9110, 13.1.1), reduced to what
//! leadpipe's entity tags can be: a record's `version` as a strong tag `"3"`.

use crate::error::Error;

/// What an `If-Match` header asks of a record's version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IfMatch {
    /// No header, or `*`: no check (the record exists, or the write 404s).
    #[default]
    Any,
    /// The write happens only if the record's version is one of these. An
    /// empty list matches nothing: a weak, opaque or malformed tag can never
    /// equal one of our strong version tags, so the answer is 412, not 422.
    OneOf(Vec<i64>),
}

impl IfMatch {
    /// Parses the header value: `*`, or a comma-separated list of entity
    /// tags. Tags that are not one of our strong version tags are kept out
    /// of the list (they match no version).
    pub fn parse(value: &str) -> Self {
        let value = value.trim();
        if value == "*" {
            return Self::Any;
        }
        Self::OneOf(
            value
                .split(',')
                .filter_map(|tag| {
                    tag.trim()
                        .strip_prefix('"')
                        .and_then(|t| t.strip_suffix('"'))
                        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|t| t.parse::<i64>().ok())
                })
                .collect(),
        )
    }

    pub fn matches(&self, version: i64) -> bool {
        match self {
            Self::Any => true,
            Self::OneOf(versions) => versions.contains(&version),
        }
    }

    /// `PreconditionFailed` (naming the current version) unless it matches.
    pub fn check(&self, version: i64) -> Result<(), Error> {
        if self.matches(version) {
            Ok(())
        } else {
            Err(Error::PreconditionFailed { current: version })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IfMatch;

    #[test]
    fn strong_version_tags_match_and_anything_else_never_does() {
        assert!(IfMatch::parse("*").matches(7));
        assert!(IfMatch::parse("\"3\"").matches(3));
        assert!(!IfMatch::parse("\"3\"").matches(4));
        assert!(IfMatch::parse("\"1\", \"3\"").matches(3));
        for never in [
            "\"stale-etag\"",
            "W/\"3\"",
            "3",
            "\"\"",
            "\"+3\"",
            "garbage",
            "",
        ] {
            assert!(!IfMatch::parse(never).matches(3), "{never}");
        }
    }
}
