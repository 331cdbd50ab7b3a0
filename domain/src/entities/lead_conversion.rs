use sea_orm::entity::prelude::*;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, ToSchema)]
#[schema(as = LeadConversion)]
#[sea_orm(table_name = "lead_conversion")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub lead_id: i64,
    pub contact_id: i64,
    pub company_id: Option<i64>,
    pub deal_id: Option<i64>,
    pub converted_by: i64,
    pub correlation_id: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
