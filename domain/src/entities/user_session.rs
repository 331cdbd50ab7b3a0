use sea_orm::entity::prelude::*;

/// A signed-in page's session. Only hashes are stored: the session id is in
/// the browser's cookie, the CSRF token derived from it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "user_session")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub principal_id: i64,
    /// SHA-256 of the session id, hex.
    pub id_hash: String,
    /// SHA-256 of the CSRF token, hex.
    pub csrf_hash: String,
    pub created_at: ChronoDateTimeUtc,
    /// Moves on with use (at most once a minute); idle past the idle
    /// lifetime, the session is over.
    pub last_seen_at: ChronoDateTimeUtc,
    /// The absolute end, fixed when the session starts.
    pub expires_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
