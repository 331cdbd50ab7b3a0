//! Characters that take up no room on screen.

/// A character that shows as nothing: the byte-order mark (zero-width
/// no-break space), the zero-width space, non-joiner and joiner, the word
/// joiner, and the bidirectional marks, embeddings, overrides and isolates.
/// Neither a spreadsheet nor a person reading a key can see them.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{FEFF}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2060}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{061C}'
    )
}

#[cfg(test)]
mod tests {
    use super::is_invisible;

    #[test]
    fn only_characters_that_show_as_nothing_are_invisible() {
        for c in "\u{FEFF}\u{200B}\u{200C}\u{200D}\u{200E}\u{200F}\u{2060}\u{202A}\u{202E}\u{2066}\u{2069}\u{061C}".chars() {
            assert!(is_invisible(c), "{c:?}");
        }
        for c in "a= \t\u{A0}\u{301}\u{2010}\u{2070}\u{FF1D}".chars() {
            assert!(!is_invisible(c), "{c:?}");
        }
    }
}
