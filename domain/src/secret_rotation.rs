//! `leadpipe secrets rotate`: re-seals every stored secret that is plaintext
//! or sealed under another key than the current one. Kept out of `sealed`,
//! which needs no database: `error` carries a `SealError` and this walk
//! returns an `Error`, so in one module the two would name each other.

use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use crate::entities::{idempotency_key, source, subscription};
use crate::error::Error;
use crate::sealed::{Keyring, PREFIX, Place, SealError};

/// What [`rotate`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RotateReport {
    pub source_secrets: u64,
    pub pull_auth_values: u64,
    pub subscription_secrets: u64,
    pub stored_replies: u64,
    /// Values already sealed under the current key, left alone.
    pub already_current: u64,
    /// Rows changed by someone else between read and write; a re-run takes them.
    pub raced: u64,
}

/// Re-seals every stored secret that is plaintext or under another key than
/// the current one. Each row is rewritten by one guarded statement (it only
/// applies if the row still holds what was read), so a rotation is safe
/// beside a running server and safe to re-run.
pub async fn rotate<C: ConnectionTrait>(conn: &C, keys: &Keyring) -> Result<RotateReport, Error> {
    if !keys.can_seal() {
        return Err(SealError::NoKey.into());
    }
    // A key that is not the one that sealed is refused before anything is
    // rewritten, naming its id.
    if let Err(mismatch) = crate::sealed::key_check::verify(conn, keys).await? {
        return Err(Error::KeyMismatch(mismatch));
    }
    let mut report = RotateReport::default();
    let reseal = |stored: &str, place: &Place, count: &mut u64, current: &mut u64| {
        // Opened either way: a value is "current" only if it opens.
        let open = keys.open(stored, place)?;
        if keys.needs_reseal(stored) {
            *count += 1;
            keys.seal(&open, place).map(Some)
        } else {
            *current += 1;
            Ok::<_, SealError>(None)
        }
    };

    for row in source::Entity::find().all(conn).await? {
        let stored: Vec<String> = serde_json::from_value(row.secrets.clone())
            .map_err(|_| DbErr::Custom(format!("source {}: secrets are not a list", row.name)))?;
        let place = Place::source_secrets(&row.name);
        let (mut secrets, mut changed) = (Vec::with_capacity(stored.len()), 0);
        for secret in &stored {
            match reseal(secret, &place, &mut changed, &mut report.already_current)? {
                Some(new) => secrets.push(new),
                None => secrets.push(secret.clone()),
            }
        }
        let mut pull_changed = 0;
        let pull = match &row.pull_auth_secret {
            Some(value) => reseal(
                value,
                &Place::pull_auth_secret(&row.name),
                &mut pull_changed,
                &mut report.already_current,
            )?,
            None => None,
        };
        let verify = match &row.verify_token {
            Some(value) => reseal(
                value,
                &Place::verify_token(&row.name),
                &mut changed,
                &mut report.already_current,
            )?,
            None => None,
        };
        if changed == 0 && pull.is_none() {
            continue;
        }
        let mut update = source::Entity::update_many()
            .col_expr(
                source::Column::Secrets,
                Expr::value(serde_json::json!(secrets)),
            )
            .filter(source::Column::Name.eq(&row.name))
            // An upsert always moves updated_at: a save in between wins.
            .filter(source::Column::UpdatedAt.eq(row.updated_at));
        if let Some(pull) = pull {
            update = update
                .col_expr(source::Column::PullAuthSecret, Expr::value(pull))
                .filter(source::Column::PullAuthSecret.eq(row.pull_auth_secret.clone()));
        }
        if let Some(verify) = verify {
            update = update
                .col_expr(source::Column::VerifyToken, Expr::value(verify))
                .filter(source::Column::VerifyToken.eq(row.verify_token.clone()));
        }
        if update.exec(conn).await?.rows_affected == 1 {
            report.source_secrets += changed;
            report.pull_auth_values += pull_changed;
        } else {
            report.raced += 1;
        }
    }

    for row in subscription::Entity::find().all(conn).await? {
        let place = Place::subscription_secret(row.id);
        let mut changed = 0;
        let Some(new) = reseal(
            &row.secret,
            &place,
            &mut changed,
            &mut report.already_current,
        )?
        else {
            continue;
        };
        let result = subscription::Entity::update_many()
            .col_expr(subscription::Column::Secret, Expr::value(new))
            .filter(subscription::Column::Id.eq(row.id))
            .filter(subscription::Column::Secret.eq(&row.secret))
            .exec(conn)
            .await?;
        if result.rows_affected == 1 {
            report.subscription_secrets += changed;
        } else {
            report.raced += 1;
        }
    }

    // Replaced secrets still in their overlap window sign too.
    for row in subscription::Entity::find()
        .filter(subscription::Column::PreviousSecret.is_not_null())
        .all(conn)
        .await?
    {
        let Some(previous) = row.previous_secret else {
            continue;
        };
        let place = Place::subscription_previous_secret(row.id);
        let mut changed = 0;
        let Some(new) = reseal(&previous, &place, &mut changed, &mut report.already_current)?
        else {
            continue;
        };
        let result = subscription::Entity::update_many()
            .col_expr(subscription::Column::PreviousSecret, Expr::value(new))
            .filter(subscription::Column::Id.eq(row.id))
            .filter(subscription::Column::PreviousSecret.eq(&previous))
            .exec(conn)
            .await?;
        if result.rows_affected == 1 {
            report.subscription_secrets += changed;
        } else {
            report.raced += 1;
        }
    }

    // Replies that reveal a secret: those stored sealed, and subscription
    // creations stored in plaintext before sealing existed. Others stay.
    let revealing = Condition::any()
        .add(idempotency_key::Column::ResponseBody.starts_with(PREFIX))
        .add(
            Condition::all()
                .add(idempotency_key::Column::Method.eq("POST"))
                .add(idempotency_key::Column::Path.starts_with("/api/subscriptions"))
                .add(idempotency_key::Column::ResponseStatus.eq(201i16)),
        );
    let replies = idempotency_key::Entity::find()
        .filter(revealing)
        .all(conn)
        .await?;
    for row in replies {
        let Some(body) = &row.response_body else {
            continue;
        };
        let place = Place::idempotent_response(row.principal_id, &row.key);
        let mut changed = 0;
        let Some(new) = reseal(body, &place, &mut changed, &mut report.already_current)? else {
            continue;
        };
        let result = idempotency_key::Entity::update_many()
            .col_expr(idempotency_key::Column::ResponseBody, Expr::value(new))
            .filter(idempotency_key::Column::PrincipalId.eq(row.principal_id))
            .filter(idempotency_key::Column::Key.eq(&row.key))
            .filter(idempotency_key::Column::ResponseBody.eq(body))
            .exec(conn)
            .await?;
        if result.rows_affected == 1 {
            report.stored_replies += changed;
        } else {
            report.raced += 1;
        }
    }
    Ok(report)
}
