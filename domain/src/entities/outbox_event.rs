use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "outbox_event")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub event_id: String,
    pub event_type: String,
    pub lead_id: Option<i64>,
    #[sea_orm(column_type = "JsonBinary")]
    pub payload: Json,
    pub correlation_id: Option<String>,
    /// Set for a test event: only this subscription receives it.
    pub target_subscription_id: Option<i64>,
    pub state: String,
    pub created_at: ChronoDateTimeUtc,
    pub published_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
