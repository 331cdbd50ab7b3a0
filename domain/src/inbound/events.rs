//! Deliveries that carry several events (Meta's changes of entries,
//! HubSpot's array of events): a source's `events_pointer` says where they
//! sit, a JSON pointer (RFC 6901) in which a `*` segment stands for every
//! element of an array, `/entry/*/changes/*` or `/*`. Each element is then
//! an event of its own, with its own id, type and record found by the
//! source's pointers *into the element*, so that a signed delivery is
//! processed once per event it carries.

use serde_json::Value;

/// At most this many events in one delivery: more is refused whole, so
/// that a hostile body cannot turn one request into endless rows.
pub const MAX_EVENTS_PER_DELIVERY: usize = 1000;

/// Why a delivery's events were not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventsError {
    #[error("the delivery carries more than {MAX_EVENTS_PER_DELIVERY} events")]
    TooMany,
}

/// The elements `pointer` finds in `document`, in order; empty when its
/// path is not there. A `*` over an array takes every element; over
/// anything else it is the key `*`, as RFC 6901 reads it.
pub fn events_in<'a>(pointer: &str, document: &'a Value) -> Result<Vec<&'a Value>, EventsError> {
    let mut found = vec![document];
    // An empty pointer is the document; "/a/b" is ["a", "b"].
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let mut next = Vec::new();
        for value in found {
            match (value, token.as_str()) {
                (Value::Array(items), "*") => next.extend(items.iter()),
                (Value::Array(items), index) => next.extend(
                    index
                        .parse::<usize>()
                        .ok()
                        .filter(|_| index == "0" || !index.starts_with('0'))
                        .and_then(|i| items.get(i)),
                ),
                (Value::Object(map), key) => next.extend(map.get(key)),
                _ => {}
            }
            if next.len() > MAX_EVENTS_PER_DELIVERY {
                return Err(EventsError::TooMany);
            }
        }
        found = next;
    }
    Ok(found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stars_take_every_element_in_order() {
        let meta = json!({"object": "page", "entry": [
            {"id": "p1", "changes": [{"field": "leadgen", "value": {"leadgen_id": "1"}},
                                     {"field": "leadgen", "value": {"leadgen_id": "2"}}]},
            {"id": "p2", "changes": [{"field": "feed", "value": {}}]},
            {"id": "p3"}
        ]});
        let found = events_in("/entry/*/changes/*", &meta).unwrap();
        let fields: Vec<_> = found.iter().map(|e| e["field"].clone()).collect();
        assert_eq!(fields, [json!("leadgen"), json!("leadgen"), json!("feed")]);
        assert_eq!(found[1]["value"]["leadgen_id"], "2");

        let hubspot = json!([{"eventId": 1}, {"eventId": 2}]);
        assert_eq!(events_in("/*", &hubspot).unwrap().len(), 2);
        assert_eq!(events_in("/1", &hubspot).unwrap(), [&json!({"eventId": 2})]);
        assert!(events_in("/*", &json!({"a": 1})).unwrap().is_empty());
        assert_eq!(events_in("/*", &json!({"*": 1})).unwrap(), [&json!(1)]);
        assert!(
            events_in("/entry/*/changes/*", &json!("text"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn too_many_events_are_refused_even_on_the_way() {
        let many = Value::Array(vec![json!({}); MAX_EVENTS_PER_DELIVERY]);
        assert_eq!(
            events_in("/*", &many).unwrap().len(),
            MAX_EVENTS_PER_DELIVERY
        );
        let more = Value::Array(vec![json!({}); MAX_EVENTS_PER_DELIVERY + 1]);
        assert_eq!(events_in("/*", &more), Err(EventsError::TooMany));
        // 40 × 40 changes: over the cap before the last step ends.
        let nested = json!({"entry": vec![json!({"changes": vec![json!(1); 40]}); 40]});
        assert_eq!(
            events_in("/entry/*/changes/*", &nested),
            Err(EventsError::TooMany)
        );
    }
}
