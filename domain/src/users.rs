//! People who sign in. A user is a principal (so it owns leads, is routed
//! to, is named on timelines) with an email, unique whatever its case, and
//! an argon2id password hash. Disabling a user refuses its token and ends
//! its sessions; the principal stays, so what it did keeps its name.

use std::sync::LazyLock;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use chrono::{DateTime, Utc};
use rand::RngCore;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
    SqlErr,
};
use serde::Serialize;
use validator::ValidateEmail;

use crate::auth::{
    IssuedToken, PERSONAL_TOKEN_DAYS, Principal, Role, TokenRecord, issue_token, principal_of,
    unusable_token_hash,
};
use crate::entities::{api_token, principal};
use crate::error::Error;

pub const MIN_PASSWORD_CHARS: usize = 12;
pub const MAX_PASSWORD_CHARS: usize = 256;

/// A password as given: long enough, not too long. Never printed.
#[derive(Clone)]
pub struct Password(String);

impl Password {
    pub fn new(text: String) -> Result<Self, Error> {
        let chars = text.chars().count();
        if !(MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&chars) {
            return Err(Error::invalid("password", "must be 12 to 256 characters"));
        }
        Ok(Self(text))
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password([redacted])")
    }
}

/// A password's argon2id hash (a PHC string, salt and parameters inside).
#[derive(Clone)]
pub struct PasswordDigest(String);

impl std::fmt::Debug for PasswordDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordDigest([redacted])")
    }
}

/// Hashes `password` with argon2id (the crate's defaults: 19 MiB, two
/// passes) on a blocking thread: it takes tens of milliseconds of CPU.
pub async fn hash_password(password: Password) -> Result<PasswordDigest, Error> {
    on_hashing_thread(move || hash_now(&password.0)).await?
}

/// Argon2 computations at once, at most: one a core. Each takes 19 MiB and
/// a core for tens of milliseconds, so sign-ins from many addresses at once
/// queue here, in order, rather than fill the blocking pool (hundreds of
/// threads) and take every core and that memory from the rest of the
/// server.
static HASHING: LazyLock<tokio::sync::Semaphore> = LazyLock::new(|| {
    tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
});

/// Runs `work` on a blocking thread once a [`HASHING`] permit is free.
async fn on_hashing_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    let permit = HASHING
        .acquire()
        .await
        .map_err(|e| Error::Db(sea_orm::DbErr::Custom(format!("hashing stopped: {e}"))))?;
    let done = tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Db(sea_orm::DbErr::Custom(format!("hashing stopped: {e}"))));
    drop(permit);
    done
}

fn hash_now(password: &str) -> Result<PasswordDigest, Error> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(hash_error)?;
    let hash = Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(hash_error)?;
    Ok(PasswordDigest(hash.to_string()))
}

fn hash_error(e: argon2::password_hash::Error) -> Error {
    Error::Db(sea_orm::DbErr::Custom(format!(
        "password hashing failed: {e}"
    )))
}

/// Whether `password` matches `stored` (argon2's comparison is constant
/// time). A hash that does not parse matches nothing.
fn verify_now(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

/// What an unknown email's password is checked against, so that asking
/// about an account that does not exist takes as long as one that does.
static STAND_IN: LazyLock<Option<String>> =
    LazyLock::new(|| hash_now("a password nobody has").ok().map(|d| d.0));

/// A user to add.
#[derive(Debug)]
pub struct NewUser {
    pub name: String,
    pub email: String,
    pub role: Role,
    /// Routing: the team a `sales` user's leads come through.
    pub team: Option<String>,
    pub password: PasswordDigest,
}

/// A user as listed: never its password hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserRecord {
    pub principal: Principal,
    pub email: String,
    pub team: Option<String>,
    /// False once disabled.
    pub active: bool,
    pub disabled_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<principal::Model> for UserRecord {
    type Error = Error;

    fn try_from(model: principal::Model) -> Result<Self, Error> {
        Ok(Self {
            email: model.email.clone().ok_or(Error::NotFound)?,
            team: model.team.clone(),
            active: model.active && model.disabled_at.is_none(),
            disabled_at: model.disabled_at,
            created_at: model.created_at,
            principal: principal_of(model)?,
        })
    }
}

/// `raw` trimmed and lower-cased, if it is an email address: two spellings
/// that differ only in case are one user.
pub fn normalise_email(raw: &str) -> Result<String, Error> {
    let email = raw.trim().to_lowercase();
    if email.len() <= 320 && email.validate_email() {
        Ok(email)
    } else {
        Err(Error::invalid("email", "must be an email address"))
    }
}

/// Adds a user: `409` (`Conflict`) when its email is taken.
pub async fn add<C: ConnectionTrait>(conn: &C, user: NewUser) -> Result<UserRecord, Error> {
    let name = user.name.trim();
    if name.is_empty() || name.chars().count() > 128 {
        return Err(Error::invalid("name", "must be 1 to 128 characters"));
    }
    let email = normalise_email(&user.email)?;
    if user.role == Role::Intake {
        return Err(Error::invalid(
            "role",
            "a user is sales, ops or admin (intake tokens belong to a source)",
        ));
    }
    let team = match (user.team, user.role) {
        (None, _) => None,
        (Some(team), Role::Sales) => Some(crate::routing::staff::team(&team)?),
        (Some(_), _) => {
            return Err(Error::invalid("team", "only sales users are in a team"));
        }
    };
    let taken = || Error::Conflict(format!("a user with email '{email}' exists"));
    if principal::Entity::find()
        .filter(principal::Column::Email.eq(&email))
        .one(conn)
        .await?
        .is_some()
    {
        return Err(taken());
    }
    let inserted = principal::ActiveModel {
        name: Set(name.to_owned()),
        role: Set(user.role.as_str().to_owned()),
        source: Set(None),
        token_hash: Set(unusable_token_hash()),
        active: Set(true),
        created_at: Set(crate::clock::now()),
        team: Set(team),
        availability: Set("available".to_owned()),
        version: Set(1),
        email: Set(Some(email.clone())),
        password_hash: Set(Some(user.password.0)),
        ..Default::default()
    }
    .insert(conn)
    .await;
    match inserted {
        Ok(model) => model.try_into(),
        Err(e) if matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => Err(taken()),
        Err(e) => Err(e.into()),
    }
}

/// Every user, oldest first.
pub async fn list<C: ConnectionTrait>(conn: &C) -> Result<Vec<UserRecord>, Error> {
    principal::Entity::find()
        .filter(principal::Column::Email.is_not_null())
        .order_by_asc(principal::Column::Id)
        .all(conn)
        .await?
        .into_iter()
        .map(UserRecord::try_from)
        .collect()
}

/// User `id` (`NotFound` for a principal that is not a user).
pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<UserRecord, Error> {
    principal::Entity::find_by_id(id)
        .filter(principal::Column::Email.is_not_null())
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?
        .try_into()
}

/// The user with `email` (any case).
pub async fn find_by_email<C: ConnectionTrait>(conn: &C, email: &str) -> Result<UserRecord, Error> {
    principal::Entity::find()
        .filter(principal::Column::Email.eq(normalise_email(email)?))
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?
        .try_into()
}

/// Disables user `id`: it can no longer sign in, its sessions end and its
/// token is refused. Disabling a disabled user changes nothing. Run it in a
/// transaction.
pub async fn disable<C: ConnectionTrait>(conn: &C, id: i64) -> Result<UserRecord, Error> {
    let user = find(conn, id).await?;
    if user.disabled_at.is_none() {
        principal::Entity::update_many()
            .col_expr(principal::Column::Active, Expr::value(false))
            .col_expr(
                principal::Column::DisabledAt,
                Expr::value(crate::clock::now()),
            )
            .col_expr(
                principal::Column::Version,
                Expr::col(principal::Column::Version).add(1),
            )
            .filter(principal::Column::Id.eq(id))
            .exec(conn)
            .await?;
    }
    crate::session::end_all_for(conn, id).await?;
    find(conn, id).await
}

/// Sets user `id`'s password (hashed before: [`hash_password`]) and ends
/// its sessions. Run it in a transaction.
pub async fn set_password<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    password: PasswordDigest,
) -> Result<UserRecord, Error> {
    find(conn, id).await?;
    principal::Entity::update_many()
        .col_expr(principal::Column::PasswordHash, Expr::value(password.0))
        .filter(principal::Column::Id.eq(id))
        .exec(conn)
        .await?;
    crate::session::end_all_for(conn, id).await?;
    find(conn, id).await
}

/// Most days a personal token may live.
pub const MAX_TOKEN_DAYS: i64 = 365;

/// A new personal token of user `id` for its own REST clients, named
/// `name`, living `days` (1 to 365; default 90).
pub async fn create_token<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    name: &str,
    days: Option<i64>,
) -> Result<IssuedToken, Error> {
    let user = find(conn, id).await?;
    if !user.active {
        return Err(Error::Forbidden("a disabled user has no tokens".into()));
    }
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 128 || name.chars().any(char::is_control) {
        return Err(Error::invalid("name", "must be 1 to 128 characters"));
    }
    let days = days.unwrap_or(PERSONAL_TOKEN_DAYS);
    if !(1..=MAX_TOKEN_DAYS).contains(&days) {
        return Err(Error::invalid("expires_in_days", "must be 1 to 365"));
    }
    issue_token(
        conn,
        user.principal,
        name,
        Some(chrono::Duration::days(days)),
    )
    .await
}

/// User `id`'s personal tokens, oldest first.
pub async fn tokens<C: ConnectionTrait>(conn: &C, id: i64) -> Result<Vec<TokenRecord>, Error> {
    Ok(api_token::Entity::find()
        .filter(api_token::Column::PrincipalId.eq(id))
        .order_by_asc(api_token::Column::Id)
        .all(conn)
        .await?
        .into_iter()
        .map(TokenRecord::from)
        .collect())
}

/// User `id`'s token `token_id` (`NotFound` when it is another's).
async fn own_token<C: ConnectionTrait>(conn: &C, id: i64, token_id: i64) -> Result<(), Error> {
    api_token::Entity::find_by_id(token_id)
        .filter(api_token::Column::PrincipalId.eq(id))
        .one(conn)
        .await?
        .map(|_| ())
        .ok_or(Error::NotFound)
}

/// A new secret for user `id`'s token `token_id`; see
/// [`crate::auth::rotate_token`].
pub async fn rotate_token<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    token_id: i64,
) -> Result<IssuedToken, Error> {
    own_token(conn, id, token_id).await?;
    crate::auth::rotate_token(conn, token_id).await
}

/// Deletes user `id`'s token `token_id`: it is refused at once (on servers
/// that remember it, after `LEADPIPE_AUTH_CACHE_SECS`).
pub async fn delete_token<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    token_id: i64,
) -> Result<(), Error> {
    own_token(conn, id, token_id).await?;
    api_token::Entity::delete_by_id(token_id).exec(conn).await?;
    Ok(())
}

/// The enabled user `email` names, if `password` is theirs. The check costs
/// the same whether or not the email is known (an unknown one is checked
/// against a stand-in hash), and runs on a blocking thread.
pub async fn check_password<C: ConnectionTrait>(
    conn: &C,
    email: &str,
    password: &str,
) -> Result<Option<Principal>, Error> {
    let found = match normalise_email(email) {
        Ok(email) => {
            principal::Entity::find()
                .filter(principal::Column::Email.eq(email))
                .one(conn)
                .await?
        }
        Err(_) => None,
    };
    let stored = found
        .as_ref()
        .and_then(|user| user.password_hash.clone())
        .or_else(|| STAND_IN.clone());
    let password = password.to_owned();
    let matches =
        on_hashing_thread(move || stored.is_some_and(|stored| verify_now(&password, &stored)))
            .await?;
    match found {
        Some(user)
            if matches
                && user.active
                && user.disabled_at.is_none()
                && user.password_hash.is_some() =>
        {
            Ok(Some(principal_of(user)?))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn no_more_hashing_runs_at_once_than_there_are_cores() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs = (0..cores * 4).map(|_| {
            let (running, most) = (running.clone(), most.clone());
            tokio::spawn(on_hashing_thread(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(30));
                running.fetch_sub(1, Ordering::SeqCst);
            }))
        });
        for job in jobs.collect::<Vec<_>>() {
            job.await.unwrap().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), cores);
    }

    #[test]
    fn passwords_hash_to_argon2id_and_verify() {
        let digest = hash_now("correct horse battery").unwrap();
        assert!(digest.0.starts_with("$argon2id$"), "{}", digest.0);
        assert!(verify_now("correct horse battery", &digest.0));
        assert!(!verify_now("correct horse batter", &digest.0));
        assert!(!verify_now("correct horse battery", "not a hash"));
        let again = hash_now("correct horse battery").unwrap();
        assert_ne!(digest.0, again.0, "salted");
    }

    #[test]
    fn passwords_have_a_length_and_never_print() {
        assert!(Password::new("short".into()).is_err());
        assert!(Password::new("x".repeat(257)).is_err());
        let p = Password::new("long enough secret".into()).unwrap();
        assert!(!format!("{p:?}").contains("secret"));
    }

    #[test]
    fn emails_are_one_case() {
        assert_eq!(
            normalise_email(" Alice@Example.COM ").unwrap(),
            "alice@example.com"
        );
        assert!(normalise_email("alice").is_err());
    }
}
