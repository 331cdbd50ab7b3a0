//! What `/api/tokens` (a user's personal tokens) takes and shows, and what
//! `leadpipe token list` adds about each principal's tokens.

use chrono::{DateTime, Utc};
use domain::auth::{IssuedToken, TokenRecord};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::wire::about::about_nobody;

/// A personal token to create.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewToken)]
pub struct TokenIn {
    /// What it is for (1–128 characters), e.g. `laptop script`.
    pub name: String,
    /// Days until it expires, 1 to 365; default 90.
    #[serde(default)]
    pub expires_in_days: Option<i64>,
}

/// A personal token: never the token itself.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = Token)]
pub struct TokenOut {
    pub id: i64,
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// Refused from this time on (`401 /problems/token-expired`).
    pub expires_at: Option<DateTime<Utc>>,
    /// When a request last used it (noted at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
}

impl From<TokenRecord> for TokenOut {
    fn from(t: TokenRecord) -> Self {
        Self {
            id: t.id,
            name: t.name,
            created_at: t.created_at,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
        }
    }
}

/// A token just created or rotated: the only time it is shown.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = IssuedToken)]
pub struct IssuedTokenOut {
    pub id: i64,
    pub name: String,
    /// `Authorization: Bearer <token>`. Shown this once; only its SHA-256
    /// is stored.
    pub token: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
}

impl From<IssuedToken> for IssuedTokenOut {
    fn from(issued: IssuedToken) -> Self {
        Self {
            id: issued.record.id,
            name: issued.record.name,
            token: issued.token,
            created_at: issued.record.created_at,
            expires_at: issued.record.expires_at,
        }
    }
}

about_nobody!(IssuedTokenOut);
