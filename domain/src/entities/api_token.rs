use sea_orm::entity::prelude::*;

/// A bearer token of a principal. Only its SHA-256 is stored.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_token")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub principal_id: i64,
    /// What it is for (a user's personal tokens), or the principal's name.
    pub name: String,
    /// SHA-256 of the token, hex.
    pub token_hash: String,
    pub created_at: ChronoDateTimeUtc,
    /// Refused from this time on (`401 /problems/token-expired`); `None`:
    /// never.
    pub expires_at: Option<ChronoDateTimeUtc>,
    /// Noted at most once a minute.
    pub last_used_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
