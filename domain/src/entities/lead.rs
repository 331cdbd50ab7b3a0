use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "lead")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub source: String,
    pub source_ref: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub name: Option<String>,
    pub company: Option<String>,
    #[sea_orm(column_type = "JsonBinary")]
    /// Anything else the sender sent (an object).
    pub payload: Json,
    pub content_hash: String,
    pub source_updated_at: Option<ChronoDateTimeUtc>,
    pub status: crate::lifecycle::lead_status::LeadStatus,
    /// The owning `sales` principal, or `null`.
    pub owner_id: Option<i64>,
    /// Goes up with every change; the `ETag` is `"{version}"`.
    pub version: i64,
    /// The `version` the `process_lead` job last worked on.
    pub processed_version: i64,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
    /// Set when this lead was merged into another: every door's delivery of
    /// its key goes on to that lead, and reads are redirected there.
    pub merged_into_id: Option<i64>,
    /// When it first got an owner.
    pub assigned_at: Option<ChronoDateTimeUtc>,
    /// The first human action on it (note, call, status move, task done).
    pub first_response_at: Option<ChronoDateTimeUtc>,
    /// When a response is due, by the owner's team's target and hours.
    pub response_due_at: Option<ChronoDateTimeUtc>,
    /// The first due time it passed unanswered (kept when it changes hands).
    pub response_breached_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
