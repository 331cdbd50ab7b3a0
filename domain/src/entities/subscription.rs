use sea_orm::entity::prelude::*;

#[derive(Clone, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "subscription")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub url: String,
    pub description: Option<String>,
    #[sea_orm(column_type = "JsonBinary")]
    pub event_types: Json,
    pub secret: String,
    pub state: String,
    pub disabled_reason: Option<String>,
    /// The replaced secret (sealed), still signed with until `previous_secret_until`.
    pub previous_secret: Option<String>,
    pub previous_secret_until: Option<ChronoDateTimeUtc>,
    /// Goes up with every change of the subscription's fields or state.
    pub version: i64,
    /// Since when its deliveries have failed with no success in between.
    pub failing_since: Option<ChronoDateTimeUtc>,
    /// Deliveries a second at most, across every publisher; `None`: no cap.
    pub rate_limit: Option<i32>,
    /// When the next turn of a capped subscription's deliveries may start.
    pub rate_next_at: Option<ChronoDateTimeUtc>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

// Hand-written so the signing secret never reaches a log line.
impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("event_types", &self.event_types)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
