//! `/api/sources`: webhook source configuration. Admins write, ops read.
//! Secrets are write-only: no response ever contains one.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::auth::Role;
use domain::source::{self, Saved, SourceInput};

use crate::auth::Authenticated;
use crate::body::read_json;
use crate::error::ApiError;
use crate::startup::AppState;

const READERS: &[Role] = &[Role::Ops, Role::Admin];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/sources")
            .route("", web::get().to(list_sources))
            .route("", web::post().to(save_source))
            .route("/{name}", web::get().to(get_source)),
    );
}

async fn list_sources(
    caller: Authenticated,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(READERS)?;
    let sources = source::list(&state.db).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "data": sources })))
}

async fn get_source(
    caller: Authenticated,
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(READERS)?;
    let name = name.into_inner();
    let found = source::find_view(&state.db, &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no source '{name}'")))?;
    Ok(HttpResponse::Ok().json(found))
}

/// Creates the source (`201`) or replaces the configuration of the one with
/// this name (`200`); `secrets` may be omitted on a replace to keep them.
async fn save_source(
    caller: Authenticated,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(&[Role::Admin])?;
    let input: SourceInput = read_json(&req, body, state.http.max_body_bytes).await?;
    let (saved, how) = source::upsert_with(&state.db, input, &state.http.outbound_policy()).await?;
    tracing::info!(source = %saved.name, scheme = %saved.scheme, created = how == Saved::Created, "source saved");
    Ok(match how {
        Saved::Created => HttpResponse::Created()
            .insert_header((header::LOCATION, format!("/api/sources/{}", saved.name)))
            .json(saved),
        Saved::Updated => HttpResponse::Ok().json(saved),
    })
}
