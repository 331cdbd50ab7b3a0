//! What `GET /api/me` and `GET /api/principals` show.

use domain::auth::{Principal, PrincipalListing, Role};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A principal by name: never its token or the token's hash.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = PrincipalName)]
pub struct PrincipalOut {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// The one source an `intake` principal may write for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Revoked principals stay listed, so the leads they owned keep a name.
    pub active: bool,
}

impl PrincipalOut {
    pub fn new(p: Principal, active: bool) -> Self {
        Self {
            id: p.id,
            name: p.name,
            role: p.role,
            source: p.source,
            active,
        }
    }
}

/// A principal as `leadpipe token list` shows it: never its token or the
/// token's hash.
#[derive(Serialize, Deserialize)]
pub struct PrincipalListingOut {
    pub id: i64,
    pub name: String,
    pub role: Role,
    pub source: Option<String>,
    /// `active`, or `revoked` (its token is refused).
    pub state: String,
    /// RFC 3339, whole seconds.
    pub created_at: String,
}

impl From<PrincipalListing> for PrincipalListingOut {
    fn from(row: PrincipalListing) -> Self {
        let p = row.principal;
        Self {
            id: p.id,
            name: p.name,
            role: p.role,
            source: p.source,
            state: if row.active { "active" } else { "revoked" }.to_owned(),
            created_at: row
                .created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }
}
