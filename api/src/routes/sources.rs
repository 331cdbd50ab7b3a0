//! `/api/sources`: webhook source configuration. Admins write, ops read.
//! Secrets are write-only: no response ever contains one.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use actix_web::{get, post};
use domain::inbound::source::{self, NewSource, Saved};

use crate::http::auth::{AdminOnly, Caller, OpsUp};
use crate::http::body::read_json;
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::routes::Routes;

pub mod wire;

use wire::{SourceIn, SourceOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list_sources)
        .service(save_source)
        .service(get_source);
}

/// Every source, without secrets.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct SourceList {
    data: Vec<SourceOut>,
}

/// List webhook sources, without secrets.
#[utoipa::path(
    operation_id = "list_sources",
    tag = "sources",
    responses((status = 200, description = "Every source", body = SourceList)),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/sources")]
async fn list_sources(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let sources = source::list(&state.db).await?;
    let data = sources.into_iter().map(SourceOut::from).collect();
    Ok(HttpResponse::Ok().json(SourceList { data }))
}

/// One webhook source, without secrets.
#[utoipa::path(
    operation_id = "get_source",
    tag = "sources",
    params(("name" = String, Path, description = "The source's name")),
    responses(
        (status = 200, description = "The source", body = SourceOut),
        (status = 404, description = "`/problems/not-found`: no such source"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/sources/{name}")]
async fn get_source(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let found = source::find_stored(&state.db, &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no source '{name}'")))?;
    Ok(HttpResponse::Ok().json(SourceOut::from(found)))
}

/// Create a webhook source, or replace the configuration of the one with this name.
///
/// `secrets` are write-only (responses show `secret_count`) and stored
/// sealed; omit them on a replace to keep the stored ones, which must then
/// fit a new `scheme` (HMAC schemes: at least 16 bytes, never `whpk_`/`whsk_`
/// keys). A `pull_url` on another origin needs `pull_auth_secret` again.
/// To rotate, list the new secret with the old, switch the sender, then list
/// the new one alone. Without a sealing key on the server:
/// `503 /problems/secret-key-missing`.
#[utoipa::path(
    operation_id = "save_source",
    tag = "sources",
    request_body = SourceIn,
    responses(
        (status = 201, description = "Created", body = SourceOut, headers(("Location" = String))),
        (status = 200, description = "The configuration was replaced", body = SourceOut),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/sources")]
async fn save_source(
    _: Caller<AdminOnly>,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let input: SourceIn = read_json(&req, body, state.http.body_limits()).await?;
    let new = NewSource::parse(input.into(), &state.http.outbound_policy())?;
    let (saved, how) = source::upsert(&state.db, new, &state.http.keyring).await?;
    let saved = SourceOut::from(saved);
    tracing::info!(source = %saved.name, scheme = %saved.scheme, created = how == Saved::Created, "source saved");
    Ok(match how {
        Saved::Created => HttpResponse::Created()
            .insert_header((header::LOCATION, format!("/api/sources/{}", saved.name)))
            .json(saved),
        Saved::Updated => HttpResponse::Ok().json(saved),
    })
}
