use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "task")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub subject_type: String,
    pub subject_id: i64,
    pub title: String,
    pub description: Option<String>,
    pub owner_id: i64,
    pub due_at: ChronoDateTimeUtc,
    pub status: String,
    pub completed_at: Option<ChronoDateTimeUtc>,
    pub completed_by: Option<i64>,
    pub created_by: Option<i64>,
    pub version: i64,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
