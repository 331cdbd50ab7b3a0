//! Downstream systems that receive our events as signed webhooks.

use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde::{Deserialize, Serialize};

use crate::clock;
use crate::crypto::generate_standard_secret;
use crate::entities::subscription::{self, Column, Entity};
use crate::error::Error;
use crate::net_guard::OutboundPolicy;
use crate::outbound::outbox;
use crate::precondition::IfMatch;
use crate::sealed::{Keyring, Place, SealError};

pub const ACTIVE: &str = "active";
pub const DISABLED: &str = "disabled";
pub const DELETED: &str = "deleted";

/// A subscription as the API shows it: never its secret.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Subscription)]
pub struct SubscriptionView {
    pub id: i64,
    pub url: String,
    pub description: Option<String>,
    pub event_types: Vec<String>,
    pub state: String,
    pub disabled_reason: Option<String>,
    /// Goes up with every change; the `ETag` of PATCH is `"{version}"`.
    pub version: i64,
    /// Since when its deliveries have failed with no success in between;
    /// `null` while they succeed.
    pub failing_since: Option<chrono::DateTime<chrono::Utc>>,
    /// Deliveries a second at most, across every worker process; `null`:
    /// as fast as `LEADPIPE_DELIVERY_PER_SUBSCRIPTION` allows.
    pub rate_limit: Option<i32>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl From<subscription::Model> for SubscriptionView {
    fn from(m: subscription::Model) -> Self {
        Self {
            id: m.id,
            event_types: event_types(&m),
            url: m.url,
            description: m.description,
            state: m.state,
            disabled_reason: m.disabled_reason,
            version: m.version,
            failing_since: m.failing_since,
            rate_limit: m.rate_limit,
            created_at: m.created_at,
        }
    }
}

pub fn event_types(m: &subscription::Model) -> Vec<String> {
    serde_json::from_value(m.event_types.clone()).unwrap_or_default()
}

/// Whether the subscription receives this event: a test event goes to the
/// subscription it names only; others by type (none listed: all).
pub fn wants(m: &subscription::Model, event_type: &str, target: Option<i64>) -> bool {
    if let Some(target) = target {
        return target == m.id;
    }
    let types = event_types(m);
    let named = types.iter().any(|t| t == event_type);
    named || (types.is_empty() && !outbox::OPERATIONAL_EVENT_TYPES.contains(&event_type))
}

pub struct NewSubscription {
    pub url: String,
    pub event_types: Vec<String>,
    pub description: Option<String>,
    pub rate_limit: Option<i32>,
}

/// The most a subscription's `rate_limit` may be, deliveries a second.
pub const MAX_RATE_LIMIT: i32 = 10_000;

fn checked_rate_limit(limit: Option<i32>) -> Result<Option<i32>, Error> {
    match limit {
        Some(n) if !(1..=MAX_RATE_LIMIT).contains(&n) => Err(Error::invalid(
            "rate_limit",
            "must be 1 to 10000 deliveries a second (null: no cap)",
        )),
        other => Ok(other),
    }
}

/// The subscription's signing secret, opened (a legacy plaintext one as it is).
pub fn signing_secret(keys: &Keyring, m: &subscription::Model) -> Result<String, SealError> {
    keys.open(&m.secret, &Place::subscription_secret(m.id))
}

/// Every secret a delivery at `now` is signed with: the current one, and the
/// replaced one while its overlap window lasts.
pub fn signing_secrets(
    keys: &Keyring,
    m: &subscription::Model,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<String>, SealError> {
    let mut secrets = vec![signing_secret(keys, m)?];
    if let (Some(previous), Some(until)) = (&m.previous_secret, m.previous_secret_until)
        && now < until
    {
        secrets.push(keys.open(previous, &Place::subscription_previous_secret(m.id))?);
    }
    Ok(secrets)
}

/// How long a replaced secret still signs, unless the rotation says otherwise.
pub const DEFAULT_OVERLAP: chrono::Duration = chrono::Duration::hours(24);
/// The longest overlap a rotation may ask for.
pub const MAX_OVERLAP: chrono::Duration = chrono::Duration::days(7);

/// A rotated secret, shown this once, and until when the old one still signs.
pub struct RotatedSecret {
    pub secret: String,
    pub previous_valid_until: chrono::DateTime<chrono::Utc>,
}

/// Replaces the signing secret; the old one keeps signing (alongside the new
/// one) for `overlap`. Rotating again within the window drops the oldest.
pub async fn rotate_secret<C: ConnectionTrait>(
    conn: &C,
    keys: &Keyring,
    id: i64,
    overlap: Option<chrono::Duration>,
) -> Result<RotatedSecret, Error> {
    if !keys.can_seal() {
        return Err(SealError::NoKey.into());
    }
    let overlap = overlap.unwrap_or(DEFAULT_OVERLAP);
    if overlap < chrono::Duration::zero() || overlap > MAX_OVERLAP {
        return Err(Error::invalid(
            "overlap_seconds",
            "must be between 0 and 604800 (7 days)",
        ));
    }
    let current = find(conn, id).await?;
    let old = signing_secret(keys, &current)?;
    let secret = generate_standard_secret();
    let now = clock::now();
    let until = now + overlap;
    let result = Entity::update_many()
        .col_expr(
            Column::Secret,
            Expr::value(keys.seal(&secret, &Place::subscription_secret(id))?),
        )
        .col_expr(
            Column::PreviousSecret,
            Expr::value(keys.seal(&old, &Place::subscription_previous_secret(id))?),
        )
        .col_expr(Column::PreviousSecretUntil, Expr::value(until))
        .col_expr(Column::UpdatedAt, Expr::value(now))
        .filter(Column::Id.eq(id))
        // Fenced on the secret read: of two concurrent rotations one wins,
        // and the other's "old secret" is not silently lost.
        .filter(Column::Secret.eq(current.secret))
        .exec(conn)
        .await?;
    if result.rows_affected == 0 {
        return Err(Error::Conflict(
            "the secret was rotated concurrently; try again".into(),
        ));
    }
    Ok(RotatedSecret {
        secret,
        previous_valid_until: until,
    })
}

/// A change to a subscription: `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct SubscriptionPatch {
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub description: Option<Option<String>>,
    /// `true`: active again (clears the reason); `false`: disabled by hand.
    pub enabled: Option<bool>,
    /// `Some(None)` lifts the cap.
    pub rate_limit: Option<Option<i32>>,
}

/// Applies a patch, checking the URL as creation does; only at a version
/// `if_match` names.
pub async fn update<C: ConnectionTrait>(
    conn: &C,
    policy: &OutboundPolicy,
    id: i64,
    patch: SubscriptionPatch,
    if_match: &IfMatch,
) -> Result<SubscriptionView, Error> {
    // Without If-Match a concurrent change just means: read again, apply again.
    for _ in 0..3 {
        let current = find(conn, id).await?;
        if_match.check(current.version)?;
        if apply(conn, policy, &current, patch.clone()).await? {
            return Ok(find(conn, id).await?.into());
        }
    }
    let current = find(conn, id).await?;
    Err(Error::PreconditionFailed {
        current: current.version,
    })
}

/// One compare-and-set of the patch on `current`'s version.
async fn apply<C: ConnectionTrait>(
    conn: &C,
    policy: &OutboundPolicy,
    current: &subscription::Model,
    patch: SubscriptionPatch,
) -> Result<bool, Error> {
    let mut update = Entity::update_many()
        .col_expr(Column::UpdatedAt, Expr::value(clock::now()))
        .col_expr(Column::Version, Expr::value(current.version + 1))
        .filter(Column::Id.eq(current.id))
        .filter(Column::Version.eq(current.version))
        .filter(Column::State.ne(DELETED));
    if let Some(url) = patch.url {
        let url = checked_url(policy, &url)?;
        update = update.col_expr(Column::Url, Expr::value(url));
    }
    if let Some(types) = patch.event_types {
        update = update.col_expr(
            Column::EventTypes,
            Expr::value(serde_json::json!(known_event_types(types)?)),
        );
    }
    if let Some(limit) = patch.rate_limit {
        update = update.col_expr(Column::RateLimit, Expr::value(checked_rate_limit(limit)?));
    }
    if let Some(description) = patch.description {
        update = update.col_expr(
            Column::Description,
            Expr::value(checked_description(description)?),
        );
    }
    match patch.enabled {
        Some(true) if current.state != ACTIVE => {
            // A fresh start: the failures before it no longer count.
            update = update
                .col_expr(Column::State, Expr::value(ACTIVE))
                .col_expr(Column::DisabledReason, Expr::value(Option::<String>::None))
                .col_expr(
                    Column::FailingSince,
                    Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
                );
        }
        Some(false) if current.state != DISABLED => {
            update = update
                .col_expr(Column::State, Expr::value(DISABLED))
                .col_expr(Column::DisabledReason, Expr::value("disabled by an admin"));
        }
        _ => {}
    }
    Ok(update.exec(conn).await?.rows_affected == 1)
}

/// The subscription, unless deleted.
pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<subscription::Model, Error> {
    Entity::find_by_id(id)
        .filter(Column::State.ne(DELETED))
        .one(conn)
        .await?
        .ok_or(Error::NotFound)
}

/// Queues a signed `ping` for this subscription alone; the publisher sends
/// it like any event (same address guard, same delivery record).
pub async fn send_test<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    correlation_id: Option<String>,
) -> Result<String, Error> {
    let sub = find(conn, id).await?;
    if sub.state != ACTIVE {
        return Err(Error::Conflict(
            "the subscription is disabled; enable it first".into(),
        ));
    }
    Ok(outbox::enqueue_ping(conn, id, correlation_id)
        .await?
        .event_id)
}

fn checked_url(policy: &OutboundPolicy, url: &str) -> Result<String, Error> {
    policy
        .check_url(url.trim())
        .map(|u| u.to_string())
        .map_err(|m| Error::invalid("url", &m))
}

fn known_event_types(mut types: Vec<String>) -> Result<Vec<String>, Error> {
    types.sort();
    types.dedup();
    if let Some(unknown) = types
        .iter()
        .find(|t| !outbox::EVENT_TYPES.contains(&t.as_str()))
    {
        return Err(Error::invalid(
            "event_types",
            &format!(
                "unknown event type '{unknown}'; known: {}",
                outbox::EVENT_TYPES.join(", ")
            ),
        ));
    }
    Ok(types)
}

fn checked_description(description: Option<String>) -> Result<Option<String>, Error> {
    let description = description
        .map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty());
    if description
        .as_ref()
        .is_some_and(|d| d.chars().count() > 255)
    {
        return Err(Error::invalid(
            "description",
            "must be at most 255 characters",
        ));
    }
    Ok(description)
}

/// The new subscription and its signing secret, shown this once.
pub struct CreatedSubscription {
    pub subscription: SubscriptionView,
    pub secret: String,
}

/// Creates the subscription; its secret is stored sealed under `keys`. Call
/// inside a transaction: the row is inserted, then its sealed secret (bound
/// to the new id) is written.
pub async fn create<C: ConnectionTrait>(
    conn: &C,
    policy: &OutboundPolicy,
    keys: &Keyring,
    new: NewSubscription,
) -> Result<CreatedSubscription, Error> {
    if !keys.can_seal() {
        return Err(SealError::NoKey.into());
    }
    let url = checked_url(policy, &new.url)?;
    let types = known_event_types(new.event_types)?;
    let description = checked_description(new.description)?;
    let rate_limit = checked_rate_limit(new.rate_limit)?;
    let secret = generate_standard_secret();
    let now = clock::now();
    let model = subscription::ActiveModel {
        url: Set(url),
        description: Set(description),
        event_types: Set(serde_json::json!(types)),
        // Sealing binds the row id, known only after the insert.
        secret: Set(String::new()),
        state: Set(ACTIVE.to_owned()),
        disabled_reason: Set(None),
        previous_secret: Set(None),
        previous_secret_until: Set(None),
        version: Set(1),
        failing_since: Set(None),
        rate_limit: Set(rate_limit),
        rate_next_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    }
    .insert(conn)
    .await?;
    let sealed = keys.seal(&secret, &Place::subscription_secret(model.id))?;
    subscription::Entity::update_many()
        .col_expr(subscription::Column::Secret, Expr::value(sealed))
        .filter(subscription::Column::Id.eq(model.id))
        .exec(conn)
        .await?;
    Ok(CreatedSubscription {
        subscription: model.into(),
        secret,
    })
}

pub async fn list<C: ConnectionTrait>(conn: &C) -> Result<Vec<SubscriptionView>, Error> {
    let rows = Entity::find()
        .filter(Column::State.ne(DELETED))
        .order_by_asc(Column::Id)
        .all(conn)
        .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Stops deliveries to the subscription; its delivery history stays.
pub async fn delete<C: ConnectionTrait>(conn: &C, id: i64) -> Result<(), Error> {
    let result = Entity::update_many()
        .col_expr(Column::State, sea_orm::sea_query::Expr::val(DELETED))
        .col_expr(
            Column::UpdatedAt,
            sea_orm::sea_query::Expr::val(clock::now()),
        )
        .col_expr(Column::Version, Expr::col(Column::Version).add(1))
        .filter(Column::Id.eq(id))
        .filter(Column::State.ne(DELETED))
        .exec(conn)
        .await?;
    if result.rows_affected == 0 {
        Err(Error::NotFound)
    } else {
        Ok(())
    }
}

/// A receiver answered 410 Gone: it asked us to stop.
pub async fn disable<C: ConnectionTrait>(conn: &C, id: i64, reason: &str) -> Result<(), Error> {
    Entity::update_many()
        .col_expr(Column::State, sea_orm::sea_query::Expr::val(DISABLED))
        .col_expr(
            Column::DisabledReason,
            sea_orm::sea_query::Expr::val(reason),
        )
        .col_expr(
            Column::UpdatedAt,
            sea_orm::sea_query::Expr::val(clock::now()),
        )
        .col_expr(Column::Version, Expr::col(Column::Version).add(1))
        .filter(Column::Id.eq(id))
        .filter(Column::State.eq(ACTIVE))
        .exec(conn)
        .await?;
    Ok(())
}

/// What one settled batch of deliveries said about their subscriptions.
#[derive(Debug, Default)]
pub struct Outcomes {
    /// Subscriptions with a delivery that succeeded.
    pub succeeded: Vec<i64>,
    /// Subscriptions with a delivery that failed (to retry, or dead).
    pub failed: Vec<i64>,
}

/// Keeps each subscription's failure streak (a success ends it, a failure
/// starts it) and disables the active ones failing for `disable_after` or
/// longer, each with a `subscription.disabled` event for the subscriptions
/// that ask for it. Returns those disabled now. Call in the transaction that
/// settles the deliveries.
pub async fn note_outcomes<C: ConnectionTrait>(
    conn: &C,
    mut outcomes: Outcomes,
    disable_after: chrono::Duration,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<subscription::Model>, Error> {
    outcomes.succeeded.sort_unstable();
    outcomes.succeeded.dedup();
    outcomes.failed.sort_unstable();
    outcomes.failed.dedup();
    // A subscription that had a success in the batch is not failing.
    outcomes
        .failed
        .retain(|id| outcomes.succeeded.binary_search(id).is_err());
    // Each update touches only rows whose streak changes: a healthy
    // subscription's row is not rewritten with every delivery.
    if !outcomes.succeeded.is_empty() {
        Entity::update_many()
            .col_expr(
                Column::FailingSince,
                Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
            )
            .filter(Column::Id.is_in(outcomes.succeeded))
            .filter(Column::FailingSince.is_not_null())
            .exec(conn)
            .await?;
    }
    if outcomes.failed.is_empty() {
        return Ok(Vec::new());
    }
    Entity::update_many()
        .col_expr(Column::FailingSince, Expr::value(now))
        .filter(Column::Id.is_in(outcomes.failed.clone()))
        .filter(Column::FailingSince.is_null())
        .exec(conn)
        .await?;
    let overdue = Entity::find()
        .filter(Column::Id.is_in(outcomes.failed))
        .filter(Column::State.eq(ACTIVE))
        .filter(Column::FailingSince.lte(now - disable_after))
        .order_by_asc(Column::Id)
        .all(conn)
        .await?;
    let mut disabled = Vec::new();
    for sub in overdue {
        let since = sub.failing_since.unwrap_or(now);
        let reason = format!(
            "no delivery succeeded since {} (LEADPIPE_SUBSCRIPTION_DISABLE_AFTER)",
            since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        let changed = Entity::update_many()
            .col_expr(Column::State, Expr::value(DISABLED))
            .col_expr(Column::DisabledReason, Expr::value(reason.clone()))
            .col_expr(Column::UpdatedAt, Expr::value(now))
            .col_expr(Column::Version, Expr::col(Column::Version).add(1))
            .filter(Column::Id.eq(sub.id))
            .filter(Column::State.eq(ACTIVE))
            .exec(conn)
            .await?;
        if changed.rows_affected == 0 {
            continue;
        }
        let event = crate::outbound::events::SubscriptionDisabled {
            subscription_id: sub.id,
            reason,
            failing_since: since,
        };
        outbox::enqueue_event(conn, None, &event, None).await?;
        disabled.push(sub);
    }
    Ok(disabled)
}

/// Turns a subscription back on (`POST /api/subscriptions/{id}/enable`): its
/// held deliveries go out again, and its failure streak starts afresh.
pub async fn enable<C: ConnectionTrait>(
    conn: &C,
    policy: &OutboundPolicy,
    id: i64,
    if_match: &IfMatch,
) -> Result<SubscriptionView, Error> {
    let current = find(conn, id).await?;
    if_match.check(current.version)?;
    // Already on: nothing changes, not even its version.
    if current.state == ACTIVE {
        return Ok(current.into());
    }
    let patch = SubscriptionPatch {
        enabled: Some(true),
        ..SubscriptionPatch::default()
    };
    update(conn, policy, id, patch, if_match).await
}
