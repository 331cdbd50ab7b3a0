use sea_orm::entity::prelude::*;

/// A record a reconcile page could not map to a lead, kept with its reason
/// so it can be re-applied once the mapping is fixed.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "reconcile_rejected")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub source: String,
    /// The run that rejected it last.
    pub run_id: i64,
    /// The record as the sender's pull API returned it.
    #[sea_orm(column_type = "JsonBinary")]
    pub record: Json,
    pub record_sha256: String,
    /// The keyed hash of the record's natural key, when its `source_ref`
    /// could be read: how an erasure finds the person's dead letters.
    pub key_hash: Option<String>,
    /// Why it did not map (field names and pointers, never values).
    pub reason: String,
    /// `rejected`, or `resolved` once a retry applied it.
    pub state: String,
    pub retries: i32,
    /// The lead it became, once resolved.
    pub lead_id: Option<i64>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
    pub resolved_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
