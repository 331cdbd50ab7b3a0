//! What routing knows about a principal: its `team`, whether it is
//! `available` or `away` (until `away_until`, if set), and its `capacity`
//! (the most open leads routing gives it). An admin changes any of them; a
//! `sales` principal changes only its own availability.

use chrono::{DateTime, Datelike, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Value};
use serde::{Deserialize, Serialize};

use crate::auth::{Principal, Role, principal_of};
use crate::entities::principal::{self, Column};
use crate::error::Error;
use crate::field_presence::Patch;
use crate::precondition::IfMatch;
use crate::routing::waiting;

pub const MAX_TEAM_LEN: usize = 64;
pub const MAX_CAPACITY: i64 = 100_000;

/// Whether a principal takes new leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Availability {
    Available,
    /// Routing passes it by (until `away_until`, when set).
    Away,
}

impl Availability {
    pub const ALL: [Self; 2] = [Self::Available, Self::Away];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Away => "away",
        }
    }
}

text_enum!(Availability, "unknown availability '{}' (available, away)");

/// A principal's routing attributes, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Routing {
    pub team: Option<String>,
    pub availability: Availability,
    pub away_until: Option<DateTime<Utc>>,
    pub capacity: Option<i32>,
}

impl Routing {
    /// Away at `now`: marked away, with no return time or one still ahead.
    pub fn is_away(&self, now: DateTime<Utc>) -> bool {
        self.availability == Availability::Away && self.away_until.is_none_or(|t| t > now)
    }
}

/// A principal with what routing knows about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaffRecord {
    pub principal: Principal,
    /// Revoked principals stay listed, so the leads they owned keep a name.
    pub active: bool,
    pub created_at: DateTime<Utc>,
    pub routing: Routing,
    /// Goes up with every change; the `ETag` is `"{version}"`.
    pub version: i64,
}

impl TryFrom<principal::Model> for StaffRecord {
    type Error = Error;

    fn try_from(model: principal::Model) -> Result<Self, Error> {
        let routing = Routing {
            team: model.team.clone(),
            // Written only from the enum; a row it cannot read is not ours.
            availability: model
                .availability
                .parse()
                .map_err(|e: String| Error::Db(sea_orm::DbErr::Custom(e)))?,
            away_until: model.away_until,
            capacity: model.capacity,
        };
        Ok(Self {
            active: model.active,
            created_at: model.created_at,
            version: model.version,
            routing,
            principal: principal_of(model)?,
        })
    }
}

/// Every principal, oldest first.
pub async fn list<C: ConnectionTrait>(conn: &C) -> Result<Vec<StaffRecord>, Error> {
    principal::Entity::find()
        .order_by_asc(Column::Id)
        .all(conn)
        .await?
        .into_iter()
        .map(StaffRecord::try_from)
        .collect()
}

pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<StaffRecord, Error> {
    principal::Entity::find_by_id(id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?
        .try_into()
}

/// Fields to change; absent fields stay as they are. Setting `availability`
/// to `available` clears `away_until`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrincipalPatch {
    /// Admin only. 1–64 characters; `null`: in no team.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<String>)]
    pub team: Patch<String>,
    pub availability: Option<Availability>,
    /// When an `away` principal is back (RFC 3339); `null`: until further
    /// notice.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub away_until: Patch<DateTime<Utc>>,
    /// Admin only. The most open leads routing gives it, 0 to 100000;
    /// `null`: no limit.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i64>)]
    pub capacity: Patch<i64>,
}

impl PrincipalPatch {
    fn changes_only_availability(&self) -> bool {
        self.team.is_absent() && self.capacity.is_absent()
    }
}

/// What [`update`] did.
#[derive(Debug, Clone)]
pub struct Updated {
    pub record: StaffRecord,
    /// It may take leads it could not take before (back, more room, another
    /// team): the leads waiting for an owner were sent back to the lead drain.
    pub may_take_more: bool,
}

/// Checks `patch` against who asks (`None`: the command line, which has the
/// database and so an admin's say), then changes the principal under
/// `If-Match`: an admin changes anything of a `sales` principal, a `sales`
/// principal only its own availability.
pub async fn update<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    patch: PrincipalPatch,
    if_match: &IfMatch,
    by: Option<&Principal>,
) -> Result<Updated, Error> {
    let Some(by) = by else {
        return apply(conn, id, patch, if_match).await;
    };
    match by.role {
        Role::Admin => {}
        Role::Sales if by.id != id => {
            return Err(Error::Forbidden(
                "a sales principal may change only its own availability".into(),
            ));
        }
        Role::Sales if !patch.changes_only_availability() => {
            return Err(Error::Forbidden(
                "only an admin may change a team or a capacity".into(),
            ));
        }
        Role::Sales => {}
        Role::Intake | Role::Ops => {
            return Err(Error::Forbidden(
                "only an admin, or a sales principal for itself, may change a principal".into(),
            ));
        }
    }
    apply(conn, id, patch, if_match).await
}

async fn apply<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    patch: PrincipalPatch,
    if_match: &IfMatch,
) -> Result<Updated, Error> {
    let named = first_field(&patch);
    let asks_nothing = patch.team.is_absent()
        && patch.availability.is_none()
        && patch.away_until.is_absent()
        && patch.capacity.is_absent();
    let team = match patch.team.change() {
        None => None,
        Some(value) => Some(value.map(|t| team(&t)).transpose()?),
    };
    let capacity = match patch.capacity.change() {
        None => None,
        Some(value) => Some(value.map(capacity).transpose()?),
    };
    let away_until = match patch.away_until.change() {
        None => None,
        Some(value) => Some(value.map(return_time).transpose()?),
    };
    for _ in 0..3 {
        let current = principal::Entity::find_by_id(id)
            .one(conn)
            .await?
            .ok_or(Error::NotFound)?;
        if_match.check(current.version)?;
        let before = StaffRecord::try_from(current.clone())?;
        if asks_nothing {
            return Ok(Updated {
                record: before,
                may_take_more: false,
            });
        }
        if before.principal.role != Role::Sales {
            return Err(Error::invalid(named, "only sales principals are routed"));
        }
        let mut after = before.routing.clone();
        if let Some(team) = &team {
            after.team.clone_from(team);
        }
        if let Some(capacity) = capacity {
            after.capacity = capacity;
        }
        if let Some(availability) = patch.availability {
            after.availability = availability;
            if availability == Availability::Available {
                after.away_until = None;
            }
        }
        if let Some(away_until) = away_until {
            after.away_until = away_until;
        }
        if after.availability == Availability::Available && after.away_until.is_some() {
            return Err(Error::invalid(
                "away_until",
                "is set only with availability 'away'",
            ));
        }
        if after == before.routing {
            return Ok(Updated {
                record: before,
                may_take_more: false,
            });
        }
        let values: [(Column, Value); 4] = [
            (Column::Team, after.team.clone().into()),
            (Column::Availability, after.availability.as_str().into()),
            (Column::AwayUntil, after.away_until.into()),
            (Column::Capacity, after.capacity.into()),
        ];
        let mut update = principal::Entity::update_many()
            .col_expr(Column::Version, Expr::col(Column::Version).add(1));
        for (column, value) in values {
            update = update.col_expr(column, Expr::val(value));
        }
        let rows = update
            .filter(Column::Id.eq(id))
            .filter(Column::Version.eq(current.version))
            .exec_with_returning(conn)
            .await?;
        let Some(changed) = rows.into_iter().next() else {
            // Another change came first: read again and decide again.
            continue;
        };
        let now = crate::clock::now();
        let may_take_more = (before.routing.is_away(now) && !after.is_away(now))
            || after.team != before.routing.team
            || match (before.routing.capacity, after.capacity) {
                (Some(_), None) => true,
                (Some(was), Some(is)) => is > was,
                (None, _) => false,
            };
        if may_take_more {
            waiting::requeue(conn).await?;
        }
        return Ok(Updated {
            record: changed.try_into()?,
            may_take_more,
        });
    }
    let current = find(conn, id).await?;
    Err(Error::PreconditionFailed {
        current: current.version,
    })
}

/// Whether a principal's return time has passed while it is still marked away.
pub async fn has_past_absences<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
) -> Result<bool, Error> {
    Ok(principal::Entity::find()
        .filter(Column::Availability.eq(Availability::Away.as_str()))
        .filter(Column::AwayUntil.lte(now))
        .one(conn)
        .await?
        .is_some())
}

/// Marks available the principals whose return time has passed (a new
/// version each), and if there were any, sends the leads waiting for an
/// owner back to the lead drain. Returns how many came back. Run by
/// housekeeping, so a return is noticed within seconds without a request.
pub async fn end_past_absences<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
) -> Result<u64, Error> {
    let back = principal::Entity::update_many()
        .col_expr(
            Column::Availability,
            Expr::val(Availability::Available.as_str()),
        )
        .col_expr(Column::AwayUntil, Expr::val(Option::<DateTime<Utc>>::None))
        .col_expr(Column::Version, Expr::col(Column::Version).add(1))
        .filter(Column::Availability.eq(Availability::Away.as_str()))
        .filter(Column::AwayUntil.lte(now))
        .exec(conn)
        .await?
        .rows_affected;
    if back > 0 {
        waiting::requeue(conn).await?;
    }
    Ok(back)
}

/// The field a refusal names: the first one given.
fn first_field(patch: &PrincipalPatch) -> &'static str {
    if !patch.team.is_absent() {
        "team"
    } else if patch.availability.is_some() {
        "availability"
    } else if !patch.away_until.is_absent() {
        "away_until"
    } else {
        "capacity"
    }
}

pub(crate) fn team(raw: &str) -> Result<String, Error> {
    let team = raw.trim();
    if team.is_empty() || team.chars().count() > MAX_TEAM_LEN || team.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "team",
            "must be 1 to 64 characters, without control characters",
        ));
    }
    Ok(team.to_owned())
}

fn capacity(value: i64) -> Result<i32, Error> {
    if !(0..=MAX_CAPACITY).contains(&value) {
        return Err(Error::invalid("capacity", "must be 0 to 100000, or null"));
    }
    i32::try_from(value).map_err(|_| Error::invalid("capacity", "must be 0 to 100000, or null"))
}

/// Years 1 to 9999: what RFC 3339 writes and both databases store.
fn return_time(at: DateTime<Utc>) -> Result<DateTime<Utc>, Error> {
    if (1..=9999).contains(&at.year()) {
        Ok(at)
    } else {
        Err(Error::invalid(
            "away_until",
            "must be in the years 1 to 9999",
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn away_ends_at_its_return_time() {
        let now = Utc::now();
        let mut routing = Routing {
            team: None,
            availability: Availability::Away,
            away_until: None,
            capacity: None,
        };
        assert!(routing.is_away(now));
        routing.away_until = Some(now + chrono::Duration::hours(1));
        assert!(routing.is_away(now));
        routing.away_until = Some(now - chrono::Duration::seconds(1));
        assert!(!routing.is_away(now));
        routing.availability = Availability::Available;
        routing.away_until = None;
        assert!(!routing.is_away(now));
    }

    #[test]
    fn values_out_of_range_name_their_field() {
        for (result, field) in [
            (team(" ").map(|_| ()), "team"),
            (team(&"x".repeat(65)).map(|_| ()), "team"),
            (capacity(-1).map(|_| ()), "capacity"),
            (capacity(100_001).map(|_| ()), "capacity"),
        ] {
            let Err(Error::Invalid(errors)) = result else {
                panic!("{field}: accepted");
            };
            assert_eq!(errors[0].field, field);
        }
        assert_eq!(team(" east ").unwrap(), "east");
        assert_eq!(capacity(0).unwrap(), 0);
    }
}
