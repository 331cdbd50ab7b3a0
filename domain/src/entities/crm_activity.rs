use sea_orm::entity::prelude::*;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, ToSchema)]
#[schema(as = CrmActivity)]
#[sea_orm(table_name = "crm_activity")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub subject_type: String,
    pub subject_id: i64,
    pub kind: String,
    pub author_id: Option<i64>,
    #[sea_orm(column_type = "JsonBinary", nullable)]
    #[schema(value_type = Option<Object>)]
    pub detail: Option<Json>,
    pub correlation_id: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
