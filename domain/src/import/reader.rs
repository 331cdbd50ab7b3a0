//! Reading an import file row by row (never whole), turning each row into a
//! lead record or the reason it cannot be one.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::mapping::{FIELDS, Mapping, Resolved};
use crate::error::Error;
use crate::lead::record::{LeadRecord, NewLead};

/// Longest NDJSON line accepted; longer lines are rejected rows.
const MAX_LINE_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Csv,
    Ndjson,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Ndjson => "ndjson",
        }
    }

    /// By file extension: `.ndjson`/`.jsonl` are NDJSON, anything else CSV.
    pub fn of_path(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext)
                if ext.eq_ignore_ascii_case("ndjson") || ext.eq_ignore_ascii_case("jsonl") =>
            {
                Self::Ndjson
            }
            _ => Self::Csv,
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "csv" => Ok(Self::Csv),
            "ndjson" | "jsonl" => Ok(Self::Ndjson),
            other => Err(format!("unknown format '{other}' (csv, ndjson)")),
        }
    }
}

/// One data row: its 1-based number among data rows (the identity within
/// the file), the line it starts on, and what it says.
#[derive(Debug, Clone)]
pub struct Row {
    pub number: i64,
    pub line: i64,
    pub source_ref: Option<String>,
    pub record: Result<NewLead, String>,
}

/// A pull-based reader over either format.
pub enum RowReader {
    Csv {
        reader: csv::Reader<BufReader<File>>,
        header: Vec<String>,
        resolved: Resolved,
        record: csv::ByteRecord,
        source: String,
        rows: i64,
    },
    Ndjson {
        reader: BufReader<File>,
        mapping: Mapping,
        buf: Vec<u8>,
        source: String,
        rows: i64,
        line: i64,
        bytes: u64,
    },
}

impl RowReader {
    /// Opens the file and, for CSV, checks the mapping against its header.
    pub fn open(
        path: &Path,
        format: Format,
        mapping: &Mapping,
        source: &str,
    ) -> Result<Self, Error> {
        let file = File::open(path)
            .map_err(|e| Error::invalid("file", &format!("cannot be opened: {e}")))?;
        match format {
            Format::Csv => {
                let mut reader = csv::ReaderBuilder::new()
                    .flexible(true)
                    .has_headers(true)
                    .from_reader(BufReader::with_capacity(64 * 1024, file));
                let header: Vec<String> = reader
                    .byte_headers()
                    .map_err(|e| {
                        Error::invalid("file", &format!("has no readable header row: {e}"))
                    })?
                    .iter()
                    .enumerate()
                    .map(|(i, h)| {
                        let h = String::from_utf8_lossy(h);
                        let h = if i == 0 {
                            h.trim_start_matches('\u{feff}')
                        } else {
                            &h
                        };
                        h.trim().to_owned()
                    })
                    .collect();
                if header.iter().all(String::is_empty) {
                    return Err(Error::invalid("file", "has no header row"));
                }
                let resolved = mapping.resolve(&header)?;
                Ok(Self::Csv {
                    reader,
                    header,
                    resolved,
                    record: csv::ByteRecord::new(),
                    source: source.to_owned(),
                    rows: 0,
                })
            }
            Format::Ndjson => Ok(Self::Ndjson {
                reader: BufReader::with_capacity(64 * 1024, file),
                mapping: mapping.clone(),
                buf: Vec::new(),
                source: source.to_owned(),
                rows: 0,
                line: 0,
                bytes: 0,
            }),
        }
    }

    /// `field → column` as used, for the run's record.
    pub fn mapping_used(&self) -> std::collections::BTreeMap<String, String> {
        match self {
            Self::Csv {
                header, resolved, ..
            } => resolved.describe(header),
            Self::Ndjson { mapping, .. } => FIELDS
                .iter()
                .map(|f| ((*f).to_owned(), mapping.key_for(f).to_owned()))
                .collect(),
        }
    }

    /// Bytes consumed so far, for progress.
    pub fn bytes_read(&self) -> u64 {
        match self {
            Self::Csv { reader, .. } => reader.position().byte(),
            Self::Ndjson { bytes, .. } => *bytes,
        }
    }

    /// The next data row; `Ok(None)` at the end. An I/O error ends the import.
    pub fn next_row(&mut self) -> Result<Option<Row>, Error> {
        match self {
            Self::Csv {
                reader,
                header,
                resolved,
                record,
                source,
                rows,
            } => {
                let more = match reader.read_byte_record(record) {
                    Ok(more) => more,
                    Err(e) if matches!(e.kind(), csv::ErrorKind::Io(_)) => {
                        return Err(Error::invalid("file", &format!("could not be read: {e}")));
                    }
                    Err(e) => {
                        // A malformed row (e.g. a stray quote): report it, read on.
                        *rows += 1;
                        let line = e.position().map_or(0, |p| p.line()) as i64;
                        return Ok(Some(Row {
                            number: *rows,
                            line,
                            source_ref: None,
                            record: Err(format!("malformed CSV: {e}")),
                        }));
                    }
                };
                if !more {
                    return Ok(None);
                }
                *rows += 1;
                let line = record.position().map_or(0, |p| p.line()) as i64;
                let (source_ref, parsed) = csv_row(record, header, resolved, source);
                Ok(Some(Row {
                    number: *rows,
                    line,
                    source_ref,
                    record: parsed,
                }))
            }
            Self::Ndjson {
                reader,
                mapping,
                buf,
                source,
                rows,
                line,
                bytes,
            } => loop {
                buf.clear();
                let n = read_line_capped(reader, buf)
                    .map_err(|e| Error::invalid("file", &format!("could not be read: {e}")))?;
                if n == 0 {
                    return Ok(None);
                }
                *bytes += n as u64;
                *line += 1;
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                *rows += 1;
                let (source_ref, parsed) = if buf.len() > MAX_LINE_BYTES {
                    (
                        None,
                        Err(format!("line is longer than {MAX_LINE_BYTES} bytes")),
                    )
                } else {
                    json_row(buf, mapping, source)
                };
                return Ok(Some(Row {
                    number: *rows,
                    line: *line,
                    source_ref,
                    record: parsed,
                }));
            },
        }
    }
}

/// Reads one line, keeping at most `MAX_LINE_BYTES + 1` bytes of it so a
/// file without newlines cannot exhaust memory.
fn read_line_capped(reader: &mut BufReader<File>, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let len = chunk.len();
        let room = (MAX_LINE_BYTES + 1).saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..len.min(room)]);
        reader.consume(len);
        total += len;
        if done {
            return Ok(total);
        }
    }
}

fn csv_row(
    record: &csv::ByteRecord,
    header: &[String],
    resolved: &Resolved,
    source: &str,
) -> (Option<String>, Result<NewLead, String>) {
    let cell = |field: &str| -> Result<Option<String>, String> {
        let Some(i) = resolved.index(field) else {
            return Ok(None);
        };
        match record.get(i) {
            None => Ok(None),
            Some(bytes) => std::str::from_utf8(bytes)
                .map(|s| Some(s.trim().to_owned()).filter(|s| !s.is_empty()))
                .map_err(|_| format!("{field}: not valid UTF-8")),
        }
    };
    let source_ref = cell("source_ref").ok().flatten();
    if record.len() != header.len() {
        return (
            source_ref,
            Err(format!(
                "expected {} fields (as in the header), found {}",
                header.len(),
                record.len()
            )),
        );
    }
    let parsed = (|| {
        let mut payload = Map::new();
        for (i, bytes) in record.iter().enumerate() {
            if resolved.is_mapped(i) || bytes.is_empty() {
                continue;
            }
            let value = std::str::from_utf8(bytes)
                .map_err(|_| format!("column '{}': not valid UTF-8", header[i]))?;
            payload.insert(header[i].clone(), Value::String(value.to_owned()));
        }
        to_lead(
            source,
            cell("source_ref")?,
            cell("email")?,
            cell("phone")?,
            cell("name")?,
            cell("company")?,
            cell("source_updated_at")?,
            payload,
        )
    })();
    (source_ref, parsed)
}

fn json_row(
    line: &[u8],
    mapping: &Mapping,
    source: &str,
) -> (Option<String>, Result<NewLead, String>) {
    let mut object = match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(object)) => object,
        Ok(_) => return (None, Err("not a JSON object".into())),
        Err(e) => return (None, Err(format!("malformed JSON: {e}"))),
    };
    let mut take = |field: &str| -> Result<Option<String>, String> {
        match object.remove(mapping.key_for(field)) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
            Some(Value::Number(n)) => Ok(Some(crate::json_number::as_text(&n))),
            Some(_) => Err(format!("{field}: must be a string")),
        }
    };
    let fields = (|| {
        Ok::<_, String>([
            take("source_ref")?,
            take("email")?,
            take("phone")?,
            take("name")?,
            take("company")?,
            take("source_updated_at")?,
        ])
    })();
    match fields {
        Err(reason) => (None, Err(reason)),
        Ok([source_ref, email, phone, name, company, updated]) => {
            let parsed = to_lead(
                source,
                source_ref.clone(),
                email,
                phone,
                name,
                company,
                updated,
                object,
            );
            (source_ref, parsed)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn to_lead(
    source: &str,
    source_ref: Option<String>,
    email: Option<String>,
    phone: Option<String>,
    name: Option<String>,
    company: Option<String>,
    source_updated_at: Option<String>,
    payload: Map<String, Value>,
) -> Result<NewLead, String> {
    if source_ref.is_none() {
        return Err("source_ref: missing (empty cell or key)".into());
    }
    let source_updated_at = source_updated_at
        .map(|t| {
            crate::lead::record::parse_timestamp(&t).ok_or_else(|| {
                "source_updated_at: must be an RFC 3339 timestamp or a unix timestamp (seconds or milliseconds)"
                    .to_owned()
            })
        })
        .transpose()?;
    LeadRecord {
        source: source.to_owned(),
        source_ref,
        email,
        phone,
        name,
        company,
        source_updated_at,
        payload: Some(Value::Object(payload)),
    }
    .normalise()
    .map_err(|e| match e {
        Error::Invalid(fields) => fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    })
}

/// SHA-256 of a file, read in chunks.
pub fn hash_file(path: &Path) -> Result<(String, u64), Error> {
    use sha2::{Digest, Sha256};
    let mut file =
        File::open(path).map_err(|e| Error::invalid("file", &format!("cannot be opened: {e}")))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| Error::invalid("file", &format!("could not be read: {e}")))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((hex::encode(hasher.finalize()), total))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn write(name: &str, content: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("lp-reader-{}-{name}", uuid::Uuid::new_v4()));
        std::fs::write(&path, content).unwrap();
        path
    }

    fn all(path: &Path, format: Format, mapping: &Mapping) -> Vec<Row> {
        let mut reader = RowReader::open(path, format, mapping, "fair").unwrap();
        let mut rows = Vec::new();
        while let Some(row) = reader.next_row().unwrap() {
            rows.push(row);
        }
        std::fs::remove_file(path).unwrap();
        rows
    }

    #[test]
    fn csv_rows_carry_numbers_lines_payload_and_reasons() {
        let path = write(
            "a.csv",
            "\u{feff}Ref,email,Booth\nr1,A@X.example,12\n,b@x.example,13\n\"r3\nwrapped\",bad,14\nr4,c@x.example\n",
        );
        let rows = all(
            &path,
            Format::Csv,
            &Mapping::parse("source_ref=Ref").unwrap(),
        );
        assert_eq!(rows.len(), 4);
        let first = rows[0].record.as_ref().unwrap();
        assert_eq!((rows[0].number, rows[0].line), (1, 2));
        assert_eq!(first.email.as_deref(), Some("a@x.example"));
        assert_eq!(first.payload, serde_json::json!({"Booth": "12"}));
        assert_eq!(
            rows[1].record.as_ref().unwrap_err(),
            "source_ref: missing (empty cell or key)"
        );
        assert_eq!((rows[2].number, rows[2].line), (3, 4));
        assert!(rows[2].record.as_ref().unwrap_err().contains("email"));
        assert_eq!((rows[3].number, rows[3].line), (4, 6));
        assert!(
            rows[3]
                .record
                .as_ref()
                .unwrap_err()
                .contains("expected 3 fields")
        );
    }

    #[test]
    fn ndjson_rows_skip_blank_lines_and_map_keys() {
        let path = write(
            "a.ndjson",
            "{\"id\": 7, \"email\": \"a@x.example\", \"score\": 3}\n\n[1]\n{\"email\": \"b@x.example\"}\n",
        );
        let rows = all(
            &path,
            Format::Ndjson,
            &Mapping::parse("source_ref=id").unwrap(),
        );
        assert_eq!(rows.len(), 3);
        let first = rows[0].record.as_ref().unwrap();
        assert_eq!(first.source_ref, "7");
        assert_eq!(first.payload, serde_json::json!({"score": 3}));
        assert_eq!((rows[1].number, rows[1].line), (2, 3));
        assert_eq!(rows[1].record.as_ref().unwrap_err(), "not a JSON object");
        assert!(rows[2].record.is_err());
    }

    #[test]
    fn csv_without_a_source_ref_column_is_refused() {
        let path = write("b.csv", "id,email\n1,a@x.example\n");
        assert!(RowReader::open(&path, Format::Csv, &Mapping::default(), "fair").is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
