//! What `GET /api/me` and `GET /api/principals` show.

use domain::auth::{Principal, Role};
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
