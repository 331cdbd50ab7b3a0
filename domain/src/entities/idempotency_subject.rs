use sea_orm::entity::prelude::*;

/// One subject (`lead:7`, `contact:3`, `key:<keyed hash>`) of a stored
/// idempotent response.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_subject")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub principal_id: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub subject: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
