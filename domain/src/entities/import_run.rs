use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "import_run")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub source: String,
    pub file_name: Option<String>,
    pub format: String,
    pub file_hash: String,
    pub identity: String,
    #[sea_orm(column_type = "JsonBinary")]
    pub mapping: Json,
    pub dry_run: bool,
    pub state: String,
    pub rows: i64,
    pub created: i64,
    pub updated: i64,
    pub unchanged: i64,
    pub stale: i64,
    /// Records whose natural key was erased (a tombstone): nothing written.
    pub suppressed: i64,
    pub rejected: i64,
    pub bytes_total: Option<i64>,
    pub bytes_read: i64,
    pub error: Option<String>,
    pub started_by: Option<i64>,
    pub started_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
    pub finished_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
