use sea_orm::entity::prelude::*;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, ToSchema)]
#[schema(as = OutboxDelivery)]
#[sea_orm(table_name = "outbox_delivery")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub outbox_event_id: i64,
    pub subscription_id: i64,
    pub lead_id: Option<i64>,
    /// `pending`, `delivering`, `failed`, `delivered` or `dead`.
    pub state: String,
    pub attempts: i32,
    #[schema(value_type = String, format = DateTime)]
    pub next_attempt_at: ChronoDateTimeUtc,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub locked_until: Option<ChronoDateTimeUtc>,
    pub last_status: Option<i16>,
    pub last_error: Option<String>,
    /// How long the last attempt took, request sent to answer (or failure).
    pub last_duration_ms: Option<i32>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<ChronoDateTimeUtc>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: ChronoDateTimeUtc,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
