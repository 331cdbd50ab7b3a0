//! Bearer-token authentication as an extractor, so a handler's signature says
//! who may call it.

use std::ops::Deref;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, web};
use domain::auth::{Principal, Role};
use futures::future::LocalBoxFuture;

use crate::http::error::ApiError;
use crate::http::state::AppState;

/// The caller, authenticated by `Authorization: Bearer <token>`.
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

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = bearer_token(req);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let client = crate::http::rate_limit::client_address(req);
        Box::pin(async move {
            let token = token.ok_or(ApiError::Unauthorized)?;
            let state = state.ok_or_else(|| ApiError::internal("application state missing"))?;
            let Some(principal) = state.principals.authenticate(&state.db, &token).await? else {
                // Only failures count: a valid token always gets in, and a
                // guesser is slowed down (429) instead of told "try again".
                state.limits.auth_failed(client)?;
                return Err(ApiError::Unauthorized);
            };
            tracing::Span::current().record("principal", principal.id);
            Ok(Self(principal))
        })
    }
}
