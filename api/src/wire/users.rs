//! What `/api/users` and `/api/session` take and show, and what
//! `leadpipe user list` prints. A password goes in, never out.

use chrono::{DateTime, Utc};
use domain::auth::{Principal, Role};
use domain::users::UserRecord;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::wire::about::about_nobody;

/// A user to add.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewUser)]
pub struct UserIn {
    /// 1–128 characters: how the user is named on leads and timelines.
    pub name: String,
    /// Unique whatever its case; stored lower-case.
    pub email: String,
    /// `sales`, `ops` or `admin`.
    pub role: Role,
    /// Routing (`sales` only): the team whose rules send the user leads.
    #[serde(default)]
    pub team: Option<String>,
    /// 12–256 characters; stored as an argon2id hash.
    #[schema(format = Password)]
    pub password: String,
}

/// A new password.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewPassword)]
pub struct PasswordIn {
    /// 12–256 characters.
    #[schema(format = Password)]
    pub password: String,
}

/// A user: a principal that signs in. Never its password or its hash.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = User)]
pub struct UserOut {
    /// The principal's id (lead owners, note authors name it).
    pub id: i64,
    pub name: String,
    pub email: String,
    pub role: Role,
    pub team: Option<String>,
    /// False once disabled.
    pub active: bool,
    pub disabled_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl From<UserRecord> for UserOut {
    fn from(user: UserRecord) -> Self {
        Self {
            id: user.principal.id,
            name: user.principal.name,
            email: user.email,
            role: user.principal.role,
            team: user.team,
            active: user.active,
            disabled_at: user.disabled_at,
            created_at: user.created_at,
        }
    }
}

/// `leadpipe user list`'s row.
#[derive(Serialize, Deserialize)]
pub struct UserListingOut {
    pub id: i64,
    pub name: String,
    pub email: String,
    pub role: Role,
    pub team: Option<String>,
    /// `active`, or `disabled since <RFC 3339>`.
    pub state: String,
    /// RFC 3339, whole seconds.
    pub created_at: String,
}

impl From<UserRecord> for UserListingOut {
    fn from(user: UserRecord) -> Self {
        let seconds = |at: DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        Self {
            id: user.principal.id,
            name: user.principal.name,
            email: user.email,
            role: user.principal.role,
            team: user.team,
            state: match user.disabled_at {
                Some(at) => format!("disabled since {}", seconds(at)),
                None if user.active => "active".to_owned(),
                None => "revoked".to_owned(),
            },
            created_at: seconds(user.created_at),
        }
    }
}

/// Signing in.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SignIn)]
pub struct SessionIn {
    pub email: String,
    #[schema(format = Password)]
    pub password: String,
}

/// The signed-in session: who, until when, and the CSRF token its writes
/// carry in `X-CSRF-Token`.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = Session)]
pub struct SessionOut {
    /// The user's principal id.
    pub principal_id: i64,
    pub name: String,
    pub role: Role,
    /// Send it as `X-CSRF-Token` with every write (`POST`, `PATCH`, `PUT`,
    /// `DELETE`) this session makes; the same for the session's life.
    pub csrf_token: String,
    /// The session ends at this time at the latest.
    pub expires_at: DateTime<Utc>,
    /// The session ends at this time unless used before.
    pub idle_expires_at: DateTime<Utc>,
}

impl SessionOut {
    pub fn new(
        principal: Principal,
        csrf_token: String,
        expires_at: DateTime<Utc>,
        idle_expires_at: DateTime<Utc>,
    ) -> Self {
        Self {
            principal_id: principal.id,
            name: principal.name,
            role: principal.role,
            csrf_token,
            expires_at,
            idle_expires_at,
        }
    }
}

// Users are staff, not people whose data an erasure removes.
about_nobody!(UserOut);
