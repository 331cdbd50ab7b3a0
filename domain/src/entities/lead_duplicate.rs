use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "lead_duplicate")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub lead_id: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub other_lead_id: i64,
    pub reason: String,
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
