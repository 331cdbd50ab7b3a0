use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "inbox_event")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub source: String,
    pub event_id: String,
    /// Where `event_id` came from: `header`, `pointer` or `hash`.
    pub event_id_from: String,
    pub event_type: Option<String>,
    #[sea_orm(column_type = "JsonBinary")]
    pub headers: Json,
    #[sea_orm(column_type = "Blob")]
    pub body: Vec<u8>,
    /// SHA-256 of the raw body, kept only when the event id is not covered
    /// by the signature; unique per source, so a replay is a duplicate.
    pub body_sha256: Option<String>,
    /// The tombstone-style keyed hash of the record's natural key, read on
    /// receipt (`None`: not extractable, or received before it was kept), so
    /// an erasure finds the person's events that never made a lead.
    pub key_hash: Option<String>,
    pub state: String,
    /// How many times the sender delivered this event (1 + duplicates).
    pub deliveries: i32,
    /// Processing attempts since the event was received or last retried by ops.
    pub attempts: i32,
    /// How many times ops asked for a retry.
    pub retries: i32,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<ChronoDateTimeUtc>,
    pub enqueued_at: Option<ChronoDateTimeUtc>,
    pub locked_at: Option<ChronoDateTimeUtc>,
    pub locked_by: Option<String>,
    pub outcome: Option<String>,
    pub lead_id: Option<i64>,
    pub correlation_id: Option<String>,
    pub received_at: ChronoDateTimeUtc,
    pub last_delivery_at: ChronoDateTimeUtc,
    pub processed_at: Option<ChronoDateTimeUtc>,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
