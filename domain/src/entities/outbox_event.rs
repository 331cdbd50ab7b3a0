use sea_orm::entity::prelude::*;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, ToSchema)]
#[schema(as = OutboxEvent)]
#[sea_orm(table_name = "outbox_event")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub event_id: String,
    pub event_type: String,
    pub lead_id: Option<i64>,
    #[sea_orm(column_type = "JsonBinary")]
    #[schema(value_type = Object)]
    pub payload: Json,
    pub correlation_id: Option<String>,
    /// Set for a test event: only this subscription receives it.
    pub target_subscription_id: Option<i64>,
    pub state: String,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: ChronoDateTimeUtc,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub published_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
