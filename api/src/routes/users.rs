//! `/api/users`: admins add users (people who sign in), list them, disable
//! them and set their passwords. Each is a principal: `/api/principals`
//! lists it too, and routing sends a `sales` user leads.
//!
//! No `Idempotency-Key` here: a repeat is harmless by itself (an email is
//! added once, `409` after; disabling and setting a password twice end
//! where once did), and a stored fingerprint of a body holding a password
//! would be a fast way to guess it.

use actix_web::http::header;
use actix_web::{HttpResponse, get, post, put, web};
use domain::users::{self, NewUser, Password};

use crate::http::auth::{AdminOnly, Caller};
use crate::http::error::ApiError;
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::Write;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::users::{PasswordIn, UserIn, UserOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list);
    cfg.service(add);
    cfg.service(disable);
    cfg.service(set_password);
}

/// Every user, oldest first (disabled ones too).
#[utoipa::path(
    operation_id = "list_users",
    tag = "meta",
    responses((status = 200, description = "Every user", body = Vec<UserOut>, example = json!(examples::users()))),
    security(("bearer" = ["admin"])),
)]
#[get("/api/users")]
async fn list(_: Caller<AdminOnly>, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let all: Vec<UserOut> = users::list(&state.db)
        .await?
        .into_iter()
        .map(UserOut::from)
        .collect();
    Ok(HttpResponse::Ok().json(all))
}

/// Add a user: a person who signs in with an email and a password.
///
/// The email is unique whatever its case (`409` when taken); the password
/// is stored as an argon2id hash. A `sales` user may be put in a `team`.
#[utoipa::path(
    operation_id = "add_user",
    tag = "meta",
    request_body(content = UserIn, example = json!({"name": "Alice Martin", "email": "alice.martin@example.com", "role": "sales", "team": "east", "password": "correct horse battery staple"})),
    responses(
        (status = 201, description = "Added", body = UserOut, headers(("Location" = String)), example = json!(examples::user_added())),
        (status = 409, description = "`/problems/conflict`: a user with this email exists"),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/users")]
async fn add(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    write: Write<UserIn>,
) -> Result<HttpResponse, ApiError> {
    let input = write.read().await?.input;
    let password = users::hash_password(Password::new(input.password)?).await?;
    let added = users::add(
        &state.db,
        NewUser {
            name: input.name,
            email: input.email,
            role: input.role,
            team: input.team,
            password,
        },
    )
    .await?;
    tracing::info!(user = added.principal.id, by = caller.id, "user added");
    let added = UserOut::from(added);
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, "/api/users"))
        .json(added))
}

/// Disable a user: it cannot sign in, its sessions end at once, and its
/// personal token is refused (servers that remember it accept it for at
/// most `LEADPIPE_AUTH_CACHE_SECS` more). Its leads keep its name.
#[utoipa::path(
    operation_id = "disable_user",
    tag = "meta",
    params(("id" = i64, Path, description = "The user's principal id")),
    responses(
        (status = 200, description = "The user, disabled", body = UserOut, example = json!(examples::user_disabled())),
        (status = 404, description = "`/problems/not-found`: no such user"),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/users/{id}/disable")]
async fn disable(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    let txn = state.db.begin_write().await?;
    let user = users::disable(&*txn, id)
        .await
        .map_err(|e| not_found(e, id))?;
    txn.commit().await?;
    tracing::info!(user = id, by = caller.id, "user disabled");
    Ok(HttpResponse::Ok().json(UserOut::from(user)))
}

/// Set a user's password; its sessions end (it signs in again).
#[utoipa::path(
    operation_id = "set_user_password",
    tag = "meta",
    params(("id" = i64, Path, description = "The user's principal id")),
    request_body(content = PasswordIn, example = json!({"password": "tr0mbone-ocean-lantern"})),
    responses(
        (status = 204, description = "Set"),
        (status = 404, description = "`/problems/not-found`: no such user"),
    ),
    security(("bearer" = ["admin"])),
)]
#[put("/api/users/{id}/password")]
async fn set_password(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    write: Write<PasswordIn>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    let input = write.read().await?.input;
    let password = users::hash_password(Password::new(input.password)?).await?;
    let txn = state.db.begin_write().await?;
    users::set_password(&*txn, id, password)
        .await
        .map_err(|e| not_found(e, id))?;
    txn.commit().await?;
    tracing::info!(user = id, by = caller.id, "user password set");
    Ok(HttpResponse::NoContent().finish())
}

fn not_found(err: domain::Error, id: i64) -> ApiError {
    match err {
        domain::Error::NotFound => ApiError::NotFound(format!("no user {id}")),
        other => other.into(),
    }
}
