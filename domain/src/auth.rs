//! API principals and their bearer tokens. Only a token's SHA-256 is stored;
//! the token itself is shown once, when it is created.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use rand::RngCore;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    Set,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::entities::{api_token, principal};
use crate::error::Error;
use crate::ids::PrincipalId;
use crate::source_name::is_valid_source_name;

const TOKEN_PREFIX: &str = "lp_";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A lead source's client: may post leads for its one source.
    Intake,
    Sales,
    Ops,
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Self::Intake, Self::Sales, Self::Ops, Self::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Intake => "intake",
            Self::Sales => "sales",
            Self::Ops => "ops",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "intake" => Ok(Self::Intake),
            "sales" => Ok(Self::Sales),
            "ops" => Ok(Self::Ops),
            "admin" => Ok(Self::Admin),
            other => Err(format!(
                "unknown role '{other}' (intake, sales, ops, admin)"
            )),
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Principal {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// The one source an `intake` principal may write for.
    pub source: Option<String>,
}

impl Principal {
    pub fn has_any_role(&self, roles: &[Role]) -> bool {
        roles.contains(&self.role)
    }

    /// Whether this principal may write leads for `source`.
    pub fn may_ingest_for(&self, source: &str) -> bool {
        match self.role {
            Role::Admin => true,
            Role::Intake => self.source.as_deref() == Some(source),
            Role::Sales | Role::Ops => false,
        }
    }
}

/// A token and the principal it authenticates, as returned once at creation
/// (or rotation).
pub struct IssuedToken {
    pub principal: Principal,
    pub token: String,
    /// The token's row, never its secret.
    pub record: TokenRecord,
}

// Hand-written: the token never reaches a log line.
impl std::fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("principal", &self.principal)
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

/// A bearer token as listed: never the token or its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenRecord {
    pub id: i64,
    pub principal_id: i64,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl From<api_token::Model> for TokenRecord {
    fn from(m: api_token::Model) -> Self {
        Self {
            id: m.id,
            principal_id: m.principal_id,
            name: m.name,
            created_at: m.created_at,
            expires_at: m.expires_at,
            last_used_at: m.last_used_at,
        }
    }
}

/// How long a personal token (of a `sales`, `ops` or `admin` principal)
/// lives unless asked otherwise.
pub const PERSONAL_TOKEN_DAYS: i64 = 90;

/// When a new token stops working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Personal tokens after [`PERSONAL_TOKEN_DAYS`]; a source's (intake)
    /// token never.
    Default,
    Never,
    After(chrono::Duration),
}

impl Expiry {
    /// How long a token of `role` lives; `None`: for ever.
    fn lifetime(self, role: Role) -> Option<chrono::Duration> {
        match self {
            Self::Default => {
                (role != Role::Intake).then(|| chrono::Duration::days(PERSONAL_TOKEN_DAYS))
            }
            Self::Never => None,
            Self::After(lifetime) => Some(lifetime),
        }
    }
}

/// What a bearer token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    Valid(Principal),
    /// Ours, but past its expiry.
    Expired,
    /// Not a token of an active principal.
    Unknown,
}

/// Whether `token` has the shape of one we issue (`lp_` and 43 base64url
/// characters): anything else cannot match and needs no database lookup.
pub fn looks_like_token(token: &str) -> bool {
    token.strip_prefix(TOKEN_PREFIX).is_some_and(|rest| {
        rest.len() == 43
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn generate_token() -> String {
    random_secret(TOKEN_PREFIX)
}

/// `prefix` and 32 random bytes in base64url (43 characters): a token, a
/// session id.
pub(crate) fn random_secret(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// The hash stored for a principal that has no bearer token (a user who
/// signs in with a password): of a token nobody was ever shown.
pub(crate) fn unusable_token_hash() -> String {
    hash_token(&generate_token())
}

/// [`create_principal_with`] its role's default expiry.
pub async fn create_principal<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    role: Role,
    source: Option<&str>,
) -> Result<IssuedToken, Error> {
    create_principal_with(conn, name, role, source, Expiry::Default).await
}

/// Creates a principal and its bearer token, which expires as `expiry`
/// says. Run it in a transaction to have both or neither.
pub async fn create_principal_with<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    role: Role,
    source: Option<&str>,
    expiry: Expiry,
) -> Result<IssuedToken, Error> {
    let name = name.trim();
    if name.is_empty() || name.len() > 128 {
        return Err(Error::invalid("name", "must be 1 to 128 characters"));
    }
    match (role, source) {
        (Role::Intake, None) => {
            return Err(Error::invalid(
                "source",
                "an intake principal is bound to one source",
            ));
        }
        (Role::Intake, Some(s)) if !is_valid_source_name(s) => {
            return Err(Error::invalid("source", "is not a valid source name"));
        }
        (Role::Sales | Role::Ops | Role::Admin, Some(_)) => {
            return Err(Error::invalid(
                "source",
                "only intake principals are bound to a source",
            ));
        }
        _ => {}
    }
    let now = crate::clock::now();
    let model = principal::ActiveModel {
        name: Set(name.to_owned()),
        role: Set(role.as_str().to_owned()),
        source: Set(source.map(str::to_owned)),
        // Tokens live in `api_token`.
        token_hash: Set(unusable_token_hash()),
        active: Set(true),
        created_at: Set(now),
        ..Default::default()
    }
    .insert(conn)
    .await?;
    let principal = to_principal(model)?;
    issue_token(conn, principal, name, expiry.lifetime(role)).await
}

/// A new token for `principal`, named `name`, living `lifetime` (`None`:
/// for ever).
pub(crate) async fn issue_token<C: ConnectionTrait>(
    conn: &C,
    principal: Principal,
    name: &str,
    lifetime: Option<chrono::Duration>,
) -> Result<IssuedToken, Error> {
    let token = generate_token();
    let now = crate::clock::now();
    let record = api_token::ActiveModel {
        principal_id: Set(principal.id),
        name: Set(name.to_owned()),
        token_hash: Set(hash_token(&token)),
        created_at: Set(now),
        expires_at: Set(lifetime.map(|lifetime| now + lifetime)),
        last_used_at: Set(None),
        ..Default::default()
    }
    .insert(conn)
    .await?;
    Ok(IssuedToken {
        principal,
        token,
        record: record.into(),
    })
}

/// Replaces token `token_id`'s secret: the old one stops working at once
/// (on servers that remember it, after `LEADPIPE_AUTH_CACHE_SECS`), the new
/// one lives as long as the old one was given (from now), under the same
/// name and id.
pub(crate) async fn rotate_token<C: ConnectionTrait>(
    conn: &C,
    token_id: i64,
) -> Result<IssuedToken, Error> {
    let old = api_token::Entity::find_by_id(token_id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?;
    let owner = principal::Entity::find_by_id(old.principal_id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?;
    if !owner.active {
        return Err(Error::Conflict(format!(
            "principal {} is revoked or disabled: its tokens are not rotated",
            owner.id
        )));
    }
    let now = crate::clock::now();
    let token = generate_token();
    let expires_at = old.expires_at.map(|at| now + (at - old.created_at));
    let mut row: api_token::ActiveModel = old.into();
    row.token_hash = Set(hash_token(&token));
    row.created_at = Set(now);
    row.expires_at = Set(expires_at);
    row.last_used_at = Set(None);
    let record = row.update(conn).await?;
    Ok(IssuedToken {
        principal: to_principal(owner)?,
        token,
        record: record.into(),
    })
}

/// Rotates the token of principal `id` (one created by `leadpipe token
/// create`). A user's personal tokens are the user's to rotate.
pub async fn rotate_principal_token<C: ConnectionTrait>(
    conn: &C,
    id: i64,
) -> Result<IssuedToken, Error> {
    let owner = principal::Entity::find_by_id(id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?;
    if owner.email.is_some() {
        return Err(Error::invalid(
            "id",
            "is a user: a user rotates its personal tokens itself (POST /api/tokens/{id}/rotate)",
        ));
    }
    let newest = api_token::Entity::find()
        .filter(api_token::Column::PrincipalId.eq(id))
        .order_by_desc(api_token::Column::Id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?;
    rotate_token(conn, newest.id).await
}

/// Every token of every principal, by principal then id.
pub async fn all_tokens<C: ConnectionTrait>(conn: &C) -> Result<Vec<TokenRecord>, Error> {
    Ok(api_token::Entity::find()
        .order_by_asc(api_token::Column::PrincipalId)
        .order_by_asc(api_token::Column::Id)
        .all(conn)
        .await?
        .into_iter()
        .map(TokenRecord::from)
        .collect())
}

/// Only active `sales` principals own leads and deals.
pub async fn check_sales_owner<C: ConnectionTrait>(
    conn: &C,
    owner_id: PrincipalId,
) -> Result<(), Error> {
    let owner = principal::Entity::find_by_id(owner_id.0).one(conn).await?;
    if owner.is_some_and(|o| o.active && o.role == Role::Sales.as_str()) {
        Ok(())
    } else {
        Err(Error::invalid(
            "owner_id",
            "must be the id of an active sales principal",
        ))
    }
}

/// Revokes principal `id`'s token; false when there is no such principal.
/// Servers that remember the token ([`PrincipalCache`]) accept it until
/// their entry expires.
pub async fn revoke<C: ConnectionTrait>(conn: &C, id: i64) -> Result<bool, Error> {
    let updated = principal::Entity::update_many()
        .col_expr(
            principal::Column::Active,
            sea_orm::sea_query::Expr::value(false),
        )
        .filter(principal::Column::Id.eq(id))
        .exec(conn)
        .await?;
    Ok(updated.rows_affected == 1)
}

/// The active principal a bearer token belongs to, if any (an expired
/// token is none).
pub async fn authenticate<C: ConnectionTrait>(
    conn: &C,
    token: &str,
) -> Result<Option<Principal>, Error> {
    match check(conn, token).await? {
        TokenCheck::Valid(principal) => Ok(Some(principal)),
        TokenCheck::Expired | TokenCheck::Unknown => Ok(None),
    }
}

/// What `token` is: valid (and its use noted), expired, or unknown.
pub async fn check<C: ConnectionTrait>(conn: &C, token: &str) -> Result<TokenCheck, Error> {
    if !looks_like_token(token) {
        return Ok(TokenCheck::Unknown);
    }
    // Looking up by hash keeps the comparison in the index, not in a
    // byte-by-byte loop whose timing depends on the secret.
    Ok(find_by_hash(conn, &hash_token(token)).await?.0)
}

/// Use is noted at most this often: a busy client does not write a row a
/// request.
const USE_GRANULARITY_SECS: i64 = 60;

/// The token's check and, when valid, its expiry.
async fn find_by_hash<C: ConnectionTrait>(
    conn: &C,
    hash: &str,
) -> Result<(TokenCheck, Option<DateTime<Utc>>), DbErr> {
    let Some(row) = api_token::Entity::find()
        .filter(api_token::Column::TokenHash.eq(hash))
        .one(conn)
        .await?
    else {
        return Ok((TokenCheck::Unknown, None));
    };
    let now = crate::clock::now();
    if row.expires_at.is_some_and(|at| at <= now) {
        return Ok((TokenCheck::Expired, row.expires_at));
    }
    let Some(owner) = principal::Entity::find_by_id(row.principal_id)
        .filter(principal::Column::Active.eq(true))
        .one(conn)
        .await?
    else {
        return Ok((TokenCheck::Unknown, None));
    };
    if row
        .last_used_at
        .is_none_or(|at| (now - at).num_seconds() >= USE_GRANULARITY_SECS)
    {
        api_token::Entity::update_many()
            .col_expr(
                api_token::Column::LastUsedAt,
                sea_orm::sea_query::Expr::value(now),
            )
            .filter(api_token::Column::Id.eq(row.id))
            .exec(conn)
            .await?;
    }
    Ok((TokenCheck::Valid(to_principal(owner)?), row.expires_at))
}

/// A valid token's principal and when the token expires.
type Remembered = (Principal, Option<DateTime<Utc>>);

/// Principals looked up by token hash, kept for a short time so a busy
/// client's requests do not each pay a database round trip to check the
/// token. The price: a revoked token keeps working until its entry expires
/// (`ttl`; an expired token is refused at its expiry all the same); a zero
/// `ttl` turns the cache off. Unknown tokens are remembered
/// as unknown for as long, so repeating a wrong token costs no query: that
/// is safe because tokens are random, so no token issued later can be one
/// that was tried before.
#[derive(Clone)]
pub struct PrincipalCache {
    entries: Option<moka::sync::Cache<String, Remembered>>,
    misses: Option<moka::sync::Cache<String, ()>>,
}

impl PrincipalCache {
    /// Entries live for `ttl`; at most `capacity` tokens are remembered.
    pub fn new(ttl: std::time::Duration, capacity: u64) -> Self {
        let entries = (!ttl.is_zero()).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build()
        });
        let misses = (!ttl.is_zero()).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build()
        });
        Self { entries, misses }
    }

    /// [`check`], answered from the cache while the entry is fresh (an
    /// entry past its token's expiry is expired at once).
    pub async fn check<C: ConnectionTrait>(
        &self,
        conn: &C,
        token: &str,
    ) -> Result<TokenCheck, Error> {
        let (Some(entries), Some(misses)) = (&self.entries, &self.misses) else {
            return check(conn, token).await;
        };
        if !looks_like_token(token) {
            return Ok(TokenCheck::Unknown);
        }
        let hash = hash_token(token);
        if let Some((principal, expires_at)) = entries.get(&hash) {
            metrics::counter!("leadpipe_auth_cache_total", "result" => "hit").increment(1);
            if expires_at.is_some_and(|at| at <= crate::clock::now()) {
                return Ok(TokenCheck::Expired);
            }
            return Ok(TokenCheck::Valid(principal));
        }
        if misses.contains_key(&hash) {
            metrics::counter!("leadpipe_auth_cache_total", "result" => "known_unknown")
                .increment(1);
            return Ok(TokenCheck::Unknown);
        }
        metrics::counter!("leadpipe_auth_cache_total", "result" => "miss").increment(1);
        let (found, expires_at) = find_by_hash(conn, &hash).await?;
        match &found {
            TokenCheck::Valid(principal) => entries.insert(hash, (principal.clone(), expires_at)),
            TokenCheck::Unknown => misses.insert(hash, ()),
            // Not remembered: it stays expired, and says so.
            TokenCheck::Expired => {}
        }
        Ok(found)
    }
}

/// The caller a principal row describes.
pub(crate) fn principal_of(model: principal::Model) -> Result<Principal, DbErr> {
    to_principal(model)
}

fn to_principal(model: principal::Model) -> Result<Principal, DbErr> {
    let role = model.role.parse().map_err(DbErr::Custom)?;
    Ok(Principal {
        id: model.id,
        name: model.name,
        role,
        source: model.source,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_prefixed_and_hash_to_hex() {
        let a = generate_token();
        let b = generate_token();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 43);
        let h = hash_token(&a);
        assert_eq!(h.len(), 64);
        assert_eq!(h, hash_token(&a));
        assert_ne!(h, hash_token(&b));
    }

    #[test]
    fn only_tokens_of_our_shape_are_looked_up() {
        assert!(looks_like_token(&generate_token()));
        for other in ["", "lp_", "lp_short", "Bearer x", &"lp_a".repeat(20)] {
            assert!(!looks_like_token(other), "{other}");
        }
        let wrong_char = format!("lp_{}!", "a".repeat(42));
        assert!(!looks_like_token(&wrong_char));
    }

    #[test]
    fn intake_may_ingest_only_for_its_source() {
        let p = Principal {
            id: 1,
            name: "x".into(),
            role: Role::Intake,
            source: Some("web".into()),
        };
        assert!(p.may_ingest_for("web"));
        assert!(!p.may_ingest_for("ads"));
        let admin = Principal {
            role: Role::Admin,
            source: None,
            ..p.clone()
        };
        assert!(admin.may_ingest_for("ads"));
        let sales = Principal {
            role: Role::Sales,
            source: None,
            ..p
        };
        assert!(!sales.may_ingest_for("web"));
    }

    #[test]
    fn roles_round_trip() {
        for r in [Role::Intake, Role::Sales, Role::Ops, Role::Admin] {
            assert_eq!(r.as_str().parse::<Role>().unwrap(), r);
        }
        assert!("root".parse::<Role>().is_err());
    }
}
