//! An overdue lead changes hands by its owner's team's escalation: to the
//! team's available principal with the fewest open leads (not the owner,
//! nobody away or at capacity), or to a named principal. The new owner's
//! clock starts afresh; a lead nobody can take stays overdue and counted.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, LockBehavior, LockType};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
};
use serde_json::json;

use crate::auth::Role;
use crate::entities::{lead, principal};
use crate::error::Error;
use crate::lead::activity::{self, ActivityKind, NewActivity};
use crate::lead::speed_to_lead::clock;
use crate::lead::speed_to_lead::team::{self, Escalation};
use crate::outbound::{events, outbox};
use crate::routing::{choice, staff};

/// Leads escalated per pass at most.
pub const BATCH: u64 = 100;

/// The owners whose team (or, without settings of its own, the `default`
/// team) has an escalation: only their overdue leads can change hands.
/// Teams and principals are few; read whole.
pub async fn escalating_owners<C: ConnectionTrait>(conn: &C) -> Result<Vec<i64>, Error> {
    let teams = team::list(conn).await?;
    if teams.iter().all(|t| t.escalation.is_none()) {
        return Ok(Vec::new());
    }
    let configured: HashMap<&str, bool> = teams
        .iter()
        .map(|t| (t.name.as_str(), t.escalation.is_some()))
        .collect();
    let default_escalates = configured.get(team::DEFAULT_TEAM).copied().unwrap_or(false);
    let staff: Vec<(i64, Option<String>)> = principal::Entity::find()
        .select_only()
        .column(principal::Column::Id)
        .column(principal::Column::Team)
        .filter(principal::Column::Role.eq(Role::Sales.as_str()))
        .into_tuple()
        .all(conn)
        .await?;
    Ok(staff
        .into_iter()
        .filter(|(_, own)| {
            own.as_deref()
                .and_then(|name| configured.get(name).copied())
                .unwrap_or(default_escalates)
        })
        .map(|(id, _)| id)
        .collect())
}

/// How many overdue leads an escalation could move now (a read, so an idle
/// process takes no write turn).
pub async fn escalatable<C: ConnectionTrait>(conn: &C, now: DateTime<Utc>) -> Result<u64, Error> {
    let owners = escalating_owners(conn).await?;
    if owners.is_empty() {
        return Ok(0);
    }
    Ok(lead::Entity::find()
        .filter(clock::overdue(now))
        .filter(lead::Column::OwnerId.is_in(owners))
        .count(conn)
        .await?)
}

/// Escalates up to [`BATCH`] overdue leads on the caller's transaction;
/// how many changed hands.
pub async fn escalate_overdue<C: ConnectionTrait>(
    txn: &C,
    now: DateTime<Utc>,
) -> Result<u64, Error> {
    let owners = escalating_owners(txn).await?;
    if owners.is_empty() {
        return Ok(0);
    }
    // Several nodes may run this: each takes leads no other holds. Only
    // leads an escalation could move, so those of teams without one never
    // crowd the others out of a batch.
    let overdue = lead::Entity::find()
        .filter(clock::overdue(now))
        .filter(lead::Column::OwnerId.is_in(owners))
        .order_by_asc(lead::Column::ResponseDueAt)
        .limit(BATCH)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .all(txn)
        .await?;
    let mut moved = 0;
    for lead in overdue {
        let Some(owner) = lead.owner_id else { continue };
        let target = team::target_for_owner(txn, owner).await?;
        let next = match target.escalation {
            None => None,
            // Still an active sales principal now, not only when named.
            Some(Escalation::Principal { principal_id }) if principal_id != owner => {
                crate::auth::check_sales_owner(txn, crate::ids::PrincipalId(principal_id))
                    .await
                    .ok()
                    .map(|_| principal_id)
            }
            Some(Escalation::Principal { .. }) => None,
            Some(Escalation::NextAvailable) => next_available(txn, owner, now).await?,
        };
        let Some(next) = next else { continue };
        let due = clock::due_for(txn, Some(next), now).await?;
        let mut update = lead::Entity::update_many();
        for (column, expr) in clock::handed_over(&lead, Some(now), due, now) {
            update = update.col_expr(column, expr);
        }
        let updated = update
            .col_expr(lead::Column::OwnerId, Expr::val(next))
            .col_expr(
                lead::Column::Version,
                Expr::col(lead::Column::Version).add(1),
            )
            .col_expr(
                lead::Column::ProcessedVersion,
                Expr::col(lead::Column::ProcessedVersion).add(1),
            )
            .col_expr(lead::Column::UpdatedAt, Expr::val(now))
            .filter(lead::Column::Id.eq(lead.id))
            .filter(lead::Column::Version.eq(lead.version))
            .exec(txn)
            .await?;
        if updated.rows_affected == 0 {
            continue;
        }
        activity::record(
            txn,
            NewActivity {
                lead_id: lead.id,
                kind: ActivityKind::Assigned,
                origin: None,
                outcome: None,
                author_id: None,
                detail: Some(json!({
                    "from": owner, "to": next, "by": "escalation",
                    "overdue_since": lead.response_due_at,
                })),
                correlation_id: None,
            },
        )
        .await?;
        let payload = events::LeadAssigned {
            lead_id: lead.id,
            from: Some(owner),
            to: Some(next),
            version: lead.version + 1,
        };
        outbox::enqueue_event(txn, Some(lead.id), &payload, None).await?;
        moved += 1;
    }
    if moved > 0 {
        metrics::counter!("leadpipe_leads_response_escalated_total").increment(moved);
        // The owners the leads left may take leads that wait for one.
        crate::routing::waiting::requeue(txn).await?;
    }
    Ok(moved)
}

/// The owner's teammate (same team, or no team when the owner has none)
/// who is available, under capacity and has the fewest open leads.
async fn next_available<C: ConnectionTrait>(
    txn: &C,
    owner: i64,
    now: DateTime<Utc>,
) -> Result<Option<i64>, Error> {
    let Some(current) = principal::Entity::find_by_id(owner).one(txn).await? else {
        return Ok(None);
    };
    let mut mates = principal::Entity::find()
        .filter(principal::Column::Role.eq(Role::Sales.as_str()))
        .filter(principal::Column::Active.eq(true))
        .filter(principal::Column::Id.ne(owner));
    mates = match &current.team {
        Some(name) => mates.filter(principal::Column::Team.eq(name.as_str())),
        None => mates.filter(principal::Column::Team.is_null()),
    };
    let mates = mates.order_by_asc(principal::Column::Id).all(txn).await?;
    let ids: Vec<i64> = mates.iter().map(|p| p.id).collect();
    let open: HashMap<i64, i64> = choice::open_leads(txn, &ids).await?;
    let load = |id: i64| open.get(&id).copied().unwrap_or(0);
    Ok(mates
        .iter()
        .filter(|p| {
            let routing = staff::Routing {
                team: p.team.clone(),
                availability: p
                    .availability
                    .parse()
                    .unwrap_or(staff::Availability::Available),
                away_until: p.away_until,
                capacity: p.capacity,
            };
            !routing.is_away(now) && p.capacity.is_none_or(|cap| load(p.id) < i64::from(cap))
        })
        .min_by_key(|p| (load(p.id), p.id))
        .map(|p| p.id))
}
