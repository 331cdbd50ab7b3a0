//! The per-row report as CSV: `row,line,source_ref,outcome,lead_id,reason`.

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
            row.source_ref.as_deref().unwrap_or(""),
            row.outcome.as_str(),
            lead_id.as_str(),
            row.reason.as_deref().unwrap_or(""),
        ]);
    }
    writer.into_inner().unwrap_or_default()
}
