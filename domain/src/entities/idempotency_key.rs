use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_key")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub principal_id: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    pub fingerprint: String,
    pub method: String,
    pub path: String,
    pub state: String,
    pub lease_token: String,
    pub locked_at: ChronoDateTimeUtc,
    pub response_status: Option<i16>,
    #[sea_orm(column_type = "JsonBinary", nullable)]
    pub response_headers: Option<Json>,
    #[sea_orm(column_type = "Text", nullable)]
    pub response_body: Option<String>,
    pub created_at: ChronoDateTimeUtc,
    pub expires_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
