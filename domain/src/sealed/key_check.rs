//! Whether the configured keys open what is stored, checked before a process
//! takes traffic. Each key id gets a key-check value (a known text sealed
//! under it) the first time it is used; other key material under the same
//! id no longer opens it. Every stored secret is tried too, so a value
//! sealed under a key id that is not configured, or one written before
//! key-check values existed, is found as well.
//!
//! Stored replies that reveal a secret are not part of this check (one
//! unreadable reply should not stop every process); `rotate` opens each.
//!
//! A wrong key was otherwise found only by traffic: every webhook to a
//! sealed source answered `500`, and `secrets rotate` called the values it
//! could not open "already current".

use sea_orm::sea_query::OnConflict;
use sea_orm::{ConnectionTrait, EntityTrait, Set};

use super::{Keyring, Place, SealError, sealed_key_id};
use crate::entities::{sealing_key_check, source, subscription};

const CHECK_TEXT: &str = "leadpipe key check v1";

/// A stored value the configured keys do not open, said without the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyMismatch {
    #[error(
        "the configured key '{key_id}' is not the key that sealed this database's secrets \
         (its key-check value does not open): configure the original key material for \
         '{key_id}', or give the new key another id"
    )]
    WrongKey { key_id: String },
    #[error(
        "{place} is sealed under key '{key_id}', which the configured keys do not open: \
         configure that key (LEADPIPE_SECRET_KEY takes several, the first seals)"
    )]
    DoesNotOpen { key_id: String, place: String },
}

/// Checks every configured key against its key-check value and tries every
/// stored secret; records a key-check value for each configured key that
/// has none yet. `Ok(Err(..))`: the first thing that did not open.
pub async fn verify<C: ConnectionTrait>(
    conn: &C,
    keys: &Keyring,
) -> Result<Result<(), KeyMismatch>, crate::Error> {
    let checks = sealing_key_check::Entity::find().all(conn).await?;
    for check in &checks {
        if !keys.key_ids().contains(&check.key_id.as_str()) {
            continue;
        }
        if !opens_check(keys, &check.key_id, &check.check_value) {
            return Ok(Err(KeyMismatch::WrongKey {
                key_id: check.key_id.clone(),
            }));
        }
    }
    if let Some(mismatch) = first_unopenable(conn, keys).await? {
        return Ok(Err(mismatch));
    }
    for key_id in keys.key_ids() {
        if checks.iter().any(|c| c.key_id == key_id) {
            continue;
        }
        let Ok(value) = keys.seal_under(key_id, CHECK_TEXT, &Place::key_check(key_id)) else {
            continue;
        };
        sealing_key_check::Entity::insert(sealing_key_check::ActiveModel {
            key_id: Set(key_id.to_owned()),
            check_value: Set(value),
            created_at: Set(crate::clock::now()),
        })
        .on_conflict(
            OnConflict::column(sealing_key_check::Column::KeyId)
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(conn)
        .await?;
        // Another process may have recorded its own value first.
        let stored = sealing_key_check::Entity::find_by_id(key_id.to_owned())
            .one(conn)
            .await?;
        if stored.is_some_and(|s| !opens_check(keys, key_id, &s.check_value)) {
            return Ok(Err(KeyMismatch::WrongKey {
                key_id: key_id.to_owned(),
            }));
        }
    }
    Ok(Ok(()))
}

fn opens_check(keys: &Keyring, key_id: &str, value: &str) -> bool {
    sealed_key_id(value) == Some(key_id)
        && keys
            .open(value, &Place::key_check(key_id))
            .is_ok_and(|text| text == CHECK_TEXT)
}

/// The first stored secret that the configured keys cannot open, if any:
/// source secrets and pull auth values, subscription secrets. Stored replies
/// that reveal a secret are left to `rotate`, which opens each: one such
/// reply (72 hours at most) is no reason to refuse every process.
pub async fn first_unopenable<C: ConnectionTrait>(
    conn: &C,
    keys: &Keyring,
) -> Result<Option<KeyMismatch>, crate::Error> {
    let mut values: Vec<(String, Place, String)> = Vec::new();
    for row in source::Entity::find().all(conn).await? {
        let stored: Vec<String> = serde_json::from_value(row.secrets.clone()).unwrap_or_default();
        for secret in stored {
            values.push((
                secret,
                Place::source_secrets(&row.name),
                format!("a secret of source '{}'", row.name),
            ));
        }
        if let Some(pull) = row.pull_auth_secret {
            values.push((
                pull,
                Place::pull_auth_secret(&row.name),
                format!("the pull auth value of source '{}'", row.name),
            ));
        }
        if let Some(token) = row.verify_token {
            values.push((
                token,
                Place::verify_token(&row.name),
                format!("the verify token of source '{}'", row.name),
            ));
        }
    }
    for row in subscription::Entity::find().all(conn).await? {
        let what = format!("the secret of subscription {}", row.id);
        values.push((row.secret, Place::subscription_secret(row.id), what));
        if let Some(previous) = row.previous_secret {
            let what = format!("the previous secret of subscription {}", row.id);
            values.push((previous, Place::subscription_previous_secret(row.id), what));
        }
    }
    for (value, place, what) in values {
        match keys.open(&value, &place) {
            Ok(_) => {}
            Err(SealError::UnknownKey(key_id)) => {
                return Ok(Some(KeyMismatch::DoesNotOpen {
                    key_id,
                    place: what,
                }));
            }
            Err(_) => {
                let key_id = sealed_key_id(&value).unwrap_or("?").to_owned();
                return Ok(Some(KeyMismatch::DoesNotOpen {
                    key_id,
                    place: what,
                }));
            }
        }
    }
    Ok(None)
}
