//! A team's working hours and response target. Principals name their team
//! (`principal.team`); a team without settings, or a principal without a
//! team, follows the team named `default`, and without that the built-in
//! target: 60 minutes, every hour of every day, UTC.

use chrono::Duration;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ActiveModelTrait, ConnectionTrait, EntityTrait, QueryOrder, QuerySelect, Set};
use serde::{Deserialize, Serialize};

use crate::business_hours::BusinessHours;
use crate::entities::team;
use crate::error::Error;
use crate::precondition::IfMatch;

/// The settings of principals without a team of their own.
pub const DEFAULT_TEAM: &str = "default";
pub const BUILT_IN_TARGET_MINUTES: i32 = 60;
/// A week: a target longer than that is a typo.
pub const MAX_TARGET_MINUTES: i32 = 7 * 24 * 60;

/// Who takes an overdue lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", tag = "to")]
pub enum Escalation {
    /// The team's available principal with the fewest open leads.
    NextAvailable,
    /// A named principal (the team's lead).
    Principal { principal_id: i64 },
}

/// A team's settings as a person states them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamSettings {
    pub time_zone: String,
    pub work_days: Vec<String>,
    pub work_start: String,
    pub work_end: String,
    pub response_target_minutes: i32,
    pub escalation: Option<Escalation>,
}

/// What the clock needs of a team.
#[derive(Debug, Clone)]
pub struct ResponseTarget {
    pub hours: BusinessHours,
    pub target: Duration,
    pub escalation: Option<Escalation>,
}

impl ResponseTarget {
    pub fn built_in() -> Self {
        Self {
            hours: BusinessHours::always(),
            target: Duration::minutes(BUILT_IN_TARGET_MINUTES.into()),
            escalation: None,
        }
    }

    /// A stored team's settings (checked when they were stored).
    pub fn of(team: &team::Model) -> Self {
        let days: Vec<String> = team.work_days.split(',').map(str::to_owned).collect();
        let hours = BusinessHours::parse(
            &team.time_zone,
            &days,
            &BusinessHours::clock(u32::try_from(team.work_start).unwrap_or(0)),
            &BusinessHours::clock(u32::try_from(team.work_end).unwrap_or(24 * 60)),
        )
        .unwrap_or_else(|_| BusinessHours::always());
        Self {
            hours,
            target: Duration::minutes(team.response_target_minutes.into()),
            escalation: team
                .escalation
                .as_deref()
                .and_then(|e| serde_json::from_str(e).ok()),
        }
    }
}

/// Every team with settings, by name.
pub async fn list<C: ConnectionTrait>(conn: &C) -> Result<Vec<team::Model>, Error> {
    Ok(team::Entity::find()
        .order_by_asc(team::Column::Name)
        .all(conn)
        .await?)
}

pub async fn find<C: ConnectionTrait>(conn: &C, name: &str) -> Result<Option<team::Model>, Error> {
    Ok(team::Entity::find_by_id(name.to_owned()).one(conn).await?)
}

/// Creates or replaces a team's settings (`If-Match` on its version when it
/// exists); the row and whether it was created.
pub async fn put<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    settings: &TeamSettings,
    if_match: &IfMatch,
) -> Result<(team::Model, bool), Error> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > crate::routing::staff::MAX_TEAM_LEN {
        return Err(Error::invalid("name", "must be 1 to 64 characters"));
    }
    let hours = BusinessHours::parse(
        &settings.time_zone,
        &settings.work_days,
        &settings.work_start,
        &settings.work_end,
    )?;
    if !(1..=MAX_TARGET_MINUTES).contains(&settings.response_target_minutes) {
        return Err(Error::invalid(
            "response_target_minutes",
            "must be 1 to 10080 (a week)",
        ));
    }
    if let Some(Escalation::Principal { principal_id }) = settings.escalation {
        crate::auth::check_sales_owner(conn, crate::ids::PrincipalId(principal_id))
            .await
            .map_err(|_| {
                Error::invalid(
                    "escalation.principal_id",
                    "must be an active sales principal",
                )
            })?;
    }
    let escalation = settings
        .escalation
        .map(|e| serde_json::to_string(&e))
        .transpose()
        .map_err(|e| sea_orm::DbErr::Json(e.to_string()))?;
    let now = crate::clock::now();
    let row = |version: i64| team::ActiveModel {
        name: Set(name.to_owned()),
        version: Set(version),
        time_zone: Set(hours.time_zone.name().to_owned()),
        work_days: Set(hours.day_names().join(",")),
        work_start: Set(i32::try_from(hours.start).unwrap_or(0)),
        work_end: Set(i32::try_from(hours.end).unwrap_or(24 * 60)),
        response_target_minutes: Set(settings.response_target_minutes),
        escalation: Set(escalation.clone()),
        updated_at: Set(now),
    };
    let mut stored = find_locked(conn, name).await?;
    if stored.is_none() {
        // Two first PUTs of one name may race: the loser's insert does
        // nothing (after the winner commits, on PostgreSQL) and it replaces
        // the winner's settings as a PUT just after it would.
        let inserted = team::Entity::insert(row(1))
            .on_conflict(
                OnConflict::column(team::Column::Name)
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(conn)
            .await?;
        if inserted == 1 {
            let saved = find_locked(conn, name).await?.ok_or(Error::NotFound)?;
            return Ok((saved, true));
        }
        stored = find_locked(conn, name).await?;
    }
    let existing = stored.ok_or(Error::NotFound)?;
    if_match.check(existing.version)?;
    let saved = row(existing.version + 1).update(conn).await?;
    Ok((saved, false))
}

async fn find_locked<C: ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<Option<team::Model>, Error> {
    Ok(team::Entity::find_by_id(name.to_owned())
        .lock_exclusive()
        .one(conn)
        .await?)
}

/// The settings that apply to `owner_id`'s leads: its team's, else the
/// `default` team's, else the built-in ones. One statement.
pub async fn target_for_owner<C: ConnectionTrait>(
    conn: &C,
    owner_id: i64,
) -> Result<ResponseTarget, Error> {
    use sea_orm::sea_query::{Expr, ExprTrait, Query};
    use sea_orm::{ColumnTrait, QueryFilter};
    let team_of_owner = Query::select()
        .column(crate::entities::principal::Column::Team)
        .from(crate::entities::principal::Entity)
        .and_where(Expr::col(crate::entities::principal::Column::Id).eq(owner_id))
        .to_owned();
    let rows = team::Entity::find()
        .filter(
            sea_orm::Condition::any()
                .add(team::Column::Name.in_subquery(team_of_owner))
                .add(team::Column::Name.eq(DEFAULT_TEAM)),
        )
        .all(conn)
        .await?;
    let own = rows.iter().find(|t| t.name != DEFAULT_TEAM);
    let chosen = own.or_else(|| rows.iter().find(|t| t.name == DEFAULT_TEAM));
    Ok(chosen.map_or_else(ResponseTarget::built_in, ResponseTarget::of))
}
