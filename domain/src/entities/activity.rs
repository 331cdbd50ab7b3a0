use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "activity")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub lead_id: i64,
    /// `ingest`, `note`, `status_changed`, `assigned`, `duplicate_hint` or `converted`.
    pub kind: String,
    /// `ingest`: the door — `api`, `webhook`, `reconcile` or `import`.
    pub origin: Option<String>,
    /// `ingest`: `created`, `updated`, `unchanged` or `stale`.
    pub outcome: Option<String>,
    /// The principal who did it, if a person did.
    pub author_id: Option<i64>,
    #[sea_orm(column_type = "JsonBinary", nullable)]
    /// What changed, by kind: `{from, to, reason}`, `{text}`, `{from, to, by}`, ….
    pub detail: Option<Json>,
    pub correlation_id: Option<String>,
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
