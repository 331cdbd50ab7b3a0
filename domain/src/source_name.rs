//! What a source may be called: a leaf every door and the token rules
//! check names against, without naming the lead folder.

/// The longest source name.
pub const MAX_SOURCE_LEN: usize = 64;

/// `^[a-z0-9][a-z0-9_.-]{0,63}$`: safe in URLs, logs and metric labels.
pub fn is_valid_source_name(source: &str) -> bool {
    let mut chars = source.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    first_ok
        && source.len() <= MAX_SOURCE_LEN
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
}
