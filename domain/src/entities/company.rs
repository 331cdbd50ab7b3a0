use sea_orm::entity::prelude::*;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, ToSchema)]
#[schema(as = Company)]
#[sea_orm(table_name = "company")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub name: String,
    pub domain: Option<String>,
    #[serde(skip)]
    pub match_key: String,
    pub version: i64,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: ChronoDateTimeUtc,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
