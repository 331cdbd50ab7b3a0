use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "lead_merge")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub survivor_id: i64,
    /// The merged leads' ids, in the order asked.
    #[sea_orm(column_type = "JsonBinary")]
    pub merged_ids: Json,
    pub merged_by: Option<i64>,
    pub merged_at: ChronoDateTimeUtc,
    /// Per field, where the survivor's value came from (provenance).
    #[sea_orm(column_type = "JsonBinary")]
    pub fields: Json,
    /// What an undo puts back: the rows moved and the survivor's values
    /// before. Blanked when the survivor is erased.
    #[sea_orm(column_type = "JsonBinary")]
    pub moved: Json,
    pub undone_at: Option<ChronoDateTimeUtc>,
    pub undone_by: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
