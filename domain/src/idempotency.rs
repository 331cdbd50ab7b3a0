//! `Idempotency-Key` storage and rules (IETF httpapi draft, Stripe's practice).
//!
//! A key is scoped to the principal. The first request claims it with an
//! atomic insert (`in_progress`, with a lease token), runs, and stores its
//! response as `done` in the same transaction as its writes. A repeat gets the
//! stored response; a repeat while the first runs gets "in flight"; the same
//! key on another request is a mismatch. A claim whose process died is taken
//! over once its lease lapses, and the lease token fences the old holder out:
//! completing requires the token, so two executions can never both commit.

use crate::natural_key::KeyHasher;
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock;
use crate::entities::idempotency_key::{self, Column, Entity};
use crate::entities::idempotency_subject;

pub const MAX_KEY_LEN: usize = 255;
const IN_PROGRESS: &str = "in_progress";
const DONE: &str = "done";

/// A client's key, as sent: bare, or as a structured-field string (`"…"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let raw = raw.trim();
        let key = match raw.strip_prefix('"') {
            Some(rest) => rest
                .strip_suffix('"')
                .ok_or("has an opening quote but no closing one")?,
            None => raw,
        };
        if key.is_empty() {
            return Err("must not be empty");
        }
        if key.len() > MAX_KEY_LEN {
            return Err("must be at most 255 characters");
        }
        if !key
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        {
            return Err("must be printable ASCII without quotes or backslashes");
        }
        Ok(Self(key.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The one spelling of a request target that idempotency compares and
/// keeps: the path, and the query only when it has one (`/api/leads?` is
/// `/api/leads`).
pub fn canonical_target(path: &str, query: &str) -> String {
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

/// What makes two requests "the same": method, canonical target
/// ([`canonical_target`]) and the body's hash.
pub fn fingerprint(method: &str, path: &str, body: &[u8]) -> String {
    let body_hash = Sha256::digest(body);
    let mut hasher = Sha256::new();
    hasher.update(method.as_bytes());
    hasher.update(b"\n");
    hasher.update(path.as_bytes());
    hasher.update(b"\n");
    hasher.update(body_hash);
    hex::encode(hasher.finalize())
}

/// Whom a stored response is about: recorded with the response, so that an
/// erasure finds every stored copy of a person by what it holds, whatever
/// the request target looked like.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Subject {
    Lead(i64),
    Contact(i64),
    /// A natural key's keyed hash ([`KeyHasher::key_hash`]).
    NaturalKey(String),
    /// A natural key as a reply holds it: recorded as its keyed hash
    /// ([`Subject::NaturalKey`] under the current key).
    Key {
        source: String,
        source_ref: String,
    },
}

impl Subject {
    fn as_text(&self, hasher: &KeyHasher) -> String {
        match self {
            Self::Lead(id) => format!("lead:{id}"),
            Self::Contact(id) => format!("contact:{id}"),
            Self::NaturalKey(hash) => format!("key:{hash}"),
            Self::Key { source, source_ref } => {
                format!("key:{}", hasher.key_hash(source, source_ref))
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// How long a finished key is kept (and replayed).
    pub retention: Duration,
    /// How long a claim may go without completing before another request may take it over.
    pub lease: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            retention: Duration::hours(72),
            lease: Duration::seconds(60),
        }
    }
}

/// A response as stored for replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    pub status: u16,
    /// Only safe headers: content type, `Location`, `ETag`.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

#[derive(Debug)]
pub enum Claim {
    Acquired(Lease),
    Replay(StoredResponse),
    /// Another request with this key is running.
    InFlight,
    /// The key was used for another request.
    Mismatch {
        method: String,
        path: String,
    },
}

/// The right to execute a keyed request, fenced by its token.
#[derive(Debug, Clone)]
pub struct Lease {
    principal_id: i64,
    key: String,
    token: String,
}

pub struct NewRequest<'a> {
    pub principal_id: i64,
    pub key: &'a IdempotencyKey,
    pub fingerprint: &'a str,
    pub method: &'a str,
    pub path: &'a str,
}

fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Claims `key` for this request, or says why not.
pub async fn claim<C: ConnectionTrait>(
    conn: &C,
    policy: &Policy,
    request: &NewRequest<'_>,
) -> Result<Claim, crate::Error> {
    // A few rounds at most: each round either decides or observes a change
    // made by a competing request in between.
    for _ in 0..5 {
        let now = clock::now();
        let token = new_token();
        if insert_claim(conn, policy, request, &token, now).await? {
            return Ok(Claim::Acquired(lease(request, token)));
        }
        let Some(row) = find(conn, request.principal_id, request.key.as_str()).await? else {
            continue;
        };
        if row.expires_at <= now {
            delete_expired(conn, request.principal_id, request.key.as_str(), now).await?;
            continue;
        }
        if row.fingerprint != request.fingerprint {
            return Ok(Claim::Mismatch {
                method: row.method,
                path: row.path,
            });
        }
        if row.state == DONE {
            return Ok(Claim::Replay(stored_response(&row)?));
        }
        if row.locked_at + policy.lease > now {
            return Ok(Claim::InFlight);
        }
        if take_over(conn, &row, &token, now).await? {
            tracing::warn!(
                key_age_secs = (now - row.created_at).num_seconds(),
                "took over an abandoned idempotency claim"
            );
            return Ok(Claim::Acquired(lease(request, token)));
        }
    }
    Ok(Claim::InFlight)
}

fn lease(request: &NewRequest<'_>, token: String) -> Lease {
    Lease {
        principal_id: request.principal_id,
        key: request.key.as_str().to_owned(),
        token,
    }
}

async fn insert_claim<C: ConnectionTrait>(
    conn: &C,
    policy: &Policy,
    request: &NewRequest<'_>,
    token: &str,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let mut insert = Query::insert();
    insert
        .into_table(Entity)
        .columns([
            Column::PrincipalId,
            Column::Key,
            Column::Fingerprint,
            Column::Method,
            Column::Path,
            Column::State,
            Column::LeaseToken,
            Column::LockedAt,
            Column::CreatedAt,
            Column::ExpiresAt,
        ])
        .values([
            request.principal_id.into(),
            request.key.as_str().into(),
            request.fingerprint.into(),
            request.method.into(),
            truncate(request.path, 512).into(),
            IN_PROGRESS.into(),
            token.into(),
            now.into(),
            now.into(),
            (now + policy.retention).into(),
        ])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(
            OnConflict::columns([Column::PrincipalId, Column::Key])
                .do_nothing()
                .to_owned(),
        );
    let result = conn.execute(&insert).await?;
    Ok(result.rows_affected() == 1)
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

async fn find<C: ConnectionTrait>(
    conn: &C,
    principal_id: i64,
    key: &str,
) -> Result<Option<idempotency_key::Model>, DbErr> {
    Entity::find_by_id((principal_id, key.to_owned()))
        .one(conn)
        .await
}

async fn delete_expired<C: ConnectionTrait>(
    conn: &C,
    principal_id: i64,
    key: &str,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let deleted = Entity::delete_many()
        .filter(Column::PrincipalId.eq(principal_id))
        .filter(Column::Key.eq(key))
        .filter(Column::ExpiresAt.lte(now))
        .exec(conn)
        .await?;
    if deleted.rows_affected > 0 {
        forget_subjects_of(conn, principal_id, key).await?;
    }
    Ok(())
}

async fn forget_subjects_of<C: ConnectionTrait>(
    conn: &C,
    principal_id: i64,
    key: &str,
) -> Result<(), DbErr> {
    idempotency_subject::Entity::delete_many()
        .filter(idempotency_subject::Column::PrincipalId.eq(principal_id))
        .filter(idempotency_subject::Column::Key.eq(key))
        .exec(conn)
        .await?;
    Ok(())
}

async fn take_over<C: ConnectionTrait>(
    conn: &C,
    row: &idempotency_key::Model,
    token: &str,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let result = Entity::update_many()
        .col_expr(Column::LeaseToken, Expr::val(token))
        .col_expr(Column::LockedAt, Expr::val(now))
        .filter(Column::PrincipalId.eq(row.principal_id))
        .filter(Column::Key.eq(row.key.as_str()))
        .filter(Column::State.eq(IN_PROGRESS))
        .filter(Column::LeaseToken.eq(row.lease_token.as_str()))
        .exec(conn)
        .await?;
    Ok(result.rows_affected == 1)
}

fn stored_response(row: &idempotency_key::Model) -> Result<StoredResponse, DbErr> {
    let headers: Vec<(String, String)> = match &row.response_headers {
        Some(value) => {
            serde_json::from_value(value.clone()).map_err(|e| DbErr::Json(e.to_string()))?
        }
        None => Vec::new(),
    };
    let status = row
        .response_status
        .and_then(|s| u16::try_from(s).ok())
        .ok_or_else(|| DbErr::Custom("finished idempotency key without a status".into()))?;
    Ok(StoredResponse {
        status,
        headers,
        body: row.response_body.clone().unwrap_or_default(),
    })
}

impl Lease {
    /// First statement of the request's transaction: proves the lease is still
    /// ours and, on PostgreSQL, row-locks the key until commit so a takeover
    /// waits for us instead of racing us.
    pub async fn fence<C: ConnectionTrait>(&self, txn: &C) -> Result<bool, crate::Error> {
        let result = self
            .matching(Entity::update_many())
            .col_expr(Column::LockedAt, Expr::val(clock::now()))
            .exec(txn)
            .await?;
        Ok(result.rows_affected == 1)
    }

    /// Stores the response as `done`, with the subjects it holds. `false`
    /// means the lease was lost: the caller must roll back.
    pub async fn complete<C: ConnectionTrait>(
        &self,
        conn: &C,
        hasher: &KeyHasher,
        response: &StoredResponse,
        subjects: &[Subject],
    ) -> Result<bool, crate::Error> {
        let headers =
            serde_json::to_value(&response.headers).map_err(|e| DbErr::Json(e.to_string()))?;
        let status = i16::try_from(response.status).map_err(|e| DbErr::Custom(e.to_string()))?;
        let result = self
            .matching(Entity::update_many())
            .col_expr(Column::State, Expr::val(DONE))
            .col_expr(Column::ResponseStatus, Expr::val(status))
            .col_expr(Column::ResponseHeaders, Expr::val(headers))
            .col_expr(Column::ResponseBody, Expr::val(response.body.as_str()))
            .exec(conn)
            .await?;
        if result.rows_affected != 1 {
            return Ok(false);
        }
        // A key taken over from an expired generation may carry its subjects.
        forget_subjects_of(conn, self.principal_id, &self.key).await?;
        let mut subjects: Vec<String> = subjects.iter().map(|s| s.as_text(hasher)).collect();
        subjects.sort();
        subjects.dedup();
        if !subjects.is_empty() {
            let rows = subjects
                .into_iter()
                .map(|subject| idempotency_subject::ActiveModel {
                    principal_id: sea_orm::Set(self.principal_id),
                    key: sea_orm::Set(self.key.clone()),
                    subject: sea_orm::Set(subject),
                });
            idempotency_subject::Entity::insert_many(rows)
                .exec_without_returning(conn)
                .await?;
        }
        Ok(true)
    }

    /// Gives the key up so the client may retry it (validation errors, 5xx).
    pub async fn release<C: ConnectionTrait>(&self, conn: &C) -> Result<(), crate::Error> {
        Entity::delete_many()
            .filter(Column::PrincipalId.eq(self.principal_id))
            .filter(Column::Key.eq(self.key.as_str()))
            .filter(Column::LeaseToken.eq(self.token.as_str()))
            .filter(Column::State.eq(IN_PROGRESS))
            .exec(conn)
            .await?;
        Ok(())
    }

    fn matching(&self, update: sea_orm::UpdateMany<Entity>) -> sea_orm::UpdateMany<Entity> {
        update
            .filter(Column::PrincipalId.eq(self.principal_id))
            .filter(Column::Key.eq(self.key.as_str()))
            .filter(Column::LeaseToken.eq(self.token.as_str()))
            .filter(Column::State.eq(IN_PROGRESS))
    }
}

/// Deletes every stored response about any of `subjects` (an erasure);
/// returns how many. Keys stored before subjects were recorded carry none:
/// `legacy` names them by their request target, and only those are matched
/// by it.
pub async fn forget_about<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    subjects: &[Subject],
    legacy: Condition,
) -> Result<u64, crate::Error> {
    let texts: Vec<String> = subjects.iter().map(|s| s.as_text(hasher)).collect();
    let about: Vec<(i64, String)> = idempotency_subject::Entity::find()
        .select_only()
        .column(idempotency_subject::Column::PrincipalId)
        .column(idempotency_subject::Column::Key)
        .filter(idempotency_subject::Column::Subject.is_in(texts))
        .distinct()
        .into_tuple()
        .all(conn)
        .await?;
    let mut deleted = 0;
    for (principal_id, key) in &about {
        deleted += Entity::delete_many()
            .filter(Column::PrincipalId.eq(*principal_id))
            .filter(Column::Key.eq(key.as_str()))
            .exec(conn)
            .await?
            .rows_affected;
        forget_subjects_of(conn, *principal_id, key).await?;
    }
    let with_subjects = Query::select()
        .expr(Expr::val(1))
        .from(idempotency_subject::Entity)
        .and_where(
            Expr::col((
                idempotency_subject::Entity,
                idempotency_subject::Column::PrincipalId,
            ))
            .equals((Entity, Column::PrincipalId)),
        )
        .and_where(
            Expr::col((
                idempotency_subject::Entity,
                idempotency_subject::Column::Key,
            ))
            .equals((Entity, Column::Key)),
        )
        .to_owned();
    // Finished replies only: an in-flight key's row is locked by its write,
    // which may itself wait for the erasure's lock on the lead.
    deleted += Entity::delete_many()
        .filter(legacy)
        .filter(Column::State.eq(DONE))
        .filter(Expr::exists(with_subjects).not())
        .exec(conn)
        .await?
        .rows_affected;
    Ok(deleted)
}

/// Deletes keys past their retention, and their subjects; returns how many.
pub async fn sweep_expired<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
) -> Result<u64, crate::Error> {
    let expired = Query::select()
        .columns([Column::PrincipalId, Column::Key])
        .from(Entity)
        .and_where(Column::ExpiresAt.lte(now))
        .to_owned();
    idempotency_subject::Entity::delete_many()
        .filter(
            Expr::tuple([
                Expr::col(idempotency_subject::Column::PrincipalId),
                Expr::col(idempotency_subject::Column::Key),
            ])
            .in_subquery(expired),
        )
        .exec(conn)
        .await?;
    let result = Entity::delete_many()
        .filter(Column::ExpiresAt.lte(now))
        .exec(conn)
        .await?;
    Ok(result.rows_affected)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn keys_may_be_bare_or_quoted_and_are_bounded() {
        assert_eq!(
            IdempotencyKey::parse("abc-123").unwrap().as_str(),
            "abc-123"
        );
        assert_eq!(
            IdempotencyKey::parse("\"8e03978e-40d5\"").unwrap().as_str(),
            "8e03978e-40d5"
        );
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse("\"\"").is_err());
        assert!(IdempotencyKey::parse("\"open").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("tab\there").is_err());
    }

    #[test]
    fn fingerprints_differ_by_method_path_and_body() {
        let base = fingerprint("POST", "/api/leads/1/notes", b"{\"text\":\"hi\"}");
        assert_eq!(
            base,
            fingerprint("POST", "/api/leads/1/notes", b"{\"text\":\"hi\"}")
        );
        assert_ne!(
            base,
            fingerprint("PATCH", "/api/leads/1/notes", b"{\"text\":\"hi\"}")
        );
        assert_ne!(
            base,
            fingerprint("POST", "/api/leads/2/notes", b"{\"text\":\"hi\"}")
        );
        assert_ne!(
            base,
            fingerprint("POST", "/api/leads/1/notes", b"{\"text\":\"ho\"}")
        );
    }
}
