use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "import_row")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub run_id: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub row_number: i64,
    pub line: i64,
    pub source_ref: Option<String>,
    pub outcome: String,
    pub lead_id: Option<i64>,
    pub reason: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
