//! Checks for wire types: what one serialises to has exactly the keys the
//! committed OpenAPI document gives its schema, and none of the values of a
//! row's internal columns.

use std::collections::BTreeSet;

use serde::Serialize;
use utoipa::ToSchema;

const DOCUMENT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json"));

/// The property names of schema `name` in the committed document.
fn documented_keys(name: &str) -> BTreeSet<String> {
    let document: serde_json::Value = serde_json::from_str(DOCUMENT).expect("api/openapi.json");
    let properties = document["components"]["schemas"][name]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("schema {name} has no properties in api/openapi.json"));
    properties.keys().cloned().collect()
}

/// Panics unless `out` serialises to exactly the documented keys of its
/// schema and its text contains none of `internal` (values set on the row's
/// internal columns).
pub fn assert_documented<T: Serialize + ToSchema>(out: &T, internal: &[&str]) {
    let json = serde_json::to_value(out).expect("serialises");
    let sent: BTreeSet<String> = json
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(sent, documented_keys(&T::name()), "keys of {}", T::name());
    let text = json.to_string();
    for value in internal {
        assert!(
            !text.contains(value),
            "{} carries the internal value {value}: {text}",
            T::name()
        );
    }
}
