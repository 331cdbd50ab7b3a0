use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "principal")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub name: String,
    pub role: String,
    pub source: Option<String>,
    pub token_hash: String,
    pub active: bool,
    pub created_at: ChronoDateTimeUtc,
    /// Routing: the team a `sales` principal's leads come through.
    pub team: Option<String>,
    /// `available` or `away` (`crate::routing::staff::Availability`).
    pub availability: String,
    /// An `away` principal is back at this time; `null`: until further notice.
    pub away_until: Option<ChronoDateTimeUtc>,
    /// The most open leads routing gives it; `null`: no limit.
    pub capacity: Option<i32>,
    /// Goes up with every change; the `ETag` is `"{version}"`.
    pub version: i64,
    /// A user (a person who signs in): lower-case, unique.
    pub email: Option<String>,
    /// argon2id, as a PHC string; `None`: cannot sign in with a password.
    pub password_hash: Option<String>,
    /// When the user was disabled (its sessions ended, its token refused).
    pub disabled_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
