use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
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
    pub next_attempt_at: ChronoDateTimeUtc,
    pub locked_until: Option<ChronoDateTimeUtc>,
    pub last_status: Option<i16>,
    pub last_error: Option<String>,
    /// How long the last attempt took, request sent to answer (or failure).
    pub last_duration_ms: Option<i32>,
    pub delivered_at: Option<ChronoDateTimeUtc>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
