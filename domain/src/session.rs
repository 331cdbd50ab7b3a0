//! A signed-in page's session. The session id lives only in the browser's
//! cookie; the CSRF token is derived from it (a one-way hash of it), so
//! the page can ask for it again. Only the SHA-256 of each is stored, as for
//! bearer tokens. A session ends when it has been idle for `idle`, at
//! `absolute` after it started, when it is ended, or when its user is
//! disabled or its password reset.

use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use sha2::{Digest, Sha256};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::auth::{Principal, hash_token, principal_of, random_secret};
use crate::entities::{principal, user_session};
use crate::error::Error;

const SESSION_PREFIX: &str = "lps_";

/// How long a session lasts: idle, and at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// Unused for this long, a session is over.
    pub idle: Duration,
    /// A session is over this long after it started, however used.
    pub absolute: Duration,
}

/// `last_seen_at` is written at most this often (or a tenth of the idle
/// lifetime, if shorter): a page's every request does not each cost a
/// write.
const SEEN_GRANULARITY_SECS: i64 = 60;

/// A session just started: its id (for the cookie, never stored) and the
/// CSRF token the page sends with its writes.
pub struct Started {
    pub id: String,
    pub csrf_token: String,
    pub expires_at: DateTime<Utc>,
    pub principal: Principal,
}

// Hand-written: the id and the token never reach a log line.
impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("expires_at", &self.expires_at)
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

/// A live session, found by its id.
#[derive(Debug, Clone)]
pub struct Current {
    /// The session's row.
    pub row_id: i64,
    pub principal: Principal,
    csrf_hash: String,
    /// The absolute end.
    pub expires_at: DateTime<Utc>,
    /// When it ends unless used before.
    pub idle_expires_at: DateTime<Utc>,
}

impl Current {
    /// Whether `token` is this session's CSRF token (compared in constant
    /// time).
    pub fn csrf_matches(&self, token: &str) -> bool {
        constant_time_eq(hash_token(token).as_bytes(), self.csrf_hash.as_bytes())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `id` has the shape of a session id we issue: anything else needs
/// no database lookup.
pub fn looks_like_session_id(id: &str) -> bool {
    id.strip_prefix(SESSION_PREFIX).is_some_and(|rest| {
        rest.len() == 43
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// The CSRF token of session `id`: a one-way function of the (random,
/// secret) id, so the token (which a page's script reads) reveals nothing
/// of the id (which it cannot read).
pub fn csrf_token_for(id: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(format!("leadpipe csrf v1:{id}")))
}

/// Starts a session for `principal`.
pub async fn start<C: ConnectionTrait>(
    conn: &C,
    principal: Principal,
    lifetimes: Lifetimes,
) -> Result<Started, Error> {
    let id = random_secret(SESSION_PREFIX);
    let csrf_token = csrf_token_for(&id);
    let now = crate::clock::now();
    let expires_at = now + lifetimes.absolute;
    user_session::ActiveModel {
        principal_id: Set(principal.id),
        id_hash: Set(hash_token(&id)),
        csrf_hash: Set(hash_token(&csrf_token)),
        created_at: Set(now),
        last_seen_at: Set(now),
        expires_at: Set(expires_at),
        ..Default::default()
    }
    .insert(conn)
    .await?;
    Ok(Started {
        id,
        csrf_token,
        expires_at,
        principal,
    })
}

/// The live session `id` names, if any: not idle too long, not past its
/// end, its user enabled. Notes the use (at most once a minute); a session
/// found over is deleted.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    lifetimes: Lifetimes,
) -> Result<Option<Current>, Error> {
    if !looks_like_session_id(id) {
        return Ok(None);
    }
    let Some(row) = user_session::Entity::find()
        .filter(user_session::Column::IdHash.eq(hash_token(id)))
        .one(conn)
        .await?
    else {
        return Ok(None);
    };
    let now = crate::clock::now();
    let idle_expires_at = row.last_seen_at + lifetimes.idle;
    if now >= row.expires_at || now >= idle_expires_at {
        end(conn, row.id).await?;
        return Ok(None);
    }
    let Some(user) = principal::Entity::find_by_id(row.principal_id)
        .filter(principal::Column::Active.eq(true))
        .filter(principal::Column::DisabledAt.is_null())
        .one(conn)
        .await?
    else {
        return Ok(None);
    };
    let mut idle_expires_at = idle_expires_at;
    let granularity = Duration::seconds(SEEN_GRANULARITY_SECS).min(lifetimes.idle / 10);
    if now - row.last_seen_at >= granularity {
        user_session::Entity::update_many()
            .col_expr(user_session::Column::LastSeenAt, Expr::value(now))
            .filter(user_session::Column::Id.eq(row.id))
            .exec(conn)
            .await?;
        idle_expires_at = now + lifetimes.idle;
    }
    Ok(Some(Current {
        row_id: row.id,
        principal: principal_of(user)?,
        csrf_hash: row.csrf_hash,
        expires_at: row.expires_at,
        idle_expires_at: Ord::min(idle_expires_at, row.expires_at),
    }))
}

/// Ends one session.
pub async fn end<C: ConnectionTrait>(conn: &C, row_id: i64) -> Result<(), Error> {
    user_session::Entity::delete_by_id(row_id)
        .exec(conn)
        .await?;
    Ok(())
}

/// Ends every session of `principal_id`; how many there were.
pub async fn end_all_for<C: ConnectionTrait>(conn: &C, principal_id: i64) -> Result<u64, Error> {
    Ok(user_session::Entity::delete_many()
        .filter(user_session::Column::PrincipalId.eq(principal_id))
        .exec(conn)
        .await?
        .rows_affected)
}

/// Deletes the sessions that are over (idle too long or past their end).
pub async fn prune<C: ConnectionTrait>(conn: &C, lifetimes: Lifetimes) -> Result<u64, Error> {
    let now = crate::clock::now();
    Ok(user_session::Entity::delete_many()
        .filter(
            Expr::col(user_session::Column::ExpiresAt)
                .lte(now)
                .or(Expr::col(user_session::Column::LastSeenAt).lte(now - lifetimes.idle)),
        )
        .exec(conn)
        .await?
        .rows_affected)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_random_and_their_csrf_tokens_fixed() {
        let a = random_secret(SESSION_PREFIX);
        let b = random_secret(SESSION_PREFIX);
        assert_ne!(a, b);
        assert!(looks_like_session_id(&a));
        assert!(!looks_like_session_id(&format!("lp_{}", &a[4..])));
        assert_eq!(csrf_token_for(&a), csrf_token_for(&a));
        assert_ne!(csrf_token_for(&a), csrf_token_for(&b));
        assert!(!csrf_token_for(&a).contains(&a[4..]));
    }

    #[test]
    fn csrf_tokens_compare_whole() {
        let current = Current {
            row_id: 1,
            principal: Principal {
                id: 1,
                name: "a".into(),
                role: crate::auth::Role::Sales,
                source: None,
            },
            csrf_hash: hash_token("right"),
            expires_at: Utc::now(),
            idle_expires_at: Utc::now(),
        };
        assert!(current.csrf_matches("right"));
        assert!(!current.csrf_matches("righ"));
        assert!(!current.csrf_matches(""));
    }
}
