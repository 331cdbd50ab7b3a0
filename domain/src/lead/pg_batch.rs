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

use sea_orm::sea_query::{Alias, PostgresQueryBuilder, Query};

use crate::entities::lead;
use crate::lead::activity::ActivityKind;
use crate::outbound::outbox;

/// Timeline rows and outbox events in one statement (one round trip); `$2`
/// may be an empty array. The upsert writes its own rows' entries
/// ([`upsert_with_timeline_sql`]); this takes the rest.
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

pub(crate) fn micros_opt<S: Serializer>(
    at: &Option<DateTime<Utc>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => micros(at, s),
        None => s.serialize_none(),
    }
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

/// What the upsert's timeline rows and outbox events take from a record
/// besides the row it wrote: `$6`, joined to the written rows by their key.
#[derive(Serialize)]
pub(crate) struct RecordContext<'a> {
    /// The record's place in its wave: the timeline rows and events are
    /// inserted in this order, as they arrived.
    pub(crate) n: usize,
    pub(crate) source: &'a str,
    pub(crate) source_ref: &'a str,
    pub(crate) event_id: String,
    pub(crate) origin: &'static str,
    pub(crate) author_id: Option<i64>,
    pub(crate) correlation_id: Option<&'a str>,
}

/// The timeline outcomes of a written row, as [`super::ingest`] names them:
/// version 1 is `created`, any other `updated`.
pub(crate) struct WrittenOutcomes {
    pub(crate) created: &'static str,
    pub(crate) updated: &'static str,
}

/// `upsert` (the lead upsert, `RETURNING *`) with the timeline row and the
/// outbox event of every row it wrote, in one statement: one round trip
/// less per batch, and the event's lead snapshot is built from the written
/// row where it is, not serialised here and parsed there. Created or
/// updated is the version, as [`super::ingest`] decides it. The statement
/// returns the written rows' `returned` columns.
pub(crate) fn upsert_with_timeline_sql(
    upsert: &str,
    outcomes: WrittenOutcomes,
    returned: impl IntoIterator<Item = lead::Column>,
) -> String {
    let written = "w";
    let snapshot = snapshot_sql(written);
    let returned = Query::select()
        .columns(returned.into_iter().map(|c| (Alias::new(written), c)))
        .from_as(Alias::new("written"), Alias::new(written))
        .to_string(PostgresQueryBuilder);
    let kind = ActivityKind::Ingest.as_str();
    let WrittenOutcomes { created, updated } = outcomes;
    let (lead_created, lead_updated, pending) =
        (outbox::LEAD_CREATED, outbox::LEAD_UPDATED, outbox::PENDING);
    format!(
        r#"WITH "written" AS ({upsert}), "context" AS (SELECT * FROM jsonb_to_recordset($6::jsonb) AS c("n" bigint, "source" text, "source_ref" text, "event_id" text, "origin" text, "author_id" bigint, "correlation_id" text)), "pairs" AS (SELECT {written}.*, c."n" AS "context_n", c."event_id" AS "context_event_id", c."origin" AS "context_origin", c."author_id" AS "context_author_id", c."correlation_id" AS "context_correlation_id" FROM "written" AS {written} JOIN "context" AS c ON c."source" = {written}."source" AND c."source_ref" = {written}."source_ref"), "activities" AS (INSERT INTO "activity" ("lead_id", "kind", "origin", "outcome", "author_id", "detail", "correlation_id", "created_at") SELECT {written}."id", '{kind}', {written}."context_origin", CASE WHEN {written}."version" = 1 THEN '{created}' ELSE '{updated}' END, {written}."context_author_id", jsonb_build_object('version', {written}."version"), {written}."context_correlation_id", $2 FROM "pairs" AS {written} ORDER BY {written}."context_n"), "events" AS (INSERT INTO "outbox_event" ("event_id", "event_type", "lead_id", "payload", "correlation_id", "state", "created_at") SELECT {written}."context_event_id", CASE WHEN {written}."version" = 1 THEN '{lead_created}' ELSE '{lead_updated}' END, {written}."id", {snapshot}, {written}."context_correlation_id", '{pending}', $2 FROM "pairs" AS {written} ORDER BY {written}."context_n") {returned}"#
    )
}

/// The JSON a [`crate::outbound::events::LeadSnapshot`] of row `alias`
/// serialises to, built by PostgreSQL (a test compares the two).
fn snapshot_sql(alias: &str) -> String {
    let col = |name: &str| format!(r#"{alias}."{name}""#);
    let fields = [
        ("id", col("id")),
        ("source", col("source")),
        ("source_ref", col("source_ref")),
        ("email", col("email")),
        ("phone", col("phone")),
        ("name", col("name")),
        ("company", col("company")),
        ("payload", col("payload")),
        ("source_updated_at", rfc3339_sql(alias, "source_updated_at")),
        ("status", col("status")),
        ("owner_id", col("owner_id")),
        ("version", col("version")),
        ("created_at", rfc3339_sql(alias, "created_at")),
        ("updated_at", rfc3339_sql(alias, "updated_at")),
    ];
    let args: Vec<String> = fields
        .iter()
        .map(|(key, value)| format!("'{key}', {value}"))
        .collect();
    format!("jsonb_build_object({})", args.join(", "))
}

/// Timestamp `name` of row `alias` as chrono serialises a `DateTime<Utc>`
/// (RFC 3339 in UTC, `Z`, the fraction in 0, 3 or 6 digits, whichever is
/// exact; a year outside 0–9999 with its sign), and NULL as NULL.
/// PostgreSQL keeps microseconds, so chrono's 9 digits never occur. One
/// `to_char` picked by the microseconds (cheap: trimming one text with
/// `right`/`left` cost twice as much); `to_char` has no sign or year 0, so
/// years outside 1–9999 (which no door lets in) take the long way.
fn rfc3339_sql(alias: &str, name: &str) -> String {
    let ts = format!(r#"{alias}."{name}""#);
    let utc = format!("({ts} AT TIME ZONE 'UTC')");
    // The fraction is the same in every time zone (offsets are whole seconds).
    let micros = format!("(date_part('microseconds', {ts})::bigint % 1000000)");
    // extract(year) has no year 0: 1 BC is -1, chrono's 0.
    let year = format!(
        "(CASE WHEN extract(year FROM {utc}) < 0 THEN extract(year FROM {utc})::int + 1 ELSE extract(year FROM {utc})::int END)"
    );
    format!(
        "(CASE WHEN {ts} < '0001-01-01 00:00:00+00'::timestamptz OR {ts} >= '10000-01-01 00:00:00+00'::timestamptz THEN \
         CASE WHEN {year} >= 0 AND {year} <= 9999 THEN lpad({year}::text, 4, '0') \
         WHEN {year} < 0 THEN '-' || lpad((-{year})::text, 4, '0') \
         ELSE '+' || {year}::text END \
         || to_char({utc}, '-MM-DD\"T\"HH24:MI:SS') \
         || CASE WHEN {micros} = 0 THEN '' \
         WHEN {micros} % 1000 = 0 THEN '.' || lpad(({micros} / 1000)::text, 3, '0') \
         ELSE '.' || lpad({micros}::text, 6, '0') END || 'Z' \
         WHEN {micros} = 0 THEN to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') \
         WHEN {micros} % 1000 = 0 THEN to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
         ELSE to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') END)"
    )
}

/// The upsert of a wave's records (distinct keys; `rows` are their sender
/// columns, `$1`) with the timeline rows and outbox events of what it wrote,
/// returning what `sql` returns of the rows it wrote
/// ([`crate::lead::written::WrittenRow`] or
/// [`crate::lead::written::StoredKey`]).
pub(crate) async fn upsert<C: ConnectionTrait, R: FromQueryResult>(
    txn: &C,
    rows: &[impl Serialize],
    context: &[RecordContext<'_>],
    keys: &crate::lead::tombstone::BatchKeys<'_>,
    now: DateTime<Utc>,
    sql: &str,
) -> Result<Vec<R>, DbErr> {
    let [hashes, sources, source_refs] = keys.columns();
    let stmt = Statement::from_sql_and_values(
        DbBackend::Postgres,
        sql,
        [
            rows_param(rows)?,
            now.into(),
            hashes.into(),
            sources.into(),
            source_refs.into(),
            rows_param(context)?,
        ],
    );
    R::find_by_statement(stmt).all(txn).await
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
