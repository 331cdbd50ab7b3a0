use sea_orm::entity::prelude::*;

/// A known text sealed under one key id: proves the configured key
/// material for that id is the one that sealed the stored secrets.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "sealing_key_check")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub key_id: String,
    #[sea_orm(column_type = "Text")]
    pub check_value: String,
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
