use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "lead_conversion")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub lead_id: i64,
    pub contact_id: i64,
    pub company_id: Option<i64>,
    pub deal_id: Option<i64>,
    pub converted_by: i64,
    pub correlation_id: Option<String>,
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
