//! Outbox deliveries: one row per (outbox event, subscription), claimed by
//! publishers with `SKIP LOCKED`, attempted, and settled only by the
//! receiver's answer. Never `delivered` before a 2xx.

use crate::page::{self, IdWindow, Page};
use crate::store::Store;
use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{
    Alias, CommonTableExpression, Expr, ExprTrait, JoinType, LockBehavior, LockType, OnConflict,
    Query, WithClause,
};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, FromQueryResult, IdenStatic, Iterable,
    QueryFilter, QueryOrder, QuerySelect,
};
use serde::{Deserialize, Serialize};

use crate::clock;
use crate::entities::{outbox_delivery, outbox_event, subscription};
use crate::error::Error;
use crate::outbound::outbox;
use crate::outbound::subscription as subscriptions;
use crate::retry::RetryPolicy;

pub const PENDING: &str = "pending";
pub const DELIVERING: &str = "delivering";
pub const FAILED: &str = "failed";
pub const DELIVERED: &str = "delivered";
pub const DEAD: &str = "dead";

/// Other 4xx (and 3xx) answers are retried this many times at most, in case
/// the receiver is mid-deploy, before the delivery is dead.
const PERMANENT_ATTEMPTS: u32 = 3;

/// Copies pending outbox events into one delivery per matching subscription
/// that is not deleted (a disabled one's wait, held, until it is enabled).
/// Safe to run on several workers at once: events are claimed with `SKIP
/// LOCKED` and deliveries are unique per (event, subscription).
pub async fn fan_out(db: &Store, limit: u64) -> Result<usize, Error> {
    let txn = db.begin_write().await?;
    let events = outbox_event::Entity::find()
        .filter(outbox_event::Column::State.eq(outbox::PENDING))
        .order_by_asc(outbox_event::Column::Id)
        .limit(limit)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .all(&txn)
        .await?;
    if events.is_empty() {
        txn.rollback().await?;
        return Ok(0);
    }
    let subs = subscription::Entity::find()
        .filter(subscription::Column::State.ne(subscriptions::DELETED))
        .all(&txn)
        .await?;
    let now = clock::now();
    // One multi-row insert per pass, not one statement per delivery: the
    // fan-out must outpace the deliveries it feeds.
    let rows: Vec<(i64, i64, Option<i64>)> = events
        .iter()
        .flat_map(|event| {
            subs.iter()
                .filter(|s| {
                    subscriptions::wants(s, &event.event_type, event.target_subscription_id)
                })
                .map(move |sub| (event.id, sub.id, event.lead_id))
        })
        .collect();
    for chunk in rows.chunks(1_000) {
        let mut insert = Query::insert();
        insert.into_table(outbox_delivery::Entity).columns([
            outbox_delivery::Column::OutboxEventId,
            outbox_delivery::Column::SubscriptionId,
            outbox_delivery::Column::LeadId,
            outbox_delivery::Column::State,
            outbox_delivery::Column::Attempts,
            outbox_delivery::Column::NextAttemptAt,
            outbox_delivery::Column::CreatedAt,
            outbox_delivery::Column::UpdatedAt,
        ]);
        for &(event_id, subscription_id, lead_id) in chunk {
            insert
                .values([
                    event_id.into(),
                    subscription_id.into(),
                    lead_id.into(),
                    PENDING.into(),
                    0i32.into(),
                    now.into(),
                    now.into(),
                    now.into(),
                ])
                .map_err(|e| DbErr::Custom(e.to_string()))?;
        }
        insert.on_conflict(
            OnConflict::columns([
                outbox_delivery::Column::OutboxEventId,
                outbox_delivery::Column::SubscriptionId,
            ])
            .do_nothing()
            .to_owned(),
        );
        txn.execute(&insert).await?;
    }
    let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    outbox_event::Entity::update_many()
        .col_expr(outbox_event::Column::State, Expr::val(outbox::DISPATCHED))
        .col_expr(outbox_event::Column::PublishedAt, Expr::val(now))
        .filter(outbox_event::Column::Id.is_in(ids))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(events.len())
}

/// A delivery a publisher holds until `lease_until`, with what it needs to send.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub delivery: outbox_delivery::Model,
    pub event: outbox_event::Model,
    pub subscription: subscription::Model,
}

/// Claims up to `limit` due deliveries. A delivery is due when it waits for a
/// (re)try, or its previous holder's lease ran out. It is held back while an
/// earlier event of the same lead is not yet fanned out (another publisher
/// may hold it under `SKIP LOCKED`), or its delivery to the same
/// subscription is unsettled: so each receiver sees a lead's events in
/// outbox order, with any number of publishers. "Earlier" is the outbox
/// event's id, not the delivery's: fan-outs may commit out of order.
pub async fn claim_due(db: &Store, limit: u64, lease: Duration) -> Result<Vec<Claimed>, Error> {
    let now = clock::now();
    let lease_until =
        now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(60));
    let d = Alias::new("d");
    let e = Alias::new("e");
    let earlier_unsettled = Query::select()
        .expr(Expr::val(1))
        .from_as(outbox_delivery::Entity, e.clone())
        .and_where(
            Expr::col((e.clone(), outbox_delivery::Column::SubscriptionId))
                .equals((d.clone(), outbox_delivery::Column::SubscriptionId)),
        )
        .and_where(
            Expr::col((e.clone(), outbox_delivery::Column::LeadId))
                .equals((d.clone(), outbox_delivery::Column::LeadId)),
        )
        .and_where(
            Expr::col((e.clone(), outbox_delivery::Column::OutboxEventId)).lt(Expr::col((
                d.clone(),
                outbox_delivery::Column::OutboxEventId,
            ))),
        )
        .and_where(
            Expr::col((e.clone(), outbox_delivery::Column::State)).is_not_in([DELIVERED, DEAD]),
        )
        .to_owned();
    let o = Alias::new("o");
    let earlier_not_fanned_out = Query::select()
        .expr(Expr::val(1))
        .from_as(outbox_event::Entity, o.clone())
        .and_where(
            Expr::col((o.clone(), outbox_event::Column::LeadId))
                .equals((d.clone(), outbox_delivery::Column::LeadId)),
        )
        .and_where(
            Expr::col((o.clone(), outbox_event::Column::Id)).lt(Expr::col((
                d.clone(),
                outbox_delivery::Column::OutboxEventId,
            ))),
        )
        .and_where(Expr::col((o.clone(), outbox_event::Column::State)).eq(outbox::PENDING))
        .to_owned();
    // A capped subscription's deliveries wait for its next turn.
    let active_subscriptions = Query::select()
        .column(subscription::Column::Id)
        .from(subscription::Entity)
        .and_where(Expr::col(subscription::Column::State).eq(subscriptions::ACTIVE))
        .cond_where(
            sea_orm::Condition::any()
                .add(Expr::col(subscription::Column::RateNextAt).is_null())
                .add(Expr::col(subscription::Column::RateNextAt).lte(now)),
        )
        .to_owned();
    let due = Query::select()
        .column((d.clone(), outbox_delivery::Column::Id))
        .from_as(outbox_delivery::Entity, d.clone())
        .cond_where(
            sea_orm::Condition::any()
                .add(
                    Expr::col((d.clone(), outbox_delivery::Column::State))
                        .is_in([PENDING, FAILED])
                        .and(
                            Expr::col((d.clone(), outbox_delivery::Column::NextAttemptAt)).lte(now),
                        ),
                )
                .add(
                    Expr::col((d.clone(), outbox_delivery::Column::State))
                        .eq(DELIVERING)
                        .and(Expr::col((d.clone(), outbox_delivery::Column::LockedUntil)).lt(now)),
                ),
        )
        // The partial index's predicate, as literals: PostgreSQL cannot
        // prove it from bound parameters, and without the index a claim
        // walks every settled delivery before the first due one.
        .and_where(Expr::cust(format!(
            "\"d\".\"state\" IN ('{PENDING}', '{FAILED}', '{DELIVERING}')"
        )))
        .and_where(
            Expr::col((d.clone(), outbox_delivery::Column::SubscriptionId))
                .in_subquery(active_subscriptions),
        )
        .and_where(Expr::exists(earlier_unsettled).not())
        .and_where(Expr::exists(earlier_not_fanned_out).not())
        .order_by(
            (d.clone(), outbox_delivery::Column::OutboxEventId),
            sea_orm::Order::Asc,
        )
        .order_by(
            (d.clone(), outbox_delivery::Column::Id),
            sea_orm::Order::Asc,
        )
        .limit(limit)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .to_owned();

    let mut claim = Query::update()
        .table(outbox_delivery::Entity)
        .value(outbox_delivery::Column::State, DELIVERING)
        .value(outbox_delivery::Column::LockedUntil, lease_until)
        .value(outbox_delivery::Column::UpdatedAt, now)
        .returning_all()
        .to_owned();
    let dialect = db.dialect();
    dialect.update_of_candidates(&mut claim, outbox_delivery::Column::Id, due);
    let mut claimed = if dialect.changes_rows_in_with() {
        claim_with_context(db, claim).await?
    } else {
        claim_then_look_up(db, claim).await?
    };
    claimed.sort_by_key(|c| (c.delivery.outbox_event_id, c.delivery.id));
    take_turns(db, claimed, now).await
}

/// Keeps, of each capped subscription's claims, one second's worth at its
/// `rate_limit`, if this publisher wins the subscription's turn: moving
/// `rate_next_at` on is a compare-and-set, so of publishers in any number
/// of processes one takes a turn. The rest go back, due again at the next
/// turn. Claims of uncapped subscriptions pass through.
async fn take_turns(
    db: &Store,
    claimed: Vec<Claimed>,
    now: DateTime<Utc>,
) -> Result<Vec<Claimed>, Error> {
    let mut per_capped: HashMap<i64, (i32, usize)> = HashMap::new();
    for claim in &claimed {
        if let Some(limit) = claim.subscription.rate_limit {
            per_capped
                .entry(claim.subscription.id)
                .or_insert((limit, 0))
                .1 += 1;
        }
    }
    if per_capped.is_empty() {
        return Ok(claimed);
    }
    let mut allowed: HashMap<i64, usize> = HashMap::new();
    for (&id, &(limit, wanted)) in &per_capped {
        let limit = usize::try_from(std::cmp::max(limit, 1)).unwrap_or(1);
        let taking = wanted.min(limit);
        // The turn lasts as long as the deliveries it takes need.
        let turn_ms = i64::try_from(taking * 1_000 / limit).unwrap_or(1_000);
        let won = subscription::Entity::update_many()
            .col_expr(
                subscription::Column::RateNextAt,
                Expr::value(now + chrono::Duration::milliseconds(turn_ms)),
            )
            .filter(subscription::Column::Id.eq(id))
            .filter(
                sea_orm::Condition::any()
                    .add(subscription::Column::RateNextAt.is_null())
                    .add(subscription::Column::RateNextAt.lte(now)),
            )
            .exec(db)
            .await?
            .rows_affected
            == 1;
        allowed.insert(id, if won { taking } else { 0 });
    }
    let (mut kept, mut back) = (Vec::new(), Vec::new());
    for claim in claimed {
        match allowed.get_mut(&claim.subscription.id) {
            Some(0) => back.push(claim),
            Some(left) => {
                *left -= 1;
                kept.push(claim);
            }
            None => kept.push(claim),
        }
    }
    release(db, &back).await?;
    Ok(kept)
}

/// PostgreSQL: the claim and what a request needs (the event, the
/// subscription with its sealed secret) in one statement, one round trip
/// and no explicit transaction: the publisher claims many times a second,
/// and on a busy machine each round trip costs milliseconds.
async fn claim_with_context(
    db: &Store,
    claim: sea_orm::sea_query::UpdateStatement,
) -> Result<Vec<Claimed>, DbErr> {
    let c = Alias::new("claimed");
    let e = Alias::new("e");
    let s = Alias::new("s");
    let mut select = Query::select();
    select
        .column((c.clone(), sea_orm::sea_query::Asterisk))
        .from(c.clone())
        .join_as(
            JoinType::InnerJoin,
            outbox_event::Entity,
            e.clone(),
            Expr::col((e.clone(), outbox_event::Column::Id))
                .equals((c.clone(), outbox_delivery::Column::OutboxEventId)),
        )
        .join_as(
            JoinType::InnerJoin,
            subscription::Entity,
            s.clone(),
            Expr::col((s.clone(), subscription::Column::Id))
                .equals((c.clone(), outbox_delivery::Column::SubscriptionId)),
        );
    for col in outbox_event::Column::iter() {
        select.expr_as(
            Expr::col((e.clone(), col)),
            Alias::new(format!("{EVENT}{}", col.as_str())),
        );
    }
    for col in subscription::Column::iter() {
        select.expr_as(
            Expr::col((s.clone(), col)),
            Alias::new(format!("{SUBSCRIPTION}{}", col.as_str())),
        );
    }
    let cte = CommonTableExpression::new()
        .query(claim)
        .table_name(c)
        .to_owned();
    let statement = select.with(WithClause::new().cte(cte).to_owned());
    let rows = db.query_all(&statement).await?;
    rows.iter()
        .map(|row| {
            Ok(Claimed {
                delivery: outbox_delivery::Model::from_query_result(row, "")?,
                event: outbox_event::Model::from_query_result(row, EVENT)?,
                subscription: subscription::Model::from_query_result(row, SUBSCRIPTION)?,
            })
        })
        .collect()
}

/// Column prefixes of the event's and the subscription's columns in a claim.
const EVENT: &str = "e_";
const SUBSCRIPTION: &str = "s_";

/// Without a data-changing statement in `WITH` (SQLite): the claim in this
/// process's write turn, then its events and subscriptions side by side.
async fn claim_then_look_up(
    db: &Store,
    claim: sea_orm::sea_query::UpdateStatement,
) -> Result<Vec<Claimed>, Error> {
    let deliveries = {
        let txn = db.begin_write().await?;
        let rows = txn.query_all(&claim).await?;
        txn.commit().await?;
        rows.iter()
            .map(|row| outbox_delivery::Model::from_query_result(row, ""))
            .collect::<Result<Vec<_>, _>>()?
    };
    if deliveries.is_empty() {
        return Ok(Vec::new());
    }
    let event_ids: Vec<i64> = deliveries.iter().map(|d| d.outbox_event_id).collect();
    let sub_ids: Vec<i64> = deliveries.iter().map(|d| d.subscription_id).collect();
    let (events, subs) = tokio::try_join!(
        outbox_event::Entity::find()
            .filter(outbox_event::Column::Id.is_in(event_ids))
            .all(db),
        subscription::Entity::find()
            .filter(subscription::Column::Id.is_in(sub_ids))
            .all(db),
    )?;
    let events: HashMap<i64, outbox_event::Model> = events.into_iter().map(|e| (e.id, e)).collect();
    let subs: HashMap<i64, subscription::Model> = subs.into_iter().map(|s| (s.id, s)).collect();
    Ok(deliveries
        .into_iter()
        .filter_map(|delivery| {
            Some(Claimed {
                event: events.get(&delivery.outbox_event_id)?.clone(),
                subscription: subs.get(&delivery.subscription_id)?.clone(),
                delivery,
            })
        })
        .collect())
}

/// Hands back claims that were never sent (a publisher stopping with
/// claims queued): each goes back to the state it was claimed from, due
/// again at once rather than after its lease. Fenced like a settlement.
pub async fn release(db: &Store, claims: &[Claimed]) -> Result<(), Error> {
    if claims.is_empty() {
        return Ok(());
    }
    // A delivery never tried was pending; one tried before had failed.
    let mut groups: HashMap<(Option<DateTime<Utc>>, &str), Vec<i64>> = HashMap::new();
    for claim in claims {
        let state = if claim.delivery.attempts == 0 {
            PENDING
        } else {
            FAILED
        };
        groups
            .entry((claim.delivery.locked_until, state))
            .or_default()
            .push(claim.delivery.id);
    }
    let now = clock::now();
    let txn = db.begin_write().await?;
    for ((locked_until, state), ids) in groups {
        let update = outbox_delivery::Entity::update_many()
            .col_expr(outbox_delivery::Column::State, Expr::val(state))
            .col_expr(
                outbox_delivery::Column::LockedUntil,
                Expr::val(Option::<DateTime<Utc>>::None),
            )
            .col_expr(outbox_delivery::Column::UpdatedAt, Expr::val(now))
            .filter(outbox_delivery::Column::Id.is_in(ids));
        fenced(update, locked_until).exec(&txn).await?;
    }
    txn.commit().await
}

/// What one attempt to deliver produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptResult {
    /// The receiver answered with this status (and perhaps `Retry-After`).
    Answered {
        status: u16,
        retry_after: Option<Duration>,
        detail: String,
    },
    /// No answer in time.
    TimedOut,
    /// Could not connect or the exchange broke off.
    Failed(String),
    /// The URL is not one we may call (it resolves to an internal address).
    Refused(String),
}

/// How a delivery settles after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    Delivered,
    RetryIn(Duration),
    Dead,
    /// 410 Gone: the receiver wants no more; its subscription is disabled.
    Gone,
}

/// The rules: 2xx delivered; 410 gone; 429, 5xx, timeouts and broken
/// connections are transient (honouring `Retry-After`) up to the attempt cap;
/// 3xx (redirects are not followed) and other 4xx are permanent after a few
/// attempts; a refused URL is dead at once.
pub fn settle(result: &AttemptResult, attempts: u32, policy: &RetryPolicy) -> Settlement {
    let transient = |retry_after: Option<Duration>| {
        if policy.exhausted(attempts) {
            Settlement::Dead
        } else {
            Settlement::RetryIn(policy.delay(attempts, retry_after))
        }
    };
    match result {
        AttemptResult::Answered { status, .. } if (200..300).contains(status) => {
            Settlement::Delivered
        }
        AttemptResult::Answered { status: 410, .. } => Settlement::Gone,
        AttemptResult::Answered {
            status,
            retry_after,
            ..
        } if *status == 429 || *status >= 500 => transient(*retry_after),
        AttemptResult::Answered { .. } => {
            if attempts >= std::cmp::min(PERMANENT_ATTEMPTS, policy.max_attempts) {
                Settlement::Dead
            } else {
                transient(None)
            }
        }
        AttemptResult::TimedOut | AttemptResult::Failed(_) => transient(None),
        AttemptResult::Refused(_) => Settlement::Dead,
    }
}

fn describe(result: &AttemptResult) -> (Option<i16>, Option<String>) {
    let clip = |s: &str| s.chars().take(500).collect::<String>();
    match result {
        AttemptResult::Answered { status, detail, .. } => {
            let status_i16 = i16::try_from(*status).ok();
            if (200..300).contains(status) {
                (status_i16, None)
            } else {
                (status_i16, Some(clip(&format!("HTTP {status}: {detail}"))))
            }
        }
        AttemptResult::TimedOut => (None, Some("timed out".to_owned())),
        AttemptResult::Failed(e) => (None, Some(clip(e))),
        AttemptResult::Refused(e) => (None, Some(clip(&format!("refused: {e}")))),
    }
}

/// Records an attempt. Fenced on the claim's `locked_until`, so a publisher
/// whose lease ran out cannot overwrite the settlement of the one that took over.
pub async fn record_attempt(
    db: &Store,
    claimed: &Claimed,
    result: &AttemptResult,
    took: Duration,
    policy: &RetryPolicy,
    disable_after: Duration,
) -> Result<Settlement, Error> {
    let mut settled =
        record_attempts(db, &[(claimed, result, took)], policy, disable_after).await?;
    Ok(settled
        .pop()
        .ok_or_else(|| DbErr::Custom("no settlement recorded".into()))?)
}

/// Records many attempts in one transaction, each fenced as in
/// `record_attempt`, with how long each took; settlements in the order
/// given. Deliveries that succeeded under the same lease go in one
/// statement: a publisher settles hundreds a second, and one commit per
/// delivery would bound it. A subscription whose deliveries have failed
/// for `disable_after` with no success is disabled in the same transaction.
pub async fn record_attempts(
    db: &Store,
    attempts: &[(&Claimed, &AttemptResult, Duration)],
    policy: &RetryPolicy,
    disable_after: Duration,
) -> Result<Vec<Settlement>, Error> {
    let now = clock::now();
    let settlements: Vec<Settlement> = attempts
        .iter()
        .map(|(claimed, result, _)| {
            let attempts = claimed.delivery.attempts.saturating_add(1);
            settle(result, u32::try_from(attempts).unwrap_or(0), policy)
        })
        .collect();
    // Delivered, grouped by (lease, status): one UPDATE per group.
    let mut delivered: HashMap<DeliveredGroup, Vec<(i64, i32)>> = HashMap::new();
    let mut outcomes = subscriptions::Outcomes::default();
    let txn = db.begin_write().await?;
    for ((claimed, result, took), settlement) in attempts.iter().zip(&settlements) {
        let (last_status, last_error) = describe(result);
        let took_ms = i32::try_from(took.as_millis()).unwrap_or(i32::MAX);
        if *settlement == Settlement::Delivered {
            delivered
                .entry((claimed.delivery.locked_until, last_status))
                .or_default()
                .push((claimed.delivery.id, took_ms));
            outcomes.succeeded.push(claimed.subscription.id);
            continue;
        }
        let (state, next_attempt_at) = match settlement {
            Settlement::RetryIn(delay) => (
                FAILED,
                now + chrono::Duration::from_std(*delay).unwrap_or_default(),
            ),
            Settlement::Delivered | Settlement::Dead | Settlement::Gone => (DEAD, now),
        };
        let update = settled_update(state, next_attempt_at, None, last_status, last_error, now)
            .col_expr(outbox_delivery::Column::LastDurationMs, Expr::val(took_ms))
            .filter(outbox_delivery::Column::Id.eq(claimed.delivery.id));
        let result = fenced(update, claimed.delivery.locked_until)
            .exec(&txn)
            .await?;
        if result.rows_affected == 1 {
            outcomes.failed.push(claimed.subscription.id);
        }
        if result.rows_affected == 1 && *settlement == Settlement::Gone {
            subscriptions::disable(
                &txn,
                claimed.subscription.id,
                "the receiver answered 410 Gone",
            )
            .await
            .map_err(|e| DbErr::Custom(e.to_string()))?;
        }
    }
    for ((locked_until, last_status), rows) in delivered {
        // Each row its own duration, in the one statement.
        let mut took = sea_orm::sea_query::CaseStatement::new();
        for (id, took_ms) in &rows {
            took = took.case(outbox_delivery::Column::Id.eq(*id), Expr::val(*took_ms));
        }
        let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
        let update = settled_update(DELIVERED, now, Some(now), last_status, None, now)
            .col_expr(outbox_delivery::Column::LastDurationMs, took.into())
            .filter(outbox_delivery::Column::Id.is_in(ids));
        fenced(update, locked_until).exec(&txn).await?;
    }
    let disable_after = chrono::Duration::from_std(disable_after).unwrap_or(chrono::Duration::MAX);
    let disabled = subscriptions::note_outcomes(&txn, outcomes, disable_after, now).await?;
    txn.commit().await?;
    for sub in disabled {
        metrics::counter!("leadpipe_subscriptions_disabled_total", "reason" => "failing")
            .increment(1);
        tracing::warn!(
            subscription_id = sub.id,
            failing_since = ?sub.failing_since,
            "subscription disabled: its deliveries kept failing"
        );
    }
    Ok(settlements)
}

/// The lease a claim was given and the receiver's status.
type DeliveredGroup = (Option<DateTime<Utc>>, Option<i16>);

/// The columns an attempt sets. `attempts` counts up in the statement, so
/// one statement serves deliveries with different counts.
fn settled_update(
    state: &str,
    next_attempt_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
    last_status: Option<i16>,
    last_error: Option<String>,
    now: DateTime<Utc>,
) -> sea_orm::UpdateMany<outbox_delivery::Entity> {
    outbox_delivery::Entity::update_many()
        .col_expr(outbox_delivery::Column::State, Expr::val(state))
        .col_expr(
            outbox_delivery::Column::Attempts,
            Expr::col(outbox_delivery::Column::Attempts).add(1),
        )
        .col_expr(
            outbox_delivery::Column::NextAttemptAt,
            Expr::val(next_attempt_at),
        )
        .col_expr(
            outbox_delivery::Column::LockedUntil,
            Expr::val(Option::<DateTime<Utc>>::None),
        )
        .col_expr(outbox_delivery::Column::LastStatus, Expr::val(last_status))
        .col_expr(outbox_delivery::Column::LastError, Expr::val(last_error))
        .col_expr(
            outbox_delivery::Column::DeliveredAt,
            Expr::val(delivered_at),
        )
        .col_expr(outbox_delivery::Column::UpdatedAt, Expr::val(now))
}

/// Only while the claim still holds the row under the lease it was given.
fn fenced(
    update: sea_orm::UpdateMany<outbox_delivery::Entity>,
    locked_until: Option<DateTime<Utc>>,
) -> sea_orm::UpdateMany<outbox_delivery::Entity> {
    let update = update.filter(outbox_delivery::Column::State.eq(DELIVERING));
    match locked_until {
        Some(locked_until) => update.filter(outbox_delivery::Column::LockedUntil.eq(locked_until)),
        None => update,
    }
}

#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub state: Option<String>,
    pub subscription_id: Option<i64>,
}

/// Newest first.
pub async fn list<C: ConnectionTrait>(
    conn: &C,
    filter: &DeliveryFilter,
    window: IdWindow,
) -> Result<Page<outbox_delivery::Model>, Error> {
    let mut query = outbox_delivery::Entity::find();
    if let Some(state) = &filter.state {
        query = query.filter(outbox_delivery::Column::State.eq(state.as_str()));
    }
    if let Some(id) = filter.subscription_id {
        query = query.filter(outbox_delivery::Column::SubscriptionId.eq(id));
    }
    page::fetch_by_id(conn, query, outbox_delivery::Column::Id, window, |d| d.id).await
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[schema(as = RetryReport)]
pub struct RetryReport {
    pub matched: u64,
    pub retried: u64,
    pub dry_run: bool,
}

/// Puts dead deliveries back in line: same delivery, same `webhook-id`, so a
/// receiver that did get it after all can tell it is a repeat.
pub async fn retry_dead<C: ConnectionTrait>(
    conn: &C,
    ids: Option<&[i64]>,
    filter: &DeliveryFilter,
    dry_run: bool,
) -> Result<RetryReport, Error> {
    let mut scope = outbox_delivery::Entity::find().filter(outbox_delivery::Column::State.eq(DEAD));
    if let Some(ids) = ids {
        scope = scope.filter(outbox_delivery::Column::Id.is_in(ids.to_vec()));
    }
    if let Some(id) = filter.subscription_id {
        scope = scope.filter(outbox_delivery::Column::SubscriptionId.eq(id));
    }
    let matched = sea_orm::PaginatorTrait::count(scope, conn).await?;
    if dry_run {
        return Ok(RetryReport {
            matched,
            retried: 0,
            dry_run,
        });
    }
    let now = clock::now();
    let mut update = outbox_delivery::Entity::update_many()
        .col_expr(outbox_delivery::Column::State, Expr::val(PENDING))
        .col_expr(outbox_delivery::Column::Attempts, Expr::val(0))
        .col_expr(outbox_delivery::Column::NextAttemptAt, Expr::val(now))
        .col_expr(outbox_delivery::Column::UpdatedAt, Expr::val(now))
        .filter(outbox_delivery::Column::State.eq(DEAD));
    if let Some(ids) = ids {
        update = update.filter(outbox_delivery::Column::Id.is_in(ids.to_vec()));
    }
    if let Some(id) = filter.subscription_id {
        update = update.filter(outbox_delivery::Column::SubscriptionId.eq(id));
    }
    let retried = update.exec(conn).await?.rows_affected;
    Ok(RetryReport {
        matched,
        retried,
        dry_run,
    })
}

/// What a recovery sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = RecoveryReport)]
pub struct Recovery {
    /// Dead deliveries put back in line.
    pub dead: u64,
    /// Failed deliveries waiting for a retry, now due at once.
    pub failed: u64,
}

/// Sends subscription `id` again every delivery created since `since` that
/// failed or died (as Svix's recover): same deliveries, same `webhook-id`s,
/// claimed in per-lead order as any. A disabled subscription's wait until
/// it is enabled.
pub async fn recover<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    since: DateTime<Utc>,
) -> Result<Recovery, Error> {
    subscriptions::find(conn, id).await?;
    let now = clock::now();
    let scope = |update: sea_orm::UpdateMany<outbox_delivery::Entity>, state: &str| {
        update
            .col_expr(outbox_delivery::Column::NextAttemptAt, Expr::val(now))
            .col_expr(outbox_delivery::Column::UpdatedAt, Expr::val(now))
            .filter(outbox_delivery::Column::SubscriptionId.eq(id))
            .filter(outbox_delivery::Column::CreatedAt.gte(since))
            .filter(outbox_delivery::Column::State.eq(state))
    };
    let dead = scope(
        outbox_delivery::Entity::update_many()
            .col_expr(outbox_delivery::Column::State, Expr::val(PENDING))
            .col_expr(outbox_delivery::Column::Attempts, Expr::val(0)),
        DEAD,
    )
    .exec(conn)
    .await?
    .rows_affected;
    let failed = scope(outbox_delivery::Entity::update_many(), FAILED)
        .exec(conn)
        .await?
        .rows_affected;
    Ok(Recovery { dead, failed })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16) -> AttemptResult {
        AttemptResult::Answered {
            status,
            retry_after: None,
            detail: String::new(),
        }
    }

    #[test]
    fn settlements_follow_the_rules() {
        let p = RetryPolicy {
            max_attempts: 5,
            ..Default::default()
        };
        assert_eq!(settle(&answered(200), 1, &p), Settlement::Delivered);
        assert_eq!(settle(&answered(204), 1, &p), Settlement::Delivered);
        assert_eq!(settle(&answered(410), 1, &p), Settlement::Gone);
        for transient in [
            answered(429),
            answered(500),
            answered(503),
            AttemptResult::TimedOut,
            AttemptResult::Failed("reset".into()),
        ] {
            assert!(
                matches!(settle(&transient, 1, &p), Settlement::RetryIn(_)),
                "{transient:?}"
            );
            assert_eq!(settle(&transient, 5, &p), Settlement::Dead, "{transient:?}");
        }
        for permanent in [answered(301), answered(400), answered(404)] {
            assert!(matches!(settle(&permanent, 1, &p), Settlement::RetryIn(_)));
            assert_eq!(settle(&permanent, 3, &p), Settlement::Dead);
        }
        assert_eq!(
            settle(&AttemptResult::Refused("internal".into()), 1, &p),
            Settlement::Dead
        );
    }

    #[test]
    fn retry_after_is_honoured() {
        let p = RetryPolicy::default();
        let slow = AttemptResult::Answered {
            status: 429,
            retry_after: Some(Duration::from_secs(120)),
            detail: String::new(),
        };
        let Settlement::RetryIn(delay) = settle(&slow, 1, &p) else {
            panic!("expected a retry")
        };
        assert!(delay >= Duration::from_secs(120));
    }
}
