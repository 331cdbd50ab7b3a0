use sea_orm::entity::prelude::*;

/// One reconcile run of a source: its range, its counts (committed page by
/// page, so a running run shows progress), its state and error.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "reconcile_run")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub source: String,
    pub state: String,
    pub dry_run: bool,
    pub trigger: String,
    pub tick_key: Option<String>,
    pub cursor_start: Option<String>,
    /// The cursor after the last fully processed page.
    pub cursor: Option<String>,
    pub pages: i64,
    pub fetched: i64,
    pub created: i64,
    pub updated: i64,
    pub unchanged: i64,
    pub stale: i64,
    /// Records whose natural key was erased (a tombstone): nothing written.
    pub suppressed: i64,
    pub rejected: i64,
    pub missed: i64,
    pub error: Option<String>,
    pub started_by: Option<i64>,
    pub started_at: ChronoDateTimeUtc,
    pub heartbeat_at: ChronoDateTimeUtc,
    pub finished_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
