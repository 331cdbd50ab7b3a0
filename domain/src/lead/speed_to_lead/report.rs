//! `GET /api/reports/speed-to-lead`: for the leads that arrived in a window,
//! per source and per owner, the system's delay (arrival → owner) and the
//! rep's delay (owner → first response) as p50/p90 in seconds, how many
//! were answered within their target, and how many breached it.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::Query;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use serde::Serialize;

use crate::entities::{lead, principal};
use crate::error::Error;

/// The windows a report covers.
pub const WINDOWS: [(&str, i64); 3] = [("24h", 24), ("7d", 7 * 24), ("30d", 30 * 24)];

/// What the report is asked for.
#[derive(Debug, Clone, Default)]
pub struct ReportFilter {
    pub window: String,
    pub source: Option<String>,
    /// Only leads owned by principals of this team.
    pub team: Option<String>,
}

/// p50 and p90 of a delay, in seconds; `null` with no sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Delay {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
}

/// The figures of one group of leads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = SpeedToLeadFigures)]
pub struct Figures {
    pub leads: u64,
    pub assigned: u64,
    pub responded: u64,
    /// Received → assigned.
    pub system_delay_seconds: Delay,
    /// Assigned → first response.
    pub rep_delay_seconds: Delay,
    /// Answered no later than due.
    pub within_target: u64,
    /// Answered after due, or unanswered and past due.
    pub breaches: u64,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SourceFigures {
    pub source: String,
    #[serde(flatten)]
    pub figures: Figures,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct OwnerFigures {
    pub owner_id: i64,
    #[serde(flatten)]
    pub figures: Figures,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = SpeedToLeadReport)]
pub struct Report {
    pub window: String,
    pub since: DateTime<Utc>,
    pub generated_at: DateTime<Utc>,
    pub total: Figures,
    pub by_source: Vec<SourceFigures>,
    pub by_owner: Vec<OwnerFigures>,
}

type Row = (
    String,
    Option<i64>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

/// The report at `now`.
pub async fn report<C: ConnectionTrait>(
    conn: &C,
    filter: &ReportFilter,
    now: DateTime<Utc>,
) -> Result<Report, Error> {
    let hours = WINDOWS
        .iter()
        .find(|(name, _)| *name == filter.window)
        .map(|(_, h)| *h)
        .ok_or_else(|| Error::invalid("window", "must be 24h, 7d or 30d"))?;
    let since = now - Duration::hours(hours);
    let mut query = lead::Entity::find()
        .select_only()
        .columns([
            lead::Column::Source,
            lead::Column::OwnerId,
            lead::Column::CreatedAt,
            lead::Column::AssignedAt,
            lead::Column::FirstResponseAt,
            lead::Column::ResponseDueAt,
            lead::Column::ResponseBreachedAt,
        ])
        .filter(lead::Column::CreatedAt.gte(since))
        .filter(lead::Column::MergedIntoId.is_null());
    if let Some(source) = &filter.source {
        query = query.filter(lead::Column::Source.eq(source.as_str()));
    }
    if let Some(team) = &filter.team {
        let members = Query::select()
            .column(principal::Column::Id)
            .from(principal::Entity)
            .and_where(principal::Column::Team.eq(team.as_str()))
            .to_owned();
        query = query.filter(lead::Column::OwnerId.in_subquery(members));
    }
    let rows: Vec<Row> = query.into_tuple().all(conn).await?;
    let mut total = Tally::default();
    let mut sources: BTreeMap<String, Tally> = BTreeMap::new();
    let mut owners: BTreeMap<i64, Tally> = BTreeMap::new();
    for (source, owner, created, assigned, responded, due, breached) in rows {
        let lead = Sample {
            created,
            assigned,
            responded,
            due,
            breached,
        };
        total.add(&lead, now);
        sources.entry(source).or_default().add(&lead, now);
        if let Some(owner) = owner {
            owners.entry(owner).or_default().add(&lead, now);
        }
    }
    Ok(Report {
        window: filter.window.clone(),
        since,
        generated_at: now,
        total: total.figures(),
        by_source: sources
            .into_iter()
            .map(|(source, t)| SourceFigures {
                source,
                figures: t.figures(),
            })
            .collect(),
        by_owner: owners
            .into_iter()
            .map(|(owner_id, t)| OwnerFigures {
                owner_id,
                figures: t.figures(),
            })
            .collect(),
    })
}

struct Sample {
    created: DateTime<Utc>,
    assigned: Option<DateTime<Utc>>,
    responded: Option<DateTime<Utc>>,
    due: Option<DateTime<Utc>>,
    /// A due time it passed before changing hands.
    breached: Option<DateTime<Utc>>,
}

#[derive(Default)]
struct Tally {
    leads: u64,
    system: Vec<f64>,
    rep: Vec<f64>,
    responded: u64,
    within: u64,
    breaches: u64,
}

fn seconds(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    ((to - from).num_milliseconds().max(0) as f64) / 1000.0
}

impl Tally {
    fn add(&mut self, lead: &Sample, now: DateTime<Utc>) {
        self.leads += 1;
        if let Some(assigned) = lead.assigned {
            self.system.push(seconds(lead.created, assigned));
            if let Some(responded) = lead.responded {
                self.rep.push(seconds(assigned, responded));
            }
        }
        if lead.responded.is_some() {
            self.responded += 1;
        }
        if lead.breached.is_some() {
            self.breaches += 1;
        } else if let Some(due) = lead.due {
            match lead.responded {
                Some(at) if at <= due => self.within += 1,
                Some(_) => self.breaches += 1,
                None if now > due => self.breaches += 1,
                None => {}
            }
        }
    }

    fn figures(mut self) -> Figures {
        Figures {
            leads: self.leads,
            assigned: self.system.len() as u64,
            responded: self.responded,
            system_delay_seconds: percentiles(&mut self.system),
            rep_delay_seconds: percentiles(&mut self.rep),
            within_target: self.within,
            breaches: self.breaches,
        }
    }
}

/// Nearest-rank p50 and p90.
fn percentiles(samples: &mut [f64]) -> Delay {
    if samples.is_empty() {
        return Delay::default();
    }
    samples.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let index = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[index]
    };
    Delay {
        p50: Some(rank(0.5)),
        p90: Some(rank(0.9)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(
            percentiles(&mut samples),
            Delay {
                p50: Some(5.0),
                p90: Some(9.0)
            }
        );
        assert_eq!(percentiles(&mut []), Delay::default());
        assert_eq!(
            percentiles(&mut [7.0]),
            Delay {
                p50: Some(7.0),
                p90: Some(7.0)
            }
        );
    }
}
