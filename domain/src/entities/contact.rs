use sea_orm::entity::prelude::*;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, ToSchema)]
#[schema(as = Contact)]
#[sea_orm(table_name = "contact")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub email: Option<String>,
    pub name: Option<String>,
    pub phone: Option<String>,
    pub company_id: Option<i64>,
    pub version: i64,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: ChronoDateTimeUtc,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
