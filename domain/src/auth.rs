//! API principals and their bearer tokens. Only a token's SHA-256 is stored;
//! the token itself is shown once, when it is created.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, Set,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::entities::principal;
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

/// A token and the principal it authenticates, as returned once at creation.
#[derive(Debug)]
pub struct IssuedToken {
    pub principal: Principal,
    pub token: String,
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

pub async fn create_principal<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    role: Role,
    source: Option<&str>,
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
    let token = generate_token();
    let model = principal::ActiveModel {
        name: Set(name.to_owned()),
        role: Set(role.as_str().to_owned()),
        source: Set(source.map(str::to_owned)),
        token_hash: Set(hash_token(&token)),
        active: Set(true),
        created_at: Set(crate::clock::now()),
        ..Default::default()
    }
    .insert(conn)
    .await?;
    Ok(IssuedToken {
        principal: to_principal(model)?,
        token,
    })
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

/// The active principal a bearer token belongs to, if any.
pub async fn authenticate<C: ConnectionTrait>(
    conn: &C,
    token: &str,
) -> Result<Option<Principal>, Error> {
    if !looks_like_token(token) {
        return Ok(None);
    }
    // Looking up by hash keeps the comparison in the index, not in a
    // byte-by-byte loop whose timing depends on the secret.
    Ok(find_by_hash(conn, &hash_token(token)).await?)
}

async fn find_by_hash<C: ConnectionTrait>(
    conn: &C,
    hash: &str,
) -> Result<Option<Principal>, DbErr> {
    let found = principal::Entity::find()
        .filter(principal::Column::TokenHash.eq(hash))
        .filter(principal::Column::Active.eq(true))
        .one(conn)
        .await?;
    found.map(to_principal).transpose()
}

/// Principals looked up by token hash, kept for a short time so a busy
/// client's requests do not each pay a database round trip to check the
/// token. The price: a revoked token keeps working until its entry expires
/// (`ttl`); a zero `ttl` turns the cache off. Unknown tokens are remembered
/// as unknown for as long, so repeating a wrong token costs no query: that
/// is safe because tokens are random, so no token issued later can be one
/// that was tried before.
#[derive(Clone)]
pub struct PrincipalCache {
    entries: Option<moka::sync::Cache<String, Principal>>,
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

    /// [`authenticate`], answered from the cache while the entry is fresh.
    pub async fn authenticate<C: ConnectionTrait>(
        &self,
        conn: &C,
        token: &str,
    ) -> Result<Option<Principal>, Error> {
        let (Some(entries), Some(misses)) = (&self.entries, &self.misses) else {
            return authenticate(conn, token).await;
        };
        if !looks_like_token(token) {
            return Ok(None);
        }
        let hash = hash_token(token);
        if let Some(principal) = entries.get(&hash) {
            metrics::counter!("leadpipe_auth_cache_total", "result" => "hit").increment(1);
            return Ok(Some(principal));
        }
        if misses.contains_key(&hash) {
            metrics::counter!("leadpipe_auth_cache_total", "result" => "known_unknown")
                .increment(1);
            return Ok(None);
        }
        metrics::counter!("leadpipe_auth_cache_total", "result" => "miss").increment(1);
        let found = find_by_hash(conn, &hash).await?;
        match &found {
            Some(principal) => entries.insert(hash, principal.clone()),
            None => misses.insert(hash, ()),
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
