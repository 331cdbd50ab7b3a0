//! What `/api/teams` and `/api/reports/speed-to-lead` take and show.

use chrono::{DateTime, Utc};
use domain::business_hours::BusinessHours;
use domain::entities::team;
use domain::lead::speed_to_lead::team::{Escalation, ResponseTarget, TeamSettings};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::wire::about::about_nobody;
use crate::wire::versioned::Versioned;

/// A team's working hours, response target and escalation.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = TeamSettings)]
pub struct TeamIn {
    /// An IANA time zone, e.g. `Europe/Berlin`.
    pub time_zone: String,
    /// Working days: `mon` … `sun`.
    pub work_days: Vec<String>,
    /// `HH:MM`, local time.
    pub work_start: String,
    /// `HH:MM` (up to `24:00`), local time, after `work_start`.
    pub work_end: String,
    /// Working minutes from assignment to the first response (1–10080).
    pub response_target_minutes: i32,
    /// Who takes a lead still unanswered when due: `{"to": "next_available"}`
    /// or `{"to": "principal", "principal_id": 7}`; absent: nobody.
    #[serde(default)]
    pub escalation: Option<Escalation>,
}

impl From<TeamIn> for TeamSettings {
    fn from(t: TeamIn) -> Self {
        Self {
            time_zone: t.time_zone,
            work_days: t.work_days,
            work_start: t.work_start,
            work_end: t.work_end,
            response_target_minutes: t.response_target_minutes,
            escalation: t.escalation,
        }
    }
}

/// A team's settings as stored.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = Team)]
pub struct TeamOut {
    pub name: String,
    pub time_zone: String,
    pub work_days: Vec<String>,
    pub work_start: String,
    pub work_end: String,
    pub response_target_minutes: i32,
    pub escalation: Option<Escalation>,
    pub version: i64,
    pub updated_at: DateTime<Utc>,
}

impl From<team::Model> for TeamOut {
    fn from(t: team::Model) -> Self {
        let escalation = ResponseTarget::of(&t).escalation;
        Self {
            work_days: t.work_days.split(',').map(str::to_owned).collect(),
            work_start: BusinessHours::clock(u32::try_from(t.work_start).unwrap_or(0)),
            work_end: BusinessHours::clock(u32::try_from(t.work_end).unwrap_or(0)),
            name: t.name,
            time_zone: t.time_zone,
            response_target_minutes: t.response_target_minutes,
            escalation,
            version: t.version,
            updated_at: t.updated_at,
        }
    }
}

impl Versioned for TeamOut {
    fn version(&self) -> i64 {
        self.version
    }
}

about_nobody!(TeamOut);

/// Every team with settings, by name.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct TeamList {
    pub data: Vec<TeamOut>,
}

/// Which leads a speed-to-lead report covers.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportParams {
    /// `24h` (default), `7d` or `30d`: leads received since then.
    pub window: Option<String>,
    /// Only leads from this source.
    pub source: Option<String>,
    /// Only leads owned by principals of this team.
    pub team: Option<String>,
}

/// A lead's speed-to-lead clock (in `GET /api/leads/{id}`).
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = SpeedToLead)]
pub struct ClockOut {
    pub assigned_at: Option<DateTime<Utc>>,
    pub first_response_at: Option<DateTime<Utc>>,
    pub response_due_at: Option<DateTime<Utc>>,
    /// Unanswered and past due.
    pub overdue: bool,
}

impl ClockOut {
    pub fn of(lead: &domain::entities::lead::Model, now: DateTime<Utc>) -> Self {
        Self {
            assigned_at: lead.assigned_at,
            first_response_at: lead.first_response_at,
            response_due_at: lead.response_due_at,
            overdue: lead.first_response_at.is_none()
                && lead.status.is_open()
                && lead.owner_id.is_some()
                && lead.response_due_at.is_some_and(|due| due < now),
        }
    }
}
