use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "crm_activity")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub subject_type: String,
    pub subject_id: i64,
    pub kind: String,
    pub author_id: Option<i64>,
    #[sea_orm(column_type = "JsonBinary", nullable)]
    pub detail: Option<Json>,
    pub correlation_id: Option<String>,
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
