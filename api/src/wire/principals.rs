//! What `GET /api/me`, `GET /api/principals` and `PATCH /api/principals/{id}`
//! show and take, and what `leadpipe token list` prints.

use chrono::{DateTime, Utc};
use domain::auth::{Role, TokenRecord};
use domain::routing::staff::StaffRecord;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of `PATCH /api/principals/{id}`: the domain's own.
pub use domain::routing::staff::{Availability, PrincipalPatch};

/// A principal by name, with what routing knows about it: never its token
/// or the token's hash.
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
    /// Routing (`sales` principals): the team whose rules send it leads.
    pub team: Option<String>,
    /// Routing passes an `away` principal by until `away_until` (if set).
    pub availability: Availability,
    pub away_until: Option<DateTime<Utc>>,
    /// The most open leads routing gives it; `null`: no limit.
    pub capacity: Option<i32>,
    /// Goes up with every change; the `ETag` is `"{version}"`.
    pub version: i64,
}

impl From<StaffRecord> for PrincipalOut {
    fn from(record: StaffRecord) -> Self {
        let p = record.principal;
        Self {
            id: p.id,
            name: p.name,
            role: p.role,
            source: p.source,
            active: record.active,
            team: record.routing.team,
            availability: record.routing.availability,
            away_until: record.routing.away_until,
            capacity: record.routing.capacity,
            version: record.version,
        }
    }
}

crate::wire::versioned::versioned!(PrincipalOut);

/// A principal as `leadpipe token list` shows it: every field of
/// [`PrincipalOut`], with `state` and `created_at` for people; never its
/// token or the token's hash.
#[derive(Serialize, Deserialize)]
pub struct PrincipalListingOut {
    pub id: i64,
    pub name: String,
    pub role: Role,
    pub source: Option<String>,
    /// `active`, or `revoked` (its token is refused).
    pub state: String,
    /// As `state`, for scripts: `false` once revoked.
    pub active: bool,
    /// RFC 3339, whole seconds.
    pub created_at: String,
    /// When its token expires (the soonest, of several), RFC 3339; `never`;
    /// `-`: it has no token.
    pub expires_at: String,
    /// When a token of it was last used, RFC 3339; `never`.
    pub last_used_at: String,
    pub team: Option<String>,
    /// `available`, `away`, or `away until <RFC 3339>`.
    pub availability: String,
    pub away_until: Option<DateTime<Utc>>,
    pub capacity: Option<i32>,
    /// As `GET /api/principals` has it (the `ETag` of a change).
    pub version: i64,
}

impl PrincipalListingOut {
    /// With when its tokens expire (the soonest) and were last used.
    pub fn with_tokens<'a>(mut self, tokens: impl Iterator<Item = &'a TokenRecord>) -> Self {
        let seconds = |at: DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let (mut expires, mut used, mut any) = (None, None, false);
        for token in tokens {
            any = true;
            if let Some(at) = token.expires_at {
                expires = Some(expires.map_or(at, |e: DateTime<Utc>| e.min(at)));
            }
            used = used.max(token.last_used_at);
        }
        if !any {
            // A user without personal tokens.
            self.expires_at = "-".to_owned();
            self.last_used_at = "-".to_owned();
            return self;
        }
        self.expires_at = expires.map_or_else(|| "never".to_owned(), seconds);
        self.last_used_at = used.map_or_else(|| "never".to_owned(), seconds);
        self
    }
}

impl From<StaffRecord> for PrincipalListingOut {
    fn from(record: StaffRecord) -> Self {
        let p = record.principal;
        let seconds = |at: DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let availability = match (record.routing.availability, record.routing.away_until) {
            (Availability::Away, Some(until)) => format!("away until {}", seconds(until)),
            (availability, _) => availability.as_str().to_owned(),
        };
        Self {
            id: p.id,
            name: p.name,
            role: p.role,
            source: p.source,
            state: if record.active { "active" } else { "revoked" }.to_owned(),
            active: record.active,
            created_at: seconds(record.created_at),
            expires_at: "never".to_owned(),
            last_used_at: "never".to_owned(),
            team: record.routing.team,
            availability,
            away_until: record.routing.away_until,
            capacity: record.routing.capacity,
            version: record.version,
        }
    }
}

// A principal is staff, not a person whose data an erasure removes.
crate::wire::about::about_nobody!(PrincipalOut);
