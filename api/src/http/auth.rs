//! Authentication as an extractor, so a handler's signature says who may
//! call it: a bearer token, or the page's session cookie.

use domain::actor::Actor;
use std::marker::PhantomData;
use std::ops::Deref;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use domain::auth::{Principal, Role, TokenCheck};
use futures::future::LocalBoxFuture;

use crate::http::correlation::CorrelationId;
use crate::http::error::ApiError;
use crate::http::state::AppState;

/// The caller, authenticated by `Authorization: Bearer <token>` or by the
/// session cookie.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Principal);

impl Authenticated {
    /// 403 unless the caller has one of `roles`.
    pub fn require(&self, roles: &[Role]) -> Result<&Principal, ApiError> {
        if self.0.has_any_role(roles) {
            Ok(&self.0)
        } else {
            Err(ApiError::Forbidden(format!(
                "role '{}' may not do this; allowed: {}",
                self.0.role,
                roles
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }
}

impl Deref for Authenticated {
    type Target = Principal;

    fn deref(&self) -> &Principal {
        &self.0
    }
}

pub const SALES_AND_UP: &[Role] = &[Role::Sales, Role::Ops, Role::Admin];
pub const OPS_AND_UP: &[Role] = &[Role::Ops, Role::Admin];

/// Who may call a handler, as a type its signature names (`Caller<SalesUp>`).
pub trait Roles {
    const ROLES: &'static [Role];
}

macro_rules! roles {
    ($($(#[$doc:meta])* $name:ident = [$($role:ident),*];)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;
        impl Roles for $name {
            const ROLES: &'static [Role] = &[$(Role::$role),*];
        }
    )*};
}

roles! {
    /// sales, ops, admin.
    SalesUp = [Sales, Ops, Admin];
    /// ops, admin.
    OpsUp = [Ops, Admin];
    /// admin.
    AdminOnly = [Admin];
    /// sales (for itself), admin.
    SalesOrAdmin = [Sales, Admin];
    /// intake (its own sources), sales, admin: who may post leads.
    LeadWriters = [Intake, Sales, Admin];
    /// any authenticated principal.
    AnyRole = [Intake, Sales, Ops, Admin];
}

/// The authenticated caller, already checked for one of `R::ROLES` (else
/// `403`), with the request's correlation id for what it writes.
#[derive(Debug, Clone)]
pub struct Caller<R> {
    principal: Principal,
    pub correlation: CorrelationId,
    roles: PhantomData<R>,
}

impl<R> Caller<R> {
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Who a timeline entry, activity or event names: this caller.
    pub fn actor(&self) -> Actor {
        Actor {
            principal_id: Some(self.principal.id),
            correlation_id: Some(self.correlation.0.clone()),
        }
    }
}

impl<R> Deref for Caller<R> {
    type Target = Principal;

    fn deref(&self) -> &Principal {
        &self.principal
    }
}

impl<R: Roles + 'static> FromRequest for Caller<R> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let authenticated = Authenticated::from_request(req, payload);
        let correlation = req.extensions().get::<CorrelationId>().cloned();
        Box::pin(async move {
            let caller = authenticated.await?;
            caller.require(R::ROLES)?;
            Ok(Self {
                principal: caller.0,
                correlation: correlation
                    .unwrap_or_else(|| CorrelationId(uuid::Uuid::now_v7().simple().to_string())),
                roles: PhantomData,
            })
        })
    }
}

fn bearer_token(req: &HttpRequest) -> Option<String> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= 256)
        .then(|| token.to_owned())
}

impl FromRequest for Authenticated {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    /// A bearer token when the request has an `Authorization` header, else
    /// the page's session cookie (and, for a write, its CSRF token).
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = bearer_token(req);
        let has_authorization = req.headers().contains_key(header::AUTHORIZATION);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let client = crate::http::rate_limit::client_address(req);
        let req = req.clone();
        Box::pin(async move {
            let state = state.ok_or_else(|| ApiError::internal("application state missing"))?;
            if !has_authorization {
                let current = crate::http::session::signed_in(&req, &state)
                    .await?
                    .ok_or(ApiError::Unauthorized)?;
                tracing::Span::current().record("principal", current.principal.id);
                return Ok(Self(current.principal));
            }
            let token = token.ok_or(ApiError::Unauthorized)?;
            let principal = match state.principals.check(&state.db, &token).await? {
                TokenCheck::Valid(principal) => principal,
                // A token of ours: no guess, nothing to limit.
                TokenCheck::Expired => return Err(ApiError::TokenExpired),
                TokenCheck::Unknown => {
                    // Only failures count: a valid token always gets in, and
                    // a guesser is slowed down (429) instead of told "try
                    // again".
                    state.limits.auth_failed(client)?;
                    return Err(ApiError::Unauthorized);
                }
            };
            tracing::Span::current().record("principal", principal.id);
            Ok(Self(principal))
        })
    }
}
