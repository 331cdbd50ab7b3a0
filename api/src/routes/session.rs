//! `/api/session`: the page signs in with an email and a password, gets a
//! session cookie (`HttpOnly`, `SameSite=Strict`, `Secure` over TLS) and a
//! CSRF token for its writes, and signs out. REST clients use bearer tokens
//! instead, never a cookie.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, delete, get, post, web};
use domain::session;
use domain::users;

use crate::http::body::{parse_json, read_json_bytes};
use crate::http::error::ApiError;
use crate::http::rate_limit::client_address;
use crate::http::session::{clear_cookie, over_tls, set_cookie, signed_in};
use crate::http::state::AppState;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::users::{SessionIn, SessionOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(sign_in);
    cfg.service(get_session);
    cfg.service(sign_out);
}

/// Sign in: start a session for the page.
///
/// **Roles:** anyone with a user's email and password (no token).
///
/// The answer sets the `leadpipe_session` cookie (`HttpOnly`,
/// `SameSite=Strict`, `Path=/`, `Max-Age` the session's absolute lifetime,
/// `Secure` over TLS or behind `LEADPIPE_TRUST_FORWARDED_PROTO`) and carries
/// the CSRF token that the session's writes send as `X-CSRF-Token`. A wrong
/// email or password, or a disabled user, is one `401`. Every attempt
/// counts against the client address's allowance of failed authentications
/// (`LEADPIPE_AUTH_FAIL_PER_MINUTE`): past it, `429` before the password
/// is checked. A session ends after
/// `LEADPIPE_SESSION_IDLE` unused or `LEADPIPE_SESSION_LIFETIME` after it
/// started.
#[utoipa::path(
    operation_id = "sign_in",
    tag = "meta",
    request_body(content = SessionIn, example = json!({"email": "alice.martin@example.com", "password": "correct horse battery staple"})),
    responses(
        (status = 201, description = "Signed in; the session cookie is set", body = SessionOut,
            headers(("Set-Cookie" = String, description = "`leadpipe_session=…; Path=/; Max-Age=…; HttpOnly; SameSite=Strict[; Secure]`")), example = json!(examples::session())),
        (status = 401, description = "`/problems/unauthorized`: wrong email or password, or the user is disabled"),
        (status = 429, description = "`/problems/too-many-requests`: too many sign-in attempts or failed authentications from this address; the password was not checked"),
    ),
)]
#[post("/api/session")]
async fn sign_in(
    req: HttpRequest,
    state: web::Data<AppState>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = read_json_bytes(&req, payload, state.http.body_limits()).await?;
    let input: SessionIn = parse_json(&body)?;
    // Before the check: over the limit, no guess is checked at all.
    state.limits.sign_in_attempt(client_address(&req))?;
    let Some(principal) = users::check_password(&state.db, &input.email, &input.password).await?
    else {
        return Err(ApiError::SignInFailed);
    };
    let lifetimes = state.http.sessions.lifetimes();
    // Sessions that are over go when someone signs in: no timer needed.
    session::prune(&state.db, lifetimes).await?;
    let started = session::start(&state.db, principal, lifetimes).await?;
    tracing::info!(principal = started.principal.id, "signed in");
    let cookie = set_cookie(
        &started.id,
        lifetimes.absolute.num_seconds(),
        over_tls(&req, &state.http.sessions),
    );
    let idle_expires_at = (domain::clock::now() + lifetimes.idle).min(started.expires_at);
    Ok(HttpResponse::Created()
        .insert_header((header::SET_COOKIE, cookie))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(SessionOut::new(
            started.principal,
            started.csrf_token,
            started.expires_at,
            idle_expires_at,
        )))
}

/// The page's session: who is signed in, until when, and its CSRF token.
///
/// By the session cookie only (a bearer token has no session: `401`).
#[utoipa::path(
    operation_id = "get_session",
    tag = "meta",
    responses(
        (status = 200, description = "The session", body = SessionOut, example = json!(examples::session())),
    ),
    security(("session" = ["sales", "ops", "admin"])),
)]
#[get("/api/session")]
async fn get_session(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let current = signed_in(&req, &state)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    // Only a request with the cookie got here: its id gives the token.
    let id = crate::http::session::session_cookie(&req).unwrap_or_default();
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(SessionOut::new(
            current.principal,
            session::csrf_token_for(&id),
            current.expires_at,
            current.idle_expires_at,
        )))
}

/// Sign out: end the page's session and remove its cookie.
///
/// By the session cookie, with its `X-CSRF-Token` (else `403
/// /problems/csrf-token-invalid`).
#[utoipa::path(
    operation_id = "sign_out",
    tag = "meta",
    responses(
        (status = 204, description = "Signed out; the cookie is removed",
            headers(("Set-Cookie" = String, description = "`leadpipe_session=; Path=/; Max-Age=0; …`"))),
    ),
    security(("session" = ["sales", "ops", "admin"])),
)]
#[delete("/api/session")]
async fn sign_out(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let current = signed_in(&req, &state)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    session::end(&state.db, current.row_id).await?;
    tracing::info!(principal = current.principal.id, "signed out");
    Ok(HttpResponse::NoContent()
        .insert_header((
            header::SET_COOKIE,
            clear_cookie(over_tls(&req, &state.http.sessions)),
        ))
        .finish())
}
