use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "import_applied_row")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub identity: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub row_number: i64,
    pub lead_id: i64,
    pub run_id: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
