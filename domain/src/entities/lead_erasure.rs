use sea_orm::entity::prelude::*;

/// The audit record of one erasure: ids, who, when, why and how many rows
/// each table lost. It holds no personal data.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "lead_erasure")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    /// The erased lead's id (the lead itself is gone).
    pub lead_id: i64,
    /// The tombstone's key: a keyed hash of `(source, source_ref)`.
    pub key_hash: String,
    /// The principal who erased it.
    pub erased_by: Option<i64>,
    pub reason: String,
    /// Rows removed or blanked, by table.
    #[sea_orm(column_type = "JsonBinary")]
    pub counts: Json,
    pub erased_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
