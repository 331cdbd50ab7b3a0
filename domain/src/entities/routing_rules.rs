use sea_orm::entity::prelude::*;

/// The routing rules, one row (`id` 1): the list replaced whole.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "routing_rules")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: i32,
    /// The rules as `PUT /api/routing-rules` took them (a JSON array).
    #[sea_orm(column_type = "JsonBinary")]
    pub rules: Json,
    /// Goes up with every change; the `ETag` is `"{version}"`.
    pub version: i64,
    /// `null` until the first change.
    pub updated_at: Option<ChronoDateTimeUtc>,
    pub updated_by: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
