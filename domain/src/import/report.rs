//! The per-row report as CSV: `row,line,source_ref,outcome,lead_id,reason`.

use crate::entities::import_row;
use crate::spreadsheet::neutralise;

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

#[cfg(test)]
mod tests {
    use crate::spreadsheet::neutralise;

    #[test]
    fn formula_triggers_are_prefixed_and_plain_text_is_untouched() {
        for cell in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "\u{FF1D}1+1"] {
            assert_eq!(neutralise(cell), format!("'{cell}"), "{cell:?}");
        }
        for cell in ["", "abc", "a=b", "1-2", "ref-1"] {
            assert_eq!(neutralise(cell), cell);
        }
    }

    /// A spreadsheet skips what it does not show: a byte-order mark, a
    /// zero-width or bidirectional character, or spaces before `=` still
    /// leave a live formula.
    #[test]
    fn invisible_and_blank_characters_before_a_trigger_do_not_hide_it() {
        let hidden = [
            "\u{FEFF}",
            "\u{200B}",
            "\u{200C}",
            "\u{200D}",
            "\u{2060}",
            "\u{200E}",
            "\u{200F}",
            "\u{202A}",
            "\u{202B}",
            "\u{202C}",
            "\u{202D}",
            "\u{202E}",
            "\u{2066}",
            "\u{2067}",
            "\u{2068}",
            "\u{2069}",
            " ",
            "\u{A0}",
            "\n",
            "\u{FEFF}\u{200B} \u{202E}",
        ];
        for prefix in hidden {
            for trigger in ["=1+1", "+1", "-1", "@SUM(A1)", "\u{FF1D}1+1"] {
                let cell = format!("{prefix}{trigger}");
                assert_eq!(neutralise(&cell), format!("'{cell}"), "{cell:?}");
            }
            // Without a trigger behind them they are the sender's text.
            let plain = format!("{prefix}abc");
            assert_eq!(neutralise(&plain), plain, "{plain:?}");
        }
    }
}
