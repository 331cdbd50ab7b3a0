//! `/api/sources`: webhook source configuration. Admins write, ops read.
//! Secrets are write-only: no response ever contains one. Creating (`POST`)
//! and changing (`PATCH`) are different verbs, so a create never replaces a
//! working configuration.
//!
//! Neither takes an `Idempotency-Key`: their bodies carry secrets, and the
//! key's fingerprint is a plain hash of the body. A repeated `POST` is `409`
//! and changes nothing; a repeated `PATCH` sets the same fields again.

use actix_web::http::header;
use actix_web::{HttpRequest, delete, get, patch, post};
use actix_web::{HttpResponse, web};
use domain::inbound::signature::Scheme;
use domain::inbound::source::state::{self as source_state, SourceState};
use domain::inbound::source::{self, NewSource, SourceConfig, SourcePatch};

use crate::http::auth::{AdminOnly, Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{etag, if_match_version, ok_tagged};
use crate::http::params::IfMatch;
use crate::http::state::AppState;
use crate::http::write::Write;
use crate::routes::Routes;

use crate::openapi::examples;
use crate::wire::sources as wire;

use wire::SourceList;
use wire::SourceOut;
use wire::SourceRemovedOut;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list_sources)
        .service(create_source)
        .service(get_source)
        .service(patch_source)
        .service(delete_source)
        .service(pause_source)
        .service(resume_source);
}

/// List webhook sources, without secrets.
#[utoipa::path(
    operation_id = "list_sources",
    tag = "sources",
    responses((status = 200, description = "Every source", body = SourceList, example = json!(examples::source_list()))),
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
        (status = 200, description = "The source", body = SourceOut, headers(("ETag" = String)), example = json!(examples::source())),
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
    Ok(ok_tagged(&SourceOut::from(found)))
}

/// Create a webhook source.
///
/// `secrets` are write-only (responses show `secret_count`) and stored
/// sealed. A name that exists is `409`: change a source with `PATCH
/// /api/sources/{name}`, which keeps what it does not name. Without a
/// sealing key on the server: `503 /problems/secret-key-missing`.
#[utoipa::path(
    operation_id = "create_source",
    tag = "sources",
    request_body(content = SourceConfig, example = json!({"name": "partner", "scheme": "github", "secrets": ["f3c1b7a94e2d4c0a9b8e7d6c5b4a3921"], "event_type_header": "x-github-event", "allowed_event_types": ["lead.created", "lead.updated"], "record_pointer": "/lead", "source_ref_pointer": "/id", "email_pointer": "/contact/email", "name_pointer": "/contact/name", "updated_at_pointer": "/updated_at", "pull_url": "https://api.partner.example/v1/leads", "pull_auth_header": "authorization", "pull_auth_secret": "Bearer pk_test_partner_example", "pull_page_size": 200, "cron": "0 */15 * * * *"})),
    responses(
        (status = 201, description = "Created", body = SourceOut, headers(("Location" = String), ("ETag" = String)), example = json!(examples::source())),
        (status = 409, description = "`/problems/conflict`: a source of this name exists (change it with `PATCH`)"),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/sources")]
async fn create_source(
    _: Caller<AdminOnly>,
    state: web::Data<AppState>,
    write: Write<SourceConfig>,
) -> Result<HttpResponse, ApiError> {
    let input = write.read().await?.input;
    let name = input.name.trim().to_owned();
    needs_public_url(&state, Some(&input.scheme))?;
    let new = NewSource::parse(input, &state.http.outbound_policy())?;
    let created = source::create(&state.db, new, &state.http.keyring)
        .await
        .map_err(|err| match err {
            domain::Error::Conflict(message) => ApiError::Conflict(format!(
                "{message}; change it with PATCH /api/sources/{name}"
            )),
            other => other.into(),
        })?;
    let created = SourceOut::from(created);
    tracing::info!(source = %created.name, scheme = %created.scheme, "source created");
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/api/sources/{}", created.name)))
        .insert_header((header::ETAG, etag(created.version)))
        .json(created))
}

/// A `hubspot-v3` source verifies nothing without the service's public
/// URL (HubSpot signs the URL it called): refused rather than saved to
/// refuse every delivery.
fn needs_public_url(state: &AppState, scheme: Option<&str>) -> Result<(), ApiError> {
    let hubspot = scheme.and_then(|s| s.parse::<Scheme>().ok()) == Some(Scheme::HubspotV3);
    if hubspot && state.http.public_base().is_none() {
        return Err(domain::Error::invalid(
            "scheme",
            "hubspot-v3 signs the full URL it called, which this server cannot know: set \
             LEADPIPE_PUBLIC_URL (the public base URL senders call) and restart first",
        )
        .into());
    }
    Ok(())
}

/// Change a webhook source: only the fields given.
///
/// Fields left out stay as they are; `null` puts one back to its default.
/// A new `scheme` needs new `secrets` (`422` naming `secrets` without them:
/// secrets are checked against the scheme they are for). Secrets may be
/// replaced alone. `If-Match` with the `ETag` of `GET /api/sources/{name}`
/// makes the change apply only to that version (`412` otherwise). The
/// response, like every other, shows no secret.
#[utoipa::path(
    operation_id = "patch_source",
    tag = "sources",
    params(("name" = String, Path, description = "The source's name"), IfMatch),
    request_body(content = SourcePatch, example = json!({"allowed_event_types": ["lead.created", "lead.updated", "lead.deleted"], "tolerance_secs": 600})),
    responses(
        (status = 200, description = "The source after the change", body = SourceOut, headers(("ETag" = String)), example = json!(examples::source_changed())),
        (status = 404, description = "`/problems/not-found`: no such source"),
        (status = 412, description = "`/problems/precondition-failed`: the source changed since the `ETag` given"),
        (status = 422, description = "`/problems/validation`: a field does not fit, or a new `scheme` without `secrets`"),
    ),
    security(("bearer" = ["admin"])),
)]
#[patch("/api/sources/{name}")]
async fn patch_source(
    _: Caller<AdminOnly>,
    state: web::Data<AppState>,
    name: web::Path<String>,
    write: Write<SourcePatch>,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let write = write.read().await?;
    needs_public_url(&state, write.input.scheme.as_deref())?;
    let if_match = if_match_version(write.request());
    let changed = source::update(
        &state.db,
        &name,
        write.input,
        &if_match,
        &state.http.outbound_policy(),
        &state.http.keyring,
    )
    .await
    .map_err(|err| match err {
        domain::Error::NotFound => ApiError::NotFound(format!("no source '{name}'")),
        other => other.into(),
    })?;
    let changed = SourceOut::from(changed);
    tracing::info!(source = %changed.name, scheme = %changed.scheme, version = changed.version, "source changed");
    Ok(ok_tagged(&changed))
}

/// Remove a webhook source.
///
/// Its secrets and pull settings are deleted; later deliveries to
/// `/webhooks/{name}` get the same `401` as any unknown name. Its inbox
/// events and leads stay (under retention); those of its events still
/// waiting end `dead` (`last_error`: "the source was removed"), and the
/// intake tokens bound to it are revoked (servers that remember a token
/// accept it for at most `LEADPIPE_AUTH_CACHE_SECS` more). A source created
/// later under the same name starts afresh. `If-Match` with its `ETag`
/// removes it only at that version (`412` otherwise).
#[utoipa::path(
    operation_id = "delete_source",
    tag = "sources",
    params(("name" = String, Path, description = "The source's name"), IfMatch),
    responses(
        (status = 200, description = "Removed, and what went with it", body = SourceRemovedOut, example = json!(examples::source_removed())),
        (status = 404, description = "`/problems/not-found`: no such source"),
        (status = 412, description = "`/problems/precondition-failed`: the source changed since the `ETag` given"),
    ),
    security(("bearer" = ["admin"])),
)]
#[delete("/api/sources/{name}")]
async fn delete_source(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    req: HttpRequest,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let if_match = if_match_version(&req);
    let txn = state.db.begin_write().await?;
    let removal = source_state::remove(&*txn, &name, &if_match)
        .await
        .map_err(|err| not_found(err, &name))?;
    txn.commit().await?;
    tracing::info!(
        source = %name,
        principal = caller.id,
        revoked_intake_principals = removal.revoked_intake_principals,
        abandoned_events = removal.abandoned_events,
        "source removed"
    );
    Ok(HttpResponse::Ok().json(SourceRemovedOut {
        name,
        revoked_intake_principals: removal.revoked_intake_principals,
        abandoned_events: removal.abandoned_events,
    }))
}

/// Pause a webhook source: its deliveries are held, not processed.
///
/// While paused, deliveries are verified, stored and answered as ever
/// (`202`), but the inbox workers leave its events (other sources' events
/// go on); they do not count towards `LEADPIPE_INBOX_BACKLOG_LIMIT`.
/// Resuming processes them in the order they arrived. Pausing a paused
/// source changes nothing. `If-Match` as for `PATCH`.
#[utoipa::path(
    operation_id = "pause_source",
    tag = "sources",
    params(("name" = String, Path, description = "The source's name"), IfMatch),
    responses(
        (status = 200, description = "The source, `state: paused`", body = SourceOut, headers(("ETag" = String)), example = json!(examples::source_paused())),
        (status = 404, description = "`/problems/not-found`: no such source"),
        (status = 412, description = "`/problems/precondition-failed`: the source changed since the `ETag` given"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/sources/{name}/pause")]
async fn pause_source(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    req: HttpRequest,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    set_state(
        caller.id,
        &state,
        &req,
        name.into_inner(),
        SourceState::Paused,
    )
    .await
}

/// Resume a paused webhook source: its held events are processed, in the
/// order they arrived.
///
/// Resuming an active source changes nothing. `If-Match` as for `PATCH`.
#[utoipa::path(
    operation_id = "resume_source",
    tag = "sources",
    params(("name" = String, Path, description = "The source's name"), IfMatch),
    responses(
        (status = 200, description = "The source, `state: active`", body = SourceOut, headers(("ETag" = String)), example = json!(examples::source())),
        (status = 404, description = "`/problems/not-found`: no such source"),
        (status = 412, description = "`/problems/precondition-failed`: the source changed since the `ETag` given"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/sources/{name}/resume")]
async fn resume_source(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    req: HttpRequest,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    set_state(
        caller.id,
        &state,
        &req,
        name.into_inner(),
        SourceState::Active,
    )
    .await
}

async fn set_state(
    principal: i64,
    state: &AppState,
    req: &HttpRequest,
    name: String,
    to: SourceState,
) -> Result<HttpResponse, ApiError> {
    let changed = source_state::set_state(&state.db, &name, to, &if_match_version(req))
        .await
        .map_err(|err| not_found(err, &name))?;
    if to == SourceState::Active {
        // Its held events are claimable now.
        state.db.enqueued(domain::store::Work::Inbox);
    }
    tracing::info!(source = %name, principal, state = %to, "source state set");
    Ok(ok_tagged(&SourceOut::from(changed)))
}

fn not_found(err: domain::Error, name: &str) -> ApiError {
    match err {
        domain::Error::NotFound => ApiError::NotFound(format!("no source '{name}'")),
        other => other.into(),
    }
}
