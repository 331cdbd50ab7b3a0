use sea_orm::entity::prelude::*;

/// A natural key that must not come back after an erasure: the keyed hash of
/// `(source, source_ref)` only, never the key itself; and the hash of the
/// key's folded form, which buries its look-alikes
/// ([`crate::lead::tombstone::fold`]).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "lead_tombstone")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub key_hash: String,
    /// `None` on tombstones written before look-alikes were folded.
    pub folded_hash: Option<String>,
    pub lead_id: i64,
    pub erasure_id: Option<i64>,
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
