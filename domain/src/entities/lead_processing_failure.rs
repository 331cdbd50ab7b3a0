use sea_orm::entity::prelude::*;

/// Why processing a lead's current version failed, and what happens next.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "lead_processing_failure")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub lead_id: i64,
    /// The lead version the attempts were at; a newer version starts afresh.
    pub version: i64,
    /// `failed` (retried at `next_attempt_at`) or `dead` (given up).
    pub state: String,
    pub attempts: i32,
    pub last_error: String,
    pub next_attempt_at: Option<ChronoDateTimeUtc>,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
