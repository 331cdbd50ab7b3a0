//! How listing commands print: `--output table` (aligned columns, for
//! people) or `--output json` (one JSON object per line, every field, for
//! scripts). One helper, so every listing behaves the same.

use std::io::Write;

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns with a header line; a selection of the fields.
    #[default]
    Table,
    /// One JSON object per line (NDJSON) with every field.
    Json,
}

#[derive(Debug, Clone, Copy, Default, Args)]
pub struct OutputArgs {
    /// table: aligned columns for people; json: one JSON object per line
    /// (NDJSON), every field, for scripts. An empty list prints nothing.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

impl OutputArgs {
    /// Prints `rows`: in a table, the fields named in `columns`.
    pub fn print<T: Serialize>(&self, rows: &[T], columns: &[&str]) -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        write_rows(&mut out, self.output, rows, columns)?;
        out.flush()?;
        Ok(())
    }
}

fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => s.replace(['\t', '\n'], " "),
        Some(Value::Bool(true)) => "yes".to_owned(),
        Some(Value::Bool(false)) => "no".to_owned(),
        Some(Value::Array(items)) if items.is_empty() => "-".to_owned(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| cell(Some(v)))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

pub fn write_rows<T: Serialize>(
    out: &mut impl Write,
    format: Format,
    rows: &[T],
    columns: &[&str],
) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    if format == Format::Json {
        for row in rows {
            serde_json::to_writer(&mut *out, row)?;
            writeln!(out)?;
        }
        return Ok(());
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let value = serde_json::to_value(row)?;
            Ok(columns.iter().map(|c| cell(value.get(*c))).collect())
        })
        .collect::<anyhow::Result<_>>()?;
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, name)| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([name.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |out: &mut dyn Write, values: &[&str]| -> std::io::Result<()> {
        let padded: Vec<String> = values
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        writeln!(out, "{}", padded.join("  ").trim_end())
    };
    line(out, columns)?;
    for row in &cells {
        line(out, &row.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_table_aligns_and_json_is_one_object_per_line() {
        let rows = [
            serde_json::json!({"id": 1, "url": "http://a", "types": ["x", "y"], "on": true, "gone": null}),
            serde_json::json!({"id": 22, "url": "http://bb", "types": [], "on": false, "gone": null}),
        ];
        let mut table = Vec::new();
        write_rows(
            &mut table,
            Format::Table,
            &rows,
            &["id", "url", "types", "on", "gone"],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(table).unwrap(),
            "id  url        types  on   gone\n1   http://a   x,y    yes  -\n22  http://bb  -      no   -\n"
        );
        let mut json = Vec::new();
        write_rows(&mut json, Format::Json, &rows, &["id"]).unwrap();
        let json = String::from_utf8(json).unwrap();
        assert_eq!(json.lines().count(), 2);
        assert_eq!(
            serde_json::from_str::<Value>(json.lines().next().unwrap()).unwrap(),
            rows[0]
        );
    }
}
