//! The ingest batch's writes on PostgreSQL, each one statement text whatever
//! the batch size: the rows travel as one JSON array that
//! `jsonb_populate_recordset` unpacks into the table's own row type.
//!
//! Why not a multi-row `VALUES`: its text changes with every batch size (and
//! group commit makes every size from 1 to 128), so sqlx's per-connection
//! statement cache kept missing, and each miss cost a prepare round trip and
//! a parse and plan of a statement with up to 1,664 parameters on the cores
//! the database shares with us. One text is prepared once per connection,
//! and PostgreSQL settles on its generic plan. The rows are serialised
//! straight from the records (borrowed), not cloned into an SQL builder.
//! SQLite keeps the sea-query statements ([`super::ingest`]).

use chrono::{DateTime, SecondsFormat, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Statement};
use serde::{Serialize, Serializer};

use crate::lead::record::NewLead;
use crate::lead::written::WrittenRow;

/// The batch's timeline rows and outbox events in one statement (one round
/// trip); `$2` may be an empty array.
const INSERT_ACTIVITIES_AND_EVENTS: &str = r#"WITH "activities" AS (
INSERT INTO "activity" ("lead_id", "kind", "origin", "outcome", "author_id", "detail", "correlation_id", "created_at")
SELECT r."lead_id", r."kind", r."origin", r."outcome", r."author_id", r."detail", r."correlation_id", r."created_at"
FROM jsonb_populate_recordset(NULL::"activity", $1::jsonb) AS r)
INSERT INTO "outbox_event" ("event_id", "event_type", "lead_id", "payload", "correlation_id", "state", "created_at")
SELECT r."event_id", r."event_type", r."lead_id", r."payload", r."correlation_id", r."state", r."created_at"
FROM jsonb_populate_recordset(NULL::"outbox_event", $2::jsonb) AS r"#;

/// A timestamp as PostgreSQL reads it back exactly: microseconds, as sqlx
/// would have bound it (callers' timestamps are already truncated to them).
fn micros<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&at.to_rfc3339_opts(SecondsFormat::Micros, true))
}

fn micros_opt<S: Serializer>(at: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => micros(at, s),
        None => s.serialize_none(),
    }
}

#[derive(Serialize)]
pub(crate) struct LeadRow<'a> {
    pub(crate) source: &'a str,
    pub(crate) source_ref: &'a str,
    pub(crate) email: Option<&'a str>,
    pub(crate) phone: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
    pub(crate) company: Option<&'a str>,
    pub(crate) payload: &'a serde_json::Value,
    pub(crate) content_hash: String,
    #[serde(serialize_with = "micros_opt")]
    pub(crate) source_updated_at: Option<DateTime<Utc>>,
}

/// One timeline row, as the `activity` table names its columns.
#[derive(Serialize)]
pub struct ActivityRow<'a, D: Serialize> {
    pub lead_id: i64,
    pub kind: &'static str,
    pub origin: Option<&'static str>,
    pub outcome: Option<&'static str>,
    pub author_id: Option<i64>,
    pub detail: D,
    pub correlation_id: Option<&'a str>,
    #[serde(serialize_with = "micros")]
    pub created_at: DateTime<Utc>,
}

/// One outbox row, as the `outbox_event` table names its columns.
#[derive(Serialize)]
pub struct OutboxRow<'a, P: Serialize> {
    pub event_id: String,
    pub event_type: &'static str,
    pub lead_id: Option<i64>,
    pub payload: P,
    pub correlation_id: Option<&'a str>,
    pub state: &'static str,
    #[serde(serialize_with = "micros")]
    pub created_at: DateTime<Utc>,
}

fn rows_param<T: Serialize>(rows: &[T]) -> Result<sea_orm::Value, DbErr> {
    serde_json::to_string(rows)
        .map(Into::into)
        .map_err(|e| DbErr::Json(e.to_string()))
}

/// The upsert of `news` (distinct keys), returning the rows it wrote
/// (without their payloads, [`WrittenRow`]).
pub async fn upsert<C: ConnectionTrait>(
    txn: &C,
    news: &[&NewLead],
    keys: &crate::lead::tombstone::BatchKeys<'_>,
    now: DateTime<Utc>,
    sql: &str,
) -> Result<Vec<WrittenRow>, DbErr> {
    let rows: Vec<LeadRow<'_>> = news
        .iter()
        .map(|new| LeadRow {
            source: &new.source,
            source_ref: &new.source_ref,
            email: new.email.as_deref(),
            phone: new.phone.as_deref(),
            name: new.name.as_deref(),
            company: new.company.as_deref(),
            payload: &new.payload,
            content_hash: new.content_hash(),
            source_updated_at: new.source_updated_at,
        })
        .collect();
    let [hashes, sources, source_refs] = keys.columns();
    let stmt = Statement::from_sql_and_values(
        DbBackend::Postgres,
        sql,
        [
            rows_param(&rows)?,
            now.into(),
            hashes.into(),
            sources.into(),
            source_refs.into(),
        ],
    );
    WrittenRow::find_by_statement(stmt).all(txn).await
}

/// Inserts the batch's timeline rows and its outbox events.
pub async fn insert_activities_and_events<C: ConnectionTrait, D: Serialize, P: Serialize>(
    txn: &C,
    activities: &[ActivityRow<'_, D>],
    events: &[OutboxRow<'_, P>],
) -> Result<(), DbErr> {
    let stmt = Statement::from_sql_and_values(
        DbBackend::Postgres,
        INSERT_ACTIVITIES_AND_EVENTS,
        [rows_param(activities)?, rows_param(events)?],
    );
    txn.execute_raw(stmt).await.map(drop)
}
