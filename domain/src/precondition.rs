//! `If-Match` on versioned records (RFC 9110, 13.1.1), reduced to what
//! leadpipe's entity tags can be: a record's `version` as a strong tag `"3"`.

use crate::error::Error;

/// What an `If-Match` header asks of a record's version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IfMatch {
    /// No header, or `*`: no check (the record exists, or the write 404s).
    #[default]
    Any,
    /// The write happens only if the record's tag is one of these opaque
    /// tags (the text between the quotes of a strong tag). An empty list
    /// matches nothing: a weak, opaque or malformed tag can never equal one
    /// of our strong version tags, so the answer is 412, not 422.
    OneOf(Vec<String>),
}

impl IfMatch {
    /// Parses the header value: `*`, or a comma-separated list of entity
    /// tags. Weak and malformed tags are kept out of the list (they match
    /// nothing).
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
                        .map(str::to_owned)
                })
                .collect(),
        )
    }

    /// Strong comparison (RFC 9110, 8.8.3.2): a tag matches when its text is
    /// the version's tag character for character, so `"05"` or `"+5"` is
    /// not version 5.
    pub fn matches(&self, version: i64) -> bool {
        match self {
            Self::Any => true,
            Self::OneOf(tags) => tags.contains(&version.to_string()),
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

    /// RFC 9110, 8.8.3.2: two strong tags match only when their opaque text
    /// is the same, character for character. `"05"` is not `"5"`.
    #[test]
    fn a_tag_matches_only_the_canonical_text_of_the_version() {
        assert!(IfMatch::parse("\"5\"").matches(5));
        assert!(IfMatch::parse("\"0\"").matches(0));
        for never in [
            "\"05\"",
            "\"005\"",
            "\"+5\"",
            "\" 5\"",
            "\"5 \"",
            "W/\"5\"",
            "w/\"5\"",
            "\"5.0\"",
            "\"0x5\"",
            "\"\u{FF15}\"",
        ] {
            assert!(!IfMatch::parse(never).matches(5), "{never}");
        }
        assert!(!IfMatch::parse("\"00\"").matches(0));
        assert!(IfMatch::parse("\"05\", \"5\"").matches(5));
    }
}
