//! Choosing an owner from a pool in turn order: the turn says where to
//! start, and whoever is away or at capacity is passed by, with the reason
//! kept (for the timeline and the preview).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::{Deserialize, Serialize};

use crate::auth::Role;
use crate::entities::{lead, principal};
use crate::error::Error;
use crate::lifecycle::lead_status::LeadStatus;
use crate::routing::staff::{Routing, StaffRecord};

/// An active sales principal routing may give leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: i64,
    pub routing: Routing,
}

/// Why a candidate was passed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Marked away (with no return time, or one still ahead).
    Away,
    /// Owns as many open leads as its capacity.
    AtCapacity,
}

/// A principal routing passed by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Skipped {
    pub principal_id: i64,
    pub reason: SkipReason,
}

/// Who a turn fell on, and who was passed by on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choice {
    pub owner: Option<i64>,
    pub skipped: Vec<Skipped>,
}

/// Every active sales principal, in id order: the pool when no rule names
/// a team.
pub async fn sales_staff<C: ConnectionTrait>(conn: &C) -> Result<Vec<Candidate>, Error> {
    principal::Entity::find()
        .filter(principal::Column::Role.eq(Role::Sales.as_str()))
        .filter(principal::Column::Active.eq(true))
        .order_by_asc(principal::Column::Id)
        .all(conn)
        .await?
        .into_iter()
        .map(|model| {
            let record = StaffRecord::try_from(model)?;
            Ok(Candidate {
                id: record.principal.id,
                routing: record.routing,
            })
        })
        .collect()
}

/// How many open leads each principal of `ids` owns (absent: none).
pub async fn open_leads<C: ConnectionTrait>(
    conn: &C,
    ids: &[i64],
) -> Result<HashMap<i64, i64>, Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let open = LeadStatus::ALL.into_iter().filter(|s| s.is_open());
    let rows: Vec<(i64, i64)> = lead::Entity::find()
        .select_only()
        .column(lead::Column::OwnerId)
        .column_as(Expr::col(lead::Column::Id).count(), "n")
        .filter(lead::Column::OwnerId.is_in(ids.iter().copied()))
        .filter(lead::Column::Status.is_in(open))
        // A merged lead's work is its survivor's.
        .filter(lead::Column::MergedIntoId.is_null())
        .group_by(lead::Column::OwnerId)
        .into_tuple()
        .all(conn)
        .await?;
    Ok(rows.into_iter().collect())
}

/// The ids of the candidates with a capacity: only their open leads need
/// counting.
pub fn limited(order: &[&Candidate]) -> Vec<i64> {
    order
        .iter()
        .filter(|c| c.routing.capacity.is_some())
        .map(|c| c.id)
        .collect()
}

/// Walks `order` from position `start` (wrapping) to the first candidate
/// neither away at `now` nor at capacity by `open`; each one passed by is
/// named once, with its reason.
pub fn choose(
    order: &[&Candidate],
    start: usize,
    open: &HashMap<i64, i64>,
    now: DateTime<Utc>,
) -> Choice {
    let mut choice = Choice::default();
    for step in 0..order.len() {
        let candidate = order[(start + step) % order.len()];
        let reason = if candidate.routing.is_away(now) {
            Some(SkipReason::Away)
        } else if candidate
            .routing
            .capacity
            .is_some_and(|cap| open.get(&candidate.id).copied().unwrap_or(0) >= i64::from(cap))
        {
            Some(SkipReason::AtCapacity)
        } else {
            None
        };
        match reason {
            None => {
                choice.owner = Some(candidate.id);
                break;
            }
            Some(reason) => {
                // A weighted order names a principal several times.
                if !choice
                    .skipped
                    .iter()
                    .any(|s| s.principal_id == candidate.id)
                {
                    choice.skipped.push(Skipped {
                        principal_id: candidate.id,
                        reason,
                    });
                }
            }
        }
    }
    choice
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::staff::Availability;

    fn candidate(id: i64, availability: Availability, capacity: Option<i32>) -> Candidate {
        Candidate {
            id,
            routing: Routing {
                team: None,
                availability,
                away_until: None,
                capacity,
            },
        }
    }

    #[test]
    fn the_turn_passes_by_the_away_and_the_full() {
        let now = Utc::now();
        let staff = [
            candidate(1, Availability::Away, None),
            candidate(2, Availability::Available, Some(2)),
            candidate(3, Availability::Available, None),
        ];
        let order: Vec<&Candidate> = staff.iter().collect();
        let open = HashMap::from([(2, 2)]);
        let choice = choose(&order, 0, &open, now);
        assert_eq!(choice.owner, Some(3));
        assert_eq!(
            choice.skipped,
            [
                Skipped {
                    principal_id: 1,
                    reason: SkipReason::Away
                },
                Skipped {
                    principal_id: 2,
                    reason: SkipReason::AtCapacity
                },
            ]
        );
        // Room again: the turn that starts at 2 stops there.
        let choice = choose(&order, 1, &HashMap::from([(2, 1)]), now);
        assert_eq!((choice.owner, choice.skipped.len()), (Some(2), 0));
        // Nobody: every one named once.
        let full = HashMap::from([(2, 2)]);
        let order = vec![&staff[0], &staff[1], &staff[0], &staff[1]];
        let choice = choose(&order, 3, &full, now);
        assert_eq!((choice.owner, choice.skipped.len()), (None, 2));
    }
}
