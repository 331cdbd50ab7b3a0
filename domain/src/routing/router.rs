//! What the lead drain asks routing, once per batch: the pool a lead is
//! routed in (the rule that matched, its turn counter's key, its turn
//! order); and what `POST /api/routing-rules/preview` asks: who would get a
//! lead, and why.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use serde::Serialize;
use serde_json::Value;

use crate::entities::{assignment_cursor, lead};
use crate::error::Error;
use crate::routing::choice::{self, Candidate, Skipped, sales_staff};
use crate::routing::rules::{self, RoutingRule, Strategy};

/// The turn counter of the pool of every active sales principal.
pub const SALES_POOL: &str = "sales";

/// Routing's view for a batch of leads: the staff and the rules as they
/// were when the batch began (a change commits on its own and sends the
/// waiting leads back).
#[derive(Debug, Clone, Default)]
pub struct Router {
    staff: Vec<Candidate>,
    rules: Vec<RoutingRule>,
}

/// The principals a lead is routed among, in turn order.
#[derive(Debug, Clone)]
pub struct Pool<'a> {
    /// The rule that matched (its index in the list); `None`: no rule did,
    /// and the pool is every active sales principal.
    pub rule: Option<usize>,
    /// The `assignment_cursor` row whose turns this pool takes: `sales`, or
    /// `team:{team}` (a team's rules share its turns).
    pub key: String,
    /// A weighted pool names a principal as often as its weight.
    pub order: Vec<&'a Candidate>,
}

impl Router {
    pub async fn load<C: ConnectionTrait>(conn: &C) -> Result<Self, Error> {
        Ok(Self {
            staff: sales_staff(conn).await?,
            rules: rules::load(conn).await?.rules,
        })
    }

    /// The pool of a lead from `source` with `payload`: the first matching
    /// rule's team, else every active sales principal.
    pub fn pool_for(&self, source: &str, payload: &Value) -> Pool<'_> {
        let Some((index, rule)) = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(source, payload))
        else {
            return Pool {
                rule: None,
                key: SALES_POOL.to_owned(),
                order: self.staff.iter().collect(),
            };
        };
        let team: Vec<&Candidate> = self
            .staff
            .iter()
            .filter(|c| c.routing.team.as_deref() == Some(rule.team.as_str()))
            .collect();
        let order = match rule.strategy {
            Strategy::RoundRobin => team,
            Strategy::Weighted => weighted(&team, |c| rule.weight_of(c.id)),
        };
        Pool {
            rule: Some(index),
            key: format!("team:{}", rule.team),
            order,
        }
    }
}

impl Router {
    /// The turn counters that `leads` (those routing would assign) take
    /// turns from, sorted: a batch locks them in this one order before it
    /// takes any turn, so batches routed through the same pools wait for
    /// each other rather than deadlock. With a capacity set anywhere, the
    /// whole sales pool's counter too: every principal is in it, so batches
    /// of different pools count the same principals' open leads one after
    /// the other, and a capacity holds.
    pub fn pools_to_lock<'a>(
        &self,
        leads: impl IntoIterator<Item = &'a lead::Model>,
    ) -> Vec<String> {
        let mut keys: Vec<String> = leads
            .into_iter()
            .filter(|l| l.merged_into_id.is_none() && l.owner_id.is_none() && l.status.is_open())
            .map(|l| self.pool_for(&l.source, &l.payload).key)
            .collect();
        if !keys.is_empty() && self.staff.iter().any(|c| c.routing.capacity.is_some()) {
            keys.push(SALES_POOL.to_owned());
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// A cycle naming each candidate as often as its weight, spread out (the
/// smooth weighted round-robin: the heaviest is never named many times in
/// a row while others wait).
fn weighted<'a>(team: &[&'a Candidate], weight: impl Fn(&Candidate) -> u32) -> Vec<&'a Candidate> {
    let weights: Vec<i64> = team.iter().map(|c| i64::from(weight(c))).collect();
    let total: i64 = weights.iter().sum();
    let mut current = vec![0i64; team.len()];
    let mut order = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        for (c, w) in current.iter_mut().zip(&weights) {
            *c += w;
        }
        let Some((best, _)) = current
            .iter()
            .enumerate()
            .filter(|(i, _)| weights[*i] > 0)
            .max_by_key(|(i, c)| (**c, std::cmp::Reverse(*i)))
        else {
            break;
        };
        current[best] -= total;
        order.push(team[best]);
    }
    order
}

/// Who would get a lead, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Preview {
    /// The index of the rule that matched; `null`: none did, so the pool is
    /// every active sales principal.
    pub rule: Option<usize>,
    /// The matched rule's team.
    pub team: Option<String>,
    /// The turn counter the pool takes its turns from.
    pub pool: String,
    /// The pool's principals in turn order, each once.
    pub candidates: Vec<i64>,
    /// Who the next turn gives it to; `null`: nobody can take it now, so it
    /// would wait for an owner.
    pub owner_id: Option<i64>,
    /// Who the next turn passes by on the way, and why.
    pub skipped: Vec<Skipped>,
}

/// Who the next turn of the lead's pool would give it to, taking no turn
/// and writing nothing.
pub async fn preview<C: ConnectionTrait>(
    conn: &C,
    source: &str,
    payload: &Value,
) -> Result<Preview, Error> {
    let router = Router::load(conn).await?;
    let pool = router.pool_for(source, payload);
    let turn: Option<i64> = assignment_cursor::Entity::find()
        .select_only()
        .column(assignment_cursor::Column::Turn)
        .filter(assignment_cursor::Column::Pool.eq(pool.key.as_str()))
        .into_tuple()
        .one(conn)
        .await?;
    let next = turn.unwrap_or(0) + 1;
    let chosen = if pool.order.is_empty() {
        choice::Choice::default()
    } else {
        let start = usize::try_from((next - 1).rem_euclid(pool.order.len() as i64)).unwrap_or(0);
        let open = choice::open_leads(conn, &choice::limited(&pool.order)).await?;
        choice::choose(&pool.order, start, &open, crate::clock::now())
    };
    let mut candidates: Vec<i64> = Vec::new();
    for c in &pool.order {
        if !candidates.contains(&c.id) {
            candidates.push(c.id);
        }
    }
    candidates.sort_unstable();
    Ok(Preview {
        rule: pool.rule,
        team: pool.rule.map(|i| router.rules[i].team.clone()),
        pool: pool.key,
        candidates,
        owner_id: chosen.owner,
        skipped: chosen.skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::staff::{Availability, Routing};

    #[test]
    fn a_weighted_cycle_spreads_each_by_its_weight() {
        let staff: Vec<Candidate> = [1, 2, 3]
            .into_iter()
            .map(|id| Candidate {
                id,
                routing: Routing {
                    team: None,
                    availability: Availability::Available,
                    away_until: None,
                    capacity: None,
                },
            })
            .collect();
        let team: Vec<&Candidate> = staff.iter().collect();
        let weights = |c: &Candidate| match c.id {
            1 => 3,
            2 => 1,
            _ => 0,
        };
        let order: Vec<i64> = weighted(&team, weights).iter().map(|c| c.id).collect();
        assert_eq!(order, [1, 1, 2, 1]);
    }
}
