//! The per-row report as CSV: `row,line,source_ref,outcome,lead_id,reason`.

use std::borrow::Cow;

use crate::entities::import_row;

pub const HEADER: &str = "row,line,source_ref,outcome,lead_id,reason\n";

/// Report rows as CSV lines (quoted where needed), without the header.
pub fn to_csv(rows: &[import_row::Model]) -> Vec<u8> {
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::with_capacity(rows.len() * 64));
    for row in rows {
        let lead_id = row.lead_id.map(|id| id.to_string()).unwrap_or_default();
        // Writing to a Vec cannot fail.
        let _ = writer.write_record([
            row.row_number.to_string().as_str(),
            row.line.to_string().as_str(),
            &neutralise(row.source_ref.as_deref().unwrap_or("")),
            &neutralise(row.outcome.as_str()),
            lead_id.as_str(),
            &neutralise(row.reason.as_deref().unwrap_or("")),
        ]);
    }
    writer.into_inner().unwrap_or_default()
}

/// A text cell made inert for spreadsheets: one that starts with a character
/// a spreadsheet reads as the start of a formula (`= + - @`, tab, carriage
/// return, or their full-width forms) gets a leading `'`, as OWASP advises
/// against CSV injection. The report echoes what the file's author wrote, and
/// whoever opens it in a spreadsheet should not run the author's formulas.
pub fn neutralise(cell: &str) -> Cow<'_, str> {
    const TRIGGERS: &[char] = &[
        '=', '+', '-', '@', '\t', '\r', '\u{FF1D}', '\u{FF0B}', '\u{FF0D}', '\u{FF20}',
    ];
    if cell.starts_with(TRIGGERS) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

#[cfg(test)]
mod tests {
    use super::neutralise;

    #[test]
    fn formula_triggers_are_prefixed_and_plain_text_is_untouched() {
        for cell in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "\u{FF1D}1+1"] {
            assert_eq!(neutralise(cell), format!("'{cell}"), "{cell:?}");
        }
        for cell in ["", "abc", "a=b", "1-2", "ref-1"] {
            assert_eq!(neutralise(cell), cell);
        }
    }
}
