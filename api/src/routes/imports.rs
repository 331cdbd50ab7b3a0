//! `/api/imports`: bulk import over HTTP (ops, admin). The raw body (CSV or
//! NDJSON) streams to a temporary file under its own size limit, then runs
//! in the background exactly as `leadpipe import` does; the client polls
//! `GET /api/imports/{id}` and downloads `GET /api/imports/{id}/report.csv`.

use std::path::PathBuf;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use domain::auth::Role;
use domain::entities::import_run;
use domain::import::{self, Format, ImportSpec, Mapping, report};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use crate::auth::Authenticated;
use crate::error::ApiError;
use crate::startup::AppState;

const OPS_AND_UP: &[Role] = &[Role::Ops, Role::Admin];
/// Report rows fetched per query while streaming the CSV.
const REPORT_PAGE: u64 = 1000;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/imports")
            .route("", web::post().to(start))
            .route("", web::get().to(list))
            .route("/{id}", web::get().to(get))
            .route("/{id}/report.csv", web::get().to(report_csv)),
    );
}

#[derive(Serialize)]
struct RunOut {
    #[serde(flatten)]
    run: import_run::Model,
    report_url: String,
}

impl From<import_run::Model> for RunOut {
    fn from(run: import_run::Model) -> Self {
        let report_url = format!("/api/imports/{}/report.csv", run.id);
        Self { run, report_url }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartParams {
    source: String,
    /// `source_ref=Column,email=Column,…`
    map: Option<String>,
    #[serde(default)]
    dry_run: bool,
    /// Kept on the run for the operator's benefit.
    file_name: Option<String>,
}

fn format_of(req: &HttpRequest) -> Result<Format, ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "text/csv" => Ok(Format::Csv),
        "application/x-ndjson" | "application/ndjson" | "application/jsonl" => Ok(Format::Ndjson),
        _ => Err(ApiError::UnsupportedImportType),
    }
}

/// A temporary file that is removed when dropped.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Streams the body to a temporary file, refusing more than `limit` bytes.
async fn spool(mut payload: web::Payload, limit: usize) -> Result<TempFile, ApiError> {
    let path = std::env::temp_dir().join(format!("leadpipe-import-{}", uuid::Uuid::now_v7()));
    let temp = TempFile(path);
    let mut file = tokio::fs::File::create(&temp.0)
        .await
        .map_err(ApiError::internal)?;
    let mut written = 0usize;
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::MalformedBody(format!("could not read body: {e}")))?;
        written += chunk.len();
        if written > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        file.write_all(&chunk).await.map_err(ApiError::internal)?;
    }
    file.flush().await.map_err(ApiError::internal)?;
    Ok(temp)
}

/// Starts an import: `202 Accepted`, `Location: /api/imports/{id}`.
async fn start(
    caller: Authenticated,
    state: web::Data<AppState>,
    req: HttpRequest,
    params: web::Query<StartParams>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    let format = format_of(&req)?;
    let params = params.into_inner();
    let mapping = Mapping::parse(params.map.as_deref().unwrap_or(""))?;
    let limit = state.http.import_max_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let temp = spool(payload, limit).await?;
    let spec = ImportSpec {
        source: params.source,
        format,
        mapping,
        dry_run: params.dry_run,
        file_name: params.file_name,
        started_by: Some(caller.id),
        batch_size: import::DEFAULT_BATCH_SIZE,
    };
    let prepared = import::prepare(&state.db, &spec, &temp.0).await?;
    let run = prepared.run.clone();
    let db = state.db.clone();
    tokio::spawn(async move {
        // The temporary file lives until the import is done with it.
        let _temp = temp;
        if let Err(err) = import::execute(&db, prepared, spec.batch_size, |_| {}).await {
            tracing::error!(error = %err, "import failed");
        }
    });
    let location = format!("/api/imports/{}", run.id);
    Ok(HttpResponse::build(StatusCode::ACCEPTED)
        .insert_header((header::LOCATION, location))
        .json(RunOut::from(run)))
}

async fn get(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    let run = import::find_run(&state.db, id.into_inner()).await?;
    Ok(HttpResponse::Ok().json(RunOut::from(run)))
}

#[derive(Deserialize)]
struct ListParams {
    limit: Option<u64>,
    cursor: Option<String>,
}

#[derive(Serialize)]
struct RunPage {
    data: Vec<RunOut>,
    next_cursor: Option<String>,
}

/// Runs, newest first. The cursor is the last run's id.
async fn list(
    caller: Authenticated,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    let limit = domain::lead_query::clamp_limit(params.limit);
    let before = params
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<i64>().map_err(|_| {
                ApiError::Validation(vec![domain::FieldError::new(
                    "cursor",
                    "is not a cursor this API returned",
                )])
            })
        })
        .transpose()?;
    let mut runs = import::list_runs(&state.db, limit + 1, before).await?;
    let next_cursor = if runs.len() as u64 > limit {
        runs.truncate(limit as usize);
        runs.last().map(|r| r.id.to_string())
    } else {
        None
    };
    Ok(HttpResponse::Ok().json(RunPage {
        data: runs.into_iter().map(RunOut::from).collect(),
        next_cursor,
    }))
}

/// The per-row report, streamed page by page: `row,line,source_ref,outcome,lead_id,reason`.
async fn report_csv(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    let run = import::find_run(&state.db, id.into_inner()).await?;
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
