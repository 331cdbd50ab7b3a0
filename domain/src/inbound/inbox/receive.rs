//! Storing a verified delivery. The database decides whether the event is
//! new: `INSERT .. ON CONFLICT DO NOTHING` on the unique keys `(source,
//! event_id)` and, where the source's id is not signed, `(source,
//! body_sha256)`, recorded whether the delivery carries an id or not.
//! Exactly one delivery of an event inserts its row; every repeat — the same
//! id, or the same signed body under a forged id — then counts itself on the
//! original row and gets its id back.

use crate::natural_key::KeyHasher;
use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, FromQueryResult};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::InboxState;
use crate::entities::inbox_event::{self, Column};
use crate::inbound::events::events_in;
use crate::inbound::mapping::{key_hash_of, record_in};
use crate::inbound::signature::{HeaderLookup, RequestTarget};
use crate::inbound::source::{Locator, Source};

const MAX_EVENT_ID_LEN: usize = 255;

/// Headers worth keeping with an event for ops. Signatures are never kept.
const KEPT_HEADERS: [&str; 6] = [
    "content-type",
    "user-agent",
    "webhook-id",
    "webhook-timestamp",
    "x-github-delivery",
    "x-github-event",
];

/// A delivery whose signature checked out.
pub struct Delivery<'a> {
    pub headers: &'a dyn HeaderLookup,
    pub body: &'a [u8],
    pub correlation_id: Option<String>,
    /// The method and full URL the sender called, when the service's
    /// public URL is known (schemes that sign it need it).
    pub target: Option<RequestTarget<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The inbox row; for a duplicate, the original event's row.
    pub id: i64,
    pub event_id: String,
    pub state: InboxState,
    pub duplicate: bool,
}

impl Received {
    /// A new event that a job must now process.
    pub fn needs_processing(&self) -> bool {
        !self.duplicate && self.state == InboxState::Received
    }
}

/// Where an event's identity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventIdFrom {
    Header,
    Pointer,
    /// The sender gave none: a hash of source and raw body, so stripping a
    /// header cannot turn a repeat into a new event.
    Hash,
}

impl EventIdFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Header => "header",
            Self::Pointer => "pointer",
            Self::Hash => "hash",
        }
    }
}

#[derive(FromQueryResult)]
struct Stored {
    id: i64,
    state: String,
}

pub async fn receive<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    source: &Source,
    delivery: &Delivery<'_>,
    now: DateTime<Utc>,
) -> Result<Received, crate::Error> {
    // Parsed only to find the id, the type and the natural key; the worker
    // maps the record.
    let document: Option<Value> = serde_json::from_slice(delivery.body).ok();
    let (event_id, from) =
        event_identity(source, delivery.headers, delivery.body, document.as_ref());
    // A header the signature does not cover can be changed, or left out,
    // by anyone who replays a captured delivery; the signed body cannot. So
    // wherever the id is not signed, the body's hash is recorded whatever id
    // the delivery carries or lacks: a signed body makes one event.
    let body_sha256 =
        (!source.event_id_is_signed()).then(|| hex::encode(Sha256::digest(delivery.body)));
    let event = Event {
        body: delivery.body,
        document: document.as_ref(),
        event_id,
        from,
        body_sha256,
    };
    store_event(conn, hasher, source, delivery, event, now).await
}

/// Stores each event a delivery carries, by the source's `events_pointer`
/// ([`crate::inbound::events`]): one row per element, the element its body,
/// its id, type and record found by the source's pointers into it. The id
/// comes from the signed body, so the element's id alone makes it one event:
/// a batch sent again stores nothing new, one that overlaps an earlier batch
/// only its new events. A delivery in which the pointer finds no event is
/// stored whole, as one, so that nothing is lost (ops sees what came).
/// Each row is its own statement: should one fail, the sender's retry
/// finds the others stored and stores the rest.
pub async fn receive_events<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    source: &Source,
    delivery: &Delivery<'_>,
    events_pointer: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Received>, crate::Error> {
    let document: Option<Value> = serde_json::from_slice(delivery.body).ok();
    let elements = match &document {
        Some(document) => events_in(events_pointer, document)
            .map_err(|too_many| crate::Error::invalid("body", &too_many.to_string()))?,
        None => Vec::new(),
    };
    if elements.is_empty() {
        return Ok(vec![receive(conn, hasher, source, delivery, now).await?]);
    }
    let mut received = Vec::with_capacity(elements.len());
    for element in elements {
        let body = serde_json::to_vec(element).map_err(|e| DbErr::Custom(e.to_string()))?;
        let (event_id, from) = event_identity(source, delivery.headers, &body, Some(element));
        let event = Event {
            body: &body,
            document: Some(element),
            event_id,
            from,
            body_sha256: None,
        };
        received.push(store_event(conn, hasher, source, delivery, event, now).await?);
    }
    Ok(received)
}

/// One event to store: its body and parsed document, its identity, and its
/// body's hash where that must identify it too.
struct Event<'a> {
    body: &'a [u8],
    document: Option<&'a Value>,
    event_id: String,
    from: EventIdFrom,
    body_sha256: Option<String>,
}

async fn store_event<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    source: &Source,
    delivery: &Delivery<'_>,
    event: Event<'_>,
    now: DateTime<Utc>,
) -> Result<Received, crate::Error> {
    let Event {
        body,
        document,
        event_id,
        from,
        body_sha256,
    } = event;
    let event_type = locate(source.event_type.as_ref(), delivery.headers, document)
        // Too long to index, or holding a NUL that PostgreSQL's `text` refuses
        // (the receipt would fail there and not on SQLite): treated as absent.
        .filter(|t| t.len() <= 255 && !t.contains('\0'));
    let state = if source.allows(event_type.as_deref()) {
        InboxState::Received
    } else {
        InboxState::Skipped
    };
    let headers = kept_headers(source, delivery.headers);
    // So an erasure finds this event even if it never makes a lead.
    let key_hash = document
        .and_then(|document| record_in(&source.mapping, document))
        .and_then(|record| key_hash_of(hasher, &source.name, &source.mapping, record));

    let mut insert = Query::insert();
    insert
        .into_table(inbox_event::Entity)
        .columns([
            Column::Source,
            Column::EventId,
            Column::EventIdFrom,
            Column::EventType,
            Column::Headers,
            Column::Body,
            Column::BodySha256,
            Column::KeyHash,
            Column::State,
            Column::Deliveries,
            Column::Attempts,
            Column::Retries,
            Column::EnqueuedAt,
            Column::CorrelationId,
            Column::ReceivedAt,
            Column::LastDeliveryAt,
            Column::UpdatedAt,
        ])
        .values([
            source.name.clone().into(),
            event_id.clone().into(),
            from.as_str().into(),
            event_type.into(),
            headers.into(),
            body.to_vec().into(),
            body_sha256.clone().into(),
            key_hash.into(),
            state.as_str().into(),
            1i32.into(),
            0i32.into(),
            0i32.into(),
            // When it was queued: the row itself is the queue entry.
            (state == InboxState::Received).then_some(now).into(),
            delivery.correlation_id.clone().into(),
            now.into(),
            now.into(),
            now.into(),
        ])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(OnConflict::new().do_nothing().to_owned())
        .returning(Query::returning().columns([Column::Id, Column::State]));
    let insert = crate::store::statement(conn, &insert);

    // A row that conflicts is committed (receipts are single statements), so
    // the repeat finds it; one that vanished in between (retention) is
    // inserted again on the next turn.
    for _ in 0..3 {
        if let Some(stored) = Stored::find_by_statement(insert.clone()).one(conn).await? {
            return received(stored, event_id, false);
        }
        if let Some(stored) =
            count_repeat(conn, source, &event_id, body_sha256.as_deref(), now).await?
        {
            return received(stored, event_id, true);
        }
    }
    Err(DbErr::RecordNotInserted.into())
}

fn received(stored: Stored, event_id: String, duplicate: bool) -> Result<Received, crate::Error> {
    Ok(Received {
        id: stored.id,
        event_id,
        state: stored.state.parse().map_err(DbErr::Custom)?,
        duplicate,
    })
}

/// Counts a repeated delivery on the event it repeats: the one with this id,
/// or the one with this signed body. Should both exist as different rows (an
/// id reused for a different body), the oldest answers.
async fn count_repeat<C: ConnectionTrait>(
    conn: &C,
    source: &Source,
    event_id: &str,
    body_sha256: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Option<Stored>, DbErr> {
    let mut same_event = Condition::any().add(Column::EventId.eq(event_id));
    if let Some(hash) = body_sha256 {
        same_event = same_event.add(Column::BodySha256.eq(hash));
    }
    let mut update = Query::update();
    update
        .table(inbox_event::Entity)
        .value(
            Column::Deliveries,
            Expr::col((inbox_event::Entity, Column::Deliveries)).add(1),
        )
        .value(Column::LastDeliveryAt, now)
        .cond_where(
            Condition::all()
                .add(Column::Source.eq(source.name.as_str()))
                .add(same_event),
        )
        .returning(Query::returning().columns([Column::Id, Column::State]));
    let stmt = crate::store::statement(conn, &update);
    let mut rows = Stored::find_by_statement(stmt).all(conn).await?;
    rows.sort_by_key(|r| r.id);
    Ok(rows.into_iter().next())
}

/// The event's id as the source locates it in `headers` or `document`, or
/// a hash of the source's name and `body` when there is none.
fn event_identity(
    source: &Source,
    headers: &dyn HeaderLookup,
    body: &[u8],
    document: Option<&Value>,
) -> (String, EventIdFrom) {
    let given = locate(source.event_id.as_ref(), headers, document).map(|id| {
        let from = match source.event_id {
            Some(Locator::Header(_)) => EventIdFrom::Header,
            _ => EventIdFrom::Pointer,
        };
        (id, from)
    });
    match given {
        Some((id, from)) if id.len() <= MAX_EVENT_ID_LEN && !id.contains('\0') => (id, from),
        // Too long to index, or holding a NUL PostgreSQL's `text` refuses:
        // still the sender's identity, hashed.
        Some((id, from)) => (format!("sha256:{}", hex::encode(Sha256::digest(id))), from),
        None => {
            let mut hash = Sha256::new();
            hash.update(source.name.as_bytes());
            hash.update(b"\n");
            hash.update(body);
            (
                format!("sha256:{}", hex::encode(hash.finalize())),
                EventIdFrom::Hash,
            )
        }
    }
}

/// A header's value, or a string/number at a JSON pointer; blanks are absent.
fn locate(
    locator: Option<&Locator>,
    headers: &dyn HeaderLookup,
    document: Option<&Value>,
) -> Option<String> {
    let value = match locator? {
        Locator::Header(name) => headers.header(name)?.trim().to_owned(),
        Locator::Pointer(pointer) => match document?.pointer(pointer)? {
            Value::String(s) => s.trim().to_owned(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        },
    };
    (!value.is_empty()).then_some(value)
}

fn kept_headers(source: &Source, headers: &dyn HeaderLookup) -> Value {
    let configured = [&source.event_id, &source.event_type]
        .into_iter()
        .filter_map(|l| match l {
            Some(Locator::Header(h)) => Some(h.as_str()),
            _ => None,
        });
    let mut kept = Map::new();
    for name in KEPT_HEADERS.into_iter().chain(configured) {
        if let Some(value) = headers.header(name) {
            kept.insert(name.to_owned(), Value::String(value.into_owned()));
        }
    }
    Value::Object(kept)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::inbound::mapping::RecordMapping;
    use crate::inbound::signature::{Scheme, SchemeConfig};

    fn source(event_id: Option<Locator>) -> Source {
        Source {
            name: "ads".into(),
            scheme: SchemeConfig::new(Scheme::HmacSha256, vec!["s".into()]),
            event_id,
            event_type: Some(Locator::Header("x-github-event".into())),
            allowed_event_types: vec![],
            mapping: RecordMapping {
                record: "".into(),
                source_ref: "/id".into(),
                email: None,
                name: None,
                phone: None,
                company: None,
                updated_at: None,
            },
            pull: None,
            events: None,
            verify_token: None,
        }
    }

    #[test]
    fn event_id_from_header_pointer_or_hash() {
        let h = [("X-Event-Id", " evt_1 ")];
        let body = br#"{"id":"evt_body","n":7}"#;
        let s = source(Some(Locator::Header("x-event-id".into())));
        assert_eq!(
            event_identity(&s, &h, body, None),
            ("evt_1".into(), EventIdFrom::Header)
        );
        let doc: Value = serde_json::from_slice(body).unwrap();
        let s = source(Some(Locator::Pointer("/n".into())));
        assert_eq!(
            event_identity(&s, &h, body, Some(&doc)),
            ("7".into(), EventIdFrom::Pointer)
        );
    }

    #[test]
    fn missing_id_falls_back_to_a_hash_of_source_and_body() {
        let s = source(Some(Locator::Header("x-event-id".into())));
        let none: [(&str, &str); 0] = [];
        let (a, from) = event_identity(&s, &none, b"{}", None);
        assert_eq!(from, EventIdFrom::Hash);
        assert!(a.starts_with("sha256:") && a.len() == 71);
        let (b, _) = event_identity(&s, &none, b"{}", None);
        assert_eq!(a, b);
        let (c, _) = event_identity(&s, &none, b"{ }", None);
        assert_ne!(a, c);
        let mut other = s.clone();
        other.name = "other".into();
        assert_ne!(a, event_identity(&other, &none, b"{}", None).0);
    }

    #[test]
    fn overlong_ids_are_hashed() {
        let long = "x".repeat(300);
        let h = [("x-event-id", long.as_str())];
        let s = source(Some(Locator::Header("x-event-id".into())));
        let (id, from) = event_identity(&s, &h, b"", None);
        assert_eq!(from, EventIdFrom::Header);
        assert!(id.len() <= MAX_EVENT_ID_LEN);
    }

    #[test]
    fn kept_headers_never_include_signatures() {
        let h = [
            ("Content-Type", "application/json"),
            ("X-GitHub-Event", "push"),
            ("X-Hub-Signature-256", "sha256=abc"),
            ("webhook-signature", "v1,abc"),
            ("Authorization", "Bearer x"),
        ];
        let kept = kept_headers(&source(None), &h);
        assert_eq!(
            kept,
            serde_json::json!({"content-type": "application/json", "x-github-event": "push"})
        );
    }
}
