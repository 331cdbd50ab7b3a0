//! `/api/ops/reconcile/{source}` and `/api/ops/reconcile-runs`: start a
//! reconcile run and watch it (ops and admin). The run executes in the
//! background; its row shows the counts page by page.

use crate::wire::reconcile as wire;

use actix_web::{get, post};
use std::cell::RefCell;
use std::rc::Rc;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use domain::entities::reconcile_run;
use domain::reconcile::run::{self, StartError, StartRun, Trigger};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply};
use crate::http::list::{ListParams, listed, one_of};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::Write;
use crate::openapi::examples;
use crate::routes::Routes;

pub use wire::ReconcileRunOut;
use wire::{Filter, StartIn};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(start).service(list).service(get);
}

impl StartIn {
    fn since(&self) -> Result<Option<Option<String>>, ApiError> {
        match (&self.since, self.from_start) {
            (Some(_), true) => Err(ApiError::invalid(
                "from_start",
                "give either since or from_start, not both",
            )),
            (Some(since), false) => Ok(Some(Some(since.clone()))),
            (None, true) => Ok(Some(None)),
            (None, false) => Ok(None),
        }
    }
}

fn location(id: i64) -> String {
    format!("/api/ops/reconcile-runs/{id}")
}

/// Starts a run: `202 Accepted` with the run and `Location`; `409
/// /problems/reconcile-running` (with `run_id`) while one is running.
///
/// Pages through the source's pull API from its cursor, each page through
/// the same write path as webhooks in one transaction; records it had to
/// create or update count as `missed`. An empty body starts a normal run.
#[utoipa::path(
    operation_id = "start_reconcile",
    tag = "ops",
    params(("source" = String, Path, description = "The source's name")),
    request_body(content = Option<StartIn>, content_type = "application/json", example = json!({"dry_run": true})),
    responses(
        (status = 202, description = "The run, started; `Location` names it", body = ReconcileRunOut, example = json!(examples::reconcile_run_started())),
        (status = 404, description = "`/problems/not-found`: no such source"),
        (status = 409, description = "`/problems/reconcile-running`: one is running; `run_id` names it"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[post("/api/ops/reconcile/{source}")]
async fn start(
    caller: Caller<OpsUp>,
    state: web::Data<AppState>,
    source: web::Path<String>,
    write: Write<StartIn>,
) -> Result<HttpResponse, ApiError> {
    let source = source.into_inner();
    let lease = state.reconciler.settings().lease;
    // The body may be left out: a run with the defaults.
    let write = write.read_or_default().await?.try_map(|input| {
        Ok(StartRun {
            source: source.clone(),
            dry_run: input.dry_run,
            since: input.since()?,
            trigger: Trigger::Api,
            tick_key: None,
            started_by: Some(caller.id),
            lease,
        })
    })?;
    // Set when this request (not a replay) started a run; executed once
    // the run's row has committed.
    let started: Rc<RefCell<Option<reconcile_run::Model>>> = Rc::default();
    let slot = started.clone();
    let response = write
        .run(&caller, KeyRule::Optional, move |txn, start, _| {
            Box::pin(async move {
                let run = run::start(txn, &start).await.map_err(start_error)?;
                let reply = Reply::new(StatusCode::ACCEPTED, &ReconcileRunOut::from(&run))?
                    .location(location(run.id));
                *slot.borrow_mut() = Some(run);
                Ok(reply)
            })
        })
        .await?;
    if let Some(run) = started.take() {
        tracing::info!(run_id = run.id, source = %run.source, dry_run = run.dry_run, principal = caller.id, "reconcile started");
        let reconciler = state.reconciler.clone();
        tokio::spawn(async move {
            let run_id = run.id;
            if let Err(error) = reconciler.execute(run, |_| {}).await {
                tracing::warn!(run_id, %error, "reconcile run ended badly");
            }
        });
    }
    Ok(response)
}

fn start_error(err: StartError) -> ApiError {
    match err {
        StartError::NoSuchSource(name) => ApiError::NotFound(format!("no source '{name}'")),
        StartError::NoPullUrl(name) => ApiError::invalid(
            "source",
            format!(
                "has no pull_url: set one on the source (PATCH /api/sources/{name}) to reconcile it"
            ),
        ),
        StartError::Running(run) => ApiError::ReconcileRunning {
            run_id: run.id,
            message: format!(
                "a reconcile of '{}' is already running: run {}",
                run.source, run.id
            ),
        },
        StartError::TickTaken => ApiError::internal("a run started over HTTP carries no tick"),
        StartError::Db(e) => e.into(),
    }
}

/// One reconcile run, with its counts so far.
#[utoipa::path(
    operation_id = "get_reconcile_run",
    tag = "ops",
    params(("id" = i64, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The run", body = ReconcileRunOut, example = json!(examples::reconcile_run())),
        (status = 404, description = "`/problems/not-found`: no such run"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/reconcile-runs/{id}")]
async fn get(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    let run = run::find(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no reconcile run {id}")))?;
    Ok(HttpResponse::Ok().json(ReconcileRunOut::from(&run)))
}

listed! {
    "A page of reconcile runs." type RunPage = Page<ReconcileRunOut>;
}

/// Runs, newest first; `cursor` continues after the previous page's last run.
#[utoipa::path(
    operation_id = "list_reconcile_runs",
    tag = "ops",
    params(Filter, ListParams),
    responses((status = 200, description = "A page of runs", body = RunPage, example = json!(examples::reconcile_run_page()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/reconcile-runs")]
async fn list(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    one_of("state", filter.state.as_deref(), &run::STATES)?;
    let runs = run::list(
        state.reads.db(),
        filter.source.as_deref(),
        filter.state.as_deref(),
        page.id_window()?,
    )
    .await?;
    let page = runs.map(|r| ReconcileRunOut::from(&r));
    Ok(HttpResponse::Ok().json(page))
}
