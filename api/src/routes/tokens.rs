//! `/api/tokens`: a signed-in user's personal tokens for its own REST
//! clients. By the session cookie only: a bearer token cannot make more
//! tokens (a leaked one could otherwise outlive its expiry).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, delete, get, post, web};
use domain::users;

use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply};
use crate::http::params::IdempotencyKey;
use crate::http::path_id::PathId;
use crate::http::session::signed_in;
use crate::http::state::AppState;
use crate::http::write::Write;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::tokens::{IssuedTokenOut, TokenIn, TokenOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list);
    cfg.service(create);
    cfg.service(rotate);
    cfg.service(remove);
}

/// The signed-in user's session, or `401`.
async fn user(
    req: &HttpRequest,
    state: &web::Data<AppState>,
) -> Result<domain::auth::Principal, ApiError> {
    Ok(signed_in(req, state)
        .await?
        .ok_or(ApiError::Unauthorized)?
        .principal)
}

fn missing(err: domain::Error) -> ApiError {
    match err {
        domain::Error::NotFound => ApiError::NotFound("no such token of yours".into()),
        other => other.into(),
    }
}

/// The signed-in user's personal tokens: names, expiry and last use.
#[utoipa::path(
    operation_id = "list_tokens",
    tag = "meta",
    responses((status = 200, description = "Your tokens, oldest first", body = Vec<TokenOut>, example = json!(examples::tokens()))),
    security(("session" = ["sales", "ops", "admin"])),
)]
#[get("/api/tokens")]
async fn list(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let me = user(&req, &state).await?;
    let all: Vec<TokenOut> = users::tokens(&state.db, me.id)
        .await?
        .into_iter()
        .map(TokenOut::from)
        .collect();
    Ok(HttpResponse::Ok().json(all))
}

/// Create a personal token for your own REST client.
///
/// It acts as you, with your role, until it expires (`expires_in_days`, 1
/// to 365, default 90: then `401 /problems/token-expired`), you delete it,
/// or you are disabled. The token is in this answer only.
#[utoipa::path(
    operation_id = "create_token",
    tag = "meta",
    params(IdempotencyKey),
    request_body(content = TokenIn, example = json!({"name": "laptop script", "expires_in_days": 30})),
    responses((status = 201, description = "Created; the token is shown this once", body = IssuedTokenOut, example = json!(examples::issued_token()))),
    security(("session" = ["sales", "ops", "admin"])),
)]
#[post("/api/tokens")]
async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    write: Write<TokenIn>,
) -> Result<HttpResponse, ApiError> {
    let me = user(&req, &state).await?;
    let id = me.id;
    write
        .run(&me, KeyRule::Optional, move |txn, input, _| {
            Box::pin(async move {
                let issued =
                    users::create_token(txn, id, &input.name, input.expires_in_days).await?;
                // The token is in the body: a stored copy for replay is sealed.
                Ok(
                    Reply::new(StatusCode::CREATED, &IssuedTokenOut::from(issued))?
                        .reveals_secret(),
                )
            })
        })
        .await
}

/// Rotate one of your tokens: a new secret under the same id and name,
/// living as long as the old one was given (from now); the old secret is
/// refused at once (by servers that remember it, after
/// `LEADPIPE_AUTH_CACHE_SECS`).
#[utoipa::path(
    operation_id = "rotate_token",
    tag = "meta",
    params(("id" = i64, Path, description = "The token's id"), IdempotencyKey),
    responses(
        (status = 200, description = "The new token, shown this once", body = IssuedTokenOut, example = json!(examples::rotated_token())),
        (status = 404, description = "`/problems/not-found`: no such token of yours"),
    ),
    security(("session" = ["sales", "ops", "admin"])),
)]
#[post("/api/tokens/{id}/rotate")]
async fn rotate(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    write: Write<()>,
) -> Result<HttpResponse, ApiError> {
    let me = user(&req, &state).await?;
    let (owner, token_id) = (me.id, id.into_inner().0);
    write
        .read_or_default()
        .await?
        .run(&me, KeyRule::Optional, move |txn, (), _| {
            Box::pin(async move {
                let issued = users::rotate_token(txn, owner, token_id)
                    .await
                    .map_err(missing)?;
                Ok(Reply::new(StatusCode::OK, &IssuedTokenOut::from(issued))?.reveals_secret())
            })
        })
        .await
}

/// Delete one of your tokens: it is refused at once (by servers that
/// remember it, after `LEADPIPE_AUTH_CACHE_SECS`).
#[utoipa::path(
    operation_id = "delete_token",
    tag = "meta",
    params(("id" = i64, Path, description = "The token's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`/problems/not-found`: no such token of yours"),
    ),
    security(("session" = ["sales", "ops", "admin"])),
)]
#[delete("/api/tokens/{id}")]
async fn remove(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let me = user(&req, &state).await?;
    users::delete_token(&state.db, me.id, id.into_inner().0)
        .await
        .map_err(missing)?;
    Ok(HttpResponse::NoContent().finish())
}
