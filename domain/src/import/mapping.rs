//! Which column (CSV header, or NDJSON key) feeds which lead field.

use std::collections::BTreeMap;

use crate::error::Error;

/// The lead fields a column can feed. Every other column goes to `payload`.
pub const FIELDS: [&str; 6] = [
    "source_ref",
    "email",
    "phone",
    "name",
    "company",
    "source_updated_at",
];

/// `field → column name`, as the caller chose. A field left out is read
/// from a column named like the field (case-insensitive), when there is one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mapping(pub BTreeMap<String, String>);

impl Mapping {
    /// `source_ref=Lead ID,email=E-mail`: comma-separated `field=Column` pairs.
    pub fn parse(spec: &str) -> Result<Self, Error> {
        let mut map = BTreeMap::new();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((field, column)) = pair.split_once('=') else {
                return Err(Error::invalid(
                    "map",
                    &format!("'{pair}' is not field=Column"),
                ));
            };
            let (field, column) = (field.trim(), column.trim());
            if !FIELDS.contains(&field) {
                return Err(Error::invalid(
                    "map",
                    &format!("unknown field '{field}' (fields: {})", FIELDS.join(", ")),
                ));
            }
            if column.is_empty() {
                return Err(Error::invalid(
                    "map",
                    &format!("'{field}' needs a column name"),
                ));
            }
            map.insert(field.to_owned(), column.to_owned());
        }
        Ok(Self(map))
    }

    /// The column a field is read from when the file has no header to check
    /// against (NDJSON): the mapped name, else the field's own name.
    pub fn key_for<'a>(&'a self, field: &'a str) -> &'a str {
        self.0.get(field).map_or(field, String::as_str)
    }

    /// Column indexes for a CSV header. A mapped column the header lacks is
    /// an error, and so is a file with no `source_ref` column at all: the
    /// import refuses to guess.
    pub fn resolve(&self, header: &[String]) -> Result<Resolved, Error> {
        let find = |name: &str| {
            header
                .iter()
                .position(|h| h == name)
                .or_else(|| header.iter().position(|h| h.eq_ignore_ascii_case(name)))
        };
        let mut columns = BTreeMap::new();
        for field in FIELDS {
            let index = match self.0.get(field) {
                Some(column) => Some(find(column).ok_or_else(|| {
                    Error::invalid(
                        "map",
                        &format!(
                            "{field}={column}: the file has no column '{column}' (columns: {})",
                            header.join(", ")
                        ),
                    )
                })?),
                None => find(field),
            };
            if let Some(index) = index {
                columns.insert(field, index);
            }
        }
        if !columns.contains_key("source_ref") {
            return Err(Error::invalid(
                "map",
                &format!(
                    "no column gives source_ref; name one with source_ref=COLUMN (columns: {})",
                    header.join(", ")
                ),
            ));
        }
        Ok(Resolved { columns })
    }
}

/// A mapping checked against a CSV header: `field → column index`.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub columns: BTreeMap<&'static str, usize>,
}

impl Resolved {
    pub fn index(&self, field: &str) -> Option<usize> {
        self.columns.get(field).copied()
    }

    pub fn is_mapped(&self, index: usize) -> bool {
        self.columns.values().any(|&i| i == index)
    }

    /// `field → column name`, as stored on the run.
    pub fn describe(&self, header: &[String]) -> BTreeMap<String, String> {
        self.columns
            .iter()
            .filter_map(|(f, &i)| header.get(i).map(|h| ((*f).to_owned(), h.clone())))
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn header(cols: &[&str]) -> Vec<String> {
        cols.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn parses_pairs_and_rejects_unknown_fields() {
        let m = Mapping::parse("source_ref=Lead ID, email=E-mail").unwrap();
        assert_eq!(m.0["source_ref"], "Lead ID");
        assert_eq!(m.key_for("email"), "E-mail");
        assert_eq!(m.key_for("name"), "name");
        assert!(Mapping::parse("colour=x").is_err());
        assert!(Mapping::parse("email").is_err());
    }

    #[test]
    fn resolves_by_name_and_refuses_to_guess_source_ref() {
        let m = Mapping::parse("source_ref=Lead ID").unwrap();
        let r = m.resolve(&header(&["Lead ID", "EMAIL", "notes"])).unwrap();
        assert_eq!(r.index("source_ref"), Some(0));
        assert_eq!(r.index("email"), Some(1));
        assert!(!r.is_mapped(2));
        assert!(
            Mapping::default()
                .resolve(&header(&["id", "email"]))
                .is_err()
        );
        assert!(m.resolve(&header(&["id"])).is_err());
    }
}
