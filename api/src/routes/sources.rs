//! `/api/sources`: webhook source configuration. Admins write, ops read.
//! Secrets are write-only: no response ever contains one.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use actix_web::{get, post};
use domain::inbound::source::{self, Saved, SourceInput};

use crate::http::auth::{AdminOnly, Caller, OpsUp};
use crate::http::body::read_json;
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::routes::Routes;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list_sources)
        .service(save_source)
        .service(get_source);
}

/// Every source, without secrets.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct SourceList {
    data: Vec<domain::inbound::source::SourceView>,
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
    Ok(HttpResponse::Ok().json(SourceList { data: sources }))
}

/// One webhook source, without secrets.
#[utoipa::path(
    operation_id = "get_source",
    tag = "sources",
    params(("name" = String, Path, description = "The source's name")),
    responses(
        (status = 200, description = "The source", body = domain::inbound::source::SourceView),
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
    let found = source::find_view(&state.db, &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no source '{name}'")))?;
    Ok(HttpResponse::Ok().json(found))
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
    request_body = domain::inbound::source::SourceInput,
    responses(
        (status = 201, description = "Created", body = domain::inbound::source::SourceView, headers(("Location" = String))),
        (status = 200, description = "The configuration was replaced", body = domain::inbound::source::SourceView),
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
    let input: SourceInput = read_json(&req, body, state.http.max_body_bytes).await?;
    let (saved, how) = source::upsert_with(
        &state.db,
        input,
        &state.http.outbound_policy(),
        &state.http.keyring,
    )
    .await?;
    tracing::info!(source = %saved.name, scheme = %saved.scheme, created = how == Saved::Created, "source saved");
    Ok(match how {
        Saved::Created => HttpResponse::Created()
            .insert_header((header::LOCATION, format!("/api/sources/{}", saved.name)))
            .json(saved),
        Saved::Updated => HttpResponse::Ok().json(saved),
    })
}
