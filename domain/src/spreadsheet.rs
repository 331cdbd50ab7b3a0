//! Text that ends up in a spreadsheet (the import report, the lead export):
//! a leaf both name.

use std::borrow::Cow;

/// A text cell made inert for spreadsheets: one that starts with a character
/// a spreadsheet reads as the start of a formula (`= + - @`, tab, carriage
/// return, or their full-width forms) gets a leading `'`, as OWASP advises
/// against CSV injection. The report echoes what the file's author wrote, and
/// whoever opens it in a spreadsheet should not run the author's formulas.
///
/// What a spreadsheet does not show (a byte-order mark, zero-width and
/// bidirectional characters) and leading blanks are looked past: a formula
/// behind them still runs.
pub fn neutralise(cell: &str) -> Cow<'_, str> {
    const TRIGGERS: &[char] = &[
        '=', '+', '-', '@', '\t', '\r', '\u{FF1D}', '\u{FF0B}', '\u{FF0D}', '\u{FF20}',
    ];
    let shown = cell.trim_start_matches(|c: char| {
        crate::text::is_invisible(c) || (c.is_whitespace() && !TRIGGERS.contains(&c))
    });
    if shown.starts_with(TRIGGERS) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}
