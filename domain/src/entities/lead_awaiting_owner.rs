use sea_orm::entity::prelude::*;

/// A lead routing found no one for (everyone away or at capacity), waiting
/// to be routed again when someone can take it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "lead_awaiting_owner")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub lead_id: i64,
    pub since: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
