use sea_orm::entity::prelude::*;

/// A sales team's working hours and response target (speed to lead).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "team")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    /// An IANA time zone.
    pub time_zone: String,
    /// `mon,tue,…`
    pub work_days: String,
    /// Minutes after local midnight.
    pub work_start: i32,
    pub work_end: i32,
    pub response_target_minutes: i32,
    /// Who takes an overdue lead (JSON of `speed_to_lead::team::Escalation`);
    /// `null`: nobody, it stays overdue.
    pub escalation: Option<String>,
    pub version: i64,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
