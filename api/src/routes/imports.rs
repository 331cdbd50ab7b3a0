//! `/api/imports`: bulk import over HTTP (ops, admin). The raw body (CSV or
//! NDJSON) streams to a temporary file under its own size limit, then runs
//! in the background exactly as `leadpipe import` does; the client polls
//! `GET /api/imports/{id}` and downloads `GET /api/imports/{id}/report.csv`.

use crate::wire::imports as wire;

use crate::http::body::{BodyPace, PacedBody};
use crate::http::path_id::PathId;
use crate::http::spool::Spool;
use crate::routes::Routes;
use actix_web::{get, post};
use futures::StreamExt;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use domain::auth::Role;
use domain::import::{self, Format, ImportSpec, Mapping, report};
use tokio::io::AsyncWriteExt;

use crate::http::auth::{Caller, OpsUp};
use crate::http::body::declared_length;
use crate::http::error::ApiError;
use crate::http::list::{ListParams, listed};
use crate::http::state::AppState;
use crate::openapi::examples;
use wire::{RunOut, StartParams};

/// Report rows fetched per query while streaming the CSV.
const REPORT_PAGE: u64 = 1000;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(start)
        .service(list)
        .service(get)
        .service(report_csv);
}

fn format_of(req: &HttpRequest) -> Result<Format, ApiError> {
    match crate::http::body::media_type(req).as_str() {
        "text/csv" => Ok(Format::Csv),
        "application/x-ndjson" | "application/ndjson" | "application/jsonl" => Ok(Format::Ndjson),
        _ => Err(ApiError::UnsupportedImportType),
    }
}

/// Streams the body to a spool file (0600, removed when dropped), refusing
/// more than `limit` bytes.
async fn spool(
    payload: web::Payload,
    limit: usize,
    pace: BodyPace,
    dir: &std::path::Path,
) -> Result<Spool, ApiError> {
    let temp = Spool::create(dir).map_err(ApiError::internal)?;
    let mut file = tokio::fs::File::from_std(temp.writer().map_err(ApiError::internal)?);
    let mut written = 0usize;
    let mut paced = PacedBody::new(payload, pace);
    while let Some(chunk) = paced.next_chunk().await? {
        written += chunk.len();
        if written > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        file.write_all(&chunk).await.map_err(ApiError::internal)?;
    }
    file.flush().await.map_err(ApiError::internal)?;
    Ok(temp)
}

/// Start a bulk import of a CSV or NDJSON file.
///
/// The body streams to a temporary file (at most `LEADPIPE_IMPORT_MAX_BYTES`,
/// default 64 MiB), then runs in the background through the intake write
/// path (origin `import`) in transactions of 500 rows; poll the run. Safe to
/// re-run: the same file changes nothing, a corrected file only its changed
/// rows.
#[utoipa::path(
    operation_id = "start_import",
    tag = "imports",
    params(StartParams),
    request_body(description = "The file: CSV with a header row, or NDJSON (one object per line)",
        content((inline(crate::http::params::Binary) = "text/csv"), (inline(crate::http::params::Binary) = "application/x-ndjson"))),
    responses(
        (status = 202, description = "Accepted; the run is `running`", body = RunOut, headers(("Location" = String)), example = json!(examples::import_started())),
        (status = 400, description = "`/problems/malformed-body`: the body could not be read"),
        (status = 413, description = "`/problems/payload-too-large`: the file is over `LEADPIPE_IMPORT_MAX_BYTES`"),
        (status = 415, description = "`/problems/unsupported-media-type`: `Content-Type` is not `text/csv` or `application/x-ndjson`"),
        (status = 422, description = "`/problems/validation`: a bad mapping or query parameter, or a CSV without a `source_ref` column"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/imports")]
async fn start(
    // Who may import (the extractor), then how big, then what: a caller
    // without the role learns nothing about the parameters.
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let limit = state.http.import_max_bytes;
    let declared = declared_length(&req);
    if declared.is_some_and(|len| len > limit) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let format = format_of(&req)?;
    let params = web::Query::<StartParams>::from_query(req.query_string())
        .map_err(|err| ApiError::invalid("query", err.to_string()))?
        .into_inner();
    let mapping = Mapping::parse(params.map.as_deref().unwrap_or(""))?;
    // A malformed name is a validation error (422) from `prepare`, not a
    // question of permission.
    if caller.role != Role::Admin
        && domain::source_name::is_valid_source_name(&params.source)
        && !import::is_configured_source(&state.db, &params.source).await?
    {
        return Err(ApiError::Forbidden(format!(
            "ops may import only for a configured source (a webhook source, or the source of an intake token); '{}' is neither. An admin may import for any source.",
            params.source
        )));
    }
    let spool_dir = crate::http::spool::dir(state.http.spool_dir.as_deref());
    let temp = spool(payload, limit, state.http.body_pace(), &spool_dir).await?;
    let spec = ImportSpec {
        source: params.source,
        format,
        mapping,
        dry_run: params.dry_run,
        file_name: params.file_name,
        started_by: Some(caller.id),
        batch_size: import::DEFAULT_BATCH_SIZE,
    };
    let prepared = import::prepare(&state.db, &spec, temp.path()).await?;
    let run = prepared.run.clone();
    state.imports.spawn(move |db, stop| async move {
        // The temporary file lives until the import is done with it.
        let _temp = temp;
        // Each committed chunk that wrote leads wakes the lead drain itself.
        if let Err(err) = import::execute_until(&db, prepared, spec.batch_size, |_| {}, stop).await
        {
            tracing::error!(error = %err, "import failed");
        }
    });
    let location = format!("/api/imports/{}", run.id);
    Ok(HttpResponse::build(StatusCode::ACCEPTED)
        .insert_header((header::LOCATION, location))
        .json(RunOut::from(run)))
}

/// One import run: state, counts, progress.
#[utoipa::path(
    operation_id = "get_import",
    tag = "imports",
    params(("id" = i64, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The run", body = RunOut, example = json!(examples::import_run())),
        (status = 404, description = "`/problems/not-found`: no such run"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/imports/{id}")]
async fn get(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let run = import::find_run(&state.db, id.into_inner().0).await?;
    Ok(HttpResponse::Ok().json(RunOut::from(run)))
}

listed! {
    "A page of import runs." type ImportRunPage = Page<RunOut>;
}

/// List import runs, newest first.
#[utoipa::path(
    operation_id = "list_imports",
    tag = "imports",
    params(ListParams),
    responses((status = 200, description = "A page of runs", body = ImportRunPage, example = json!(examples::import_run_page()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/imports")]
async fn list(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let page = import::list_runs(state.reads.db(), page.id_window()?).await?;
    Ok(HttpResponse::Ok().json(page.map(RunOut::from)))
}

/// The per-row report of an import, as CSV.
///
/// Columns `row,line,source_ref,outcome,lead_id,reason`; `outcome` is
/// `created`, `updated`, `unchanged`, `stale` or `rejected` (with the reason).
#[utoipa::path(
    operation_id = "get_import_report",
    tag = "imports",
    params(("id" = i64, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The report, streamed", content_type = "text/csv", body = String),
        (status = 404, description = "`/problems/not-found`: no such run"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/imports/{id}/report.csv")]
async fn report_csv(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let run = import::find_run(&state.db, id.into_inner().0).await?;
    let db = state.db.clone();
    let run_id = run.id;
    let header_chunk =
        futures::stream::once(async { Ok::<_, ApiError>(web::Bytes::from(report::HEADER)) });
    let rows = futures::stream::try_unfold(Some(0i64), move |after| {
        let db = db.clone();
        async move {
            let Some(after) = after else {
                return Ok(None);
            };
            let page = import::report_rows(&db, run_id, after, REPORT_PAGE).await?;
            let Some(last) = page.last().map(|r| r.row_number) else {
                return Ok(None);
            };
            let next = (page.len() as u64 == REPORT_PAGE).then_some(last);
            Ok::<_, ApiError>(Some((web::Bytes::from(report::to_csv(&page)), next)))
        }
    });
    Ok(HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"import-{run_id}-report.csv\""),
        ))
        .streaming(header_chunk.chain(rows)))
}
