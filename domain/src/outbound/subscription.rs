//! Downstream systems that receive our events as signed webhooks.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde::Serialize;

use crate::clock;
use crate::entities::subscription::{self, Column, Entity};
use crate::error::Error;
use crate::inbound::signature::generate_standard_secret;
use crate::outbound::net_guard::OutboundPolicy;
use crate::outbound::outbox;
use crate::sealed::{Keyring, Place, SealError};

pub const ACTIVE: &str = "active";
pub const DISABLED: &str = "disabled";
pub const DELETED: &str = "deleted";

/// A subscription as the API shows it: never its secret.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = Subscription)]
pub struct SubscriptionView {
    pub id: i64,
    pub url: String,
    pub description: Option<String>,
    pub event_types: Vec<String>,
    pub state: String,
    pub disabled_reason: Option<String>,
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
            created_at: m.created_at,
        }
    }
}

pub fn event_types(m: &subscription::Model) -> Vec<String> {
    serde_json::from_value(m.event_types.clone()).unwrap_or_default()
}

/// Whether the subscription wants events of this type (none listed: all).
pub fn wants(m: &subscription::Model, event_type: &str) -> bool {
    let types = event_types(m);
    types.is_empty() || types.iter().any(|t| t == event_type)
}

pub struct NewSubscription {
    pub url: String,
    pub event_types: Vec<String>,
    pub description: Option<String>,
}

/// The subscription's signing secret, opened (a legacy plaintext one as it is).
pub fn signing_secret(keys: &Keyring, m: &subscription::Model) -> Result<String, SealError> {
    keys.open(&m.secret, &Place::subscription_secret(m.id))
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
    let url = policy
        .check_url(new.url.trim())
        .map_err(|m| Error::invalid("url", &m))?;
    let mut types = new.event_types;
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
    let description = new
        .description
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
    let secret = generate_standard_secret();
    let now = clock::now();
    let model = subscription::ActiveModel {
        url: Set(url.to_string()),
        description: Set(description),
        event_types: Set(serde_json::json!(types)),
        // Sealing binds the row id, known only after the insert.
        secret: Set(String::new()),
        state: Set(ACTIVE.to_owned()),
        disabled_reason: Set(None),
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
        .filter(Column::Id.eq(id))
        .filter(Column::State.eq(ACTIVE))
        .exec(conn)
        .await?;
    Ok(())
}
