//! `reconcile_run` rows: starting a run (one per source at a time, decided by
//! a partial unique index), keeping its lease alive, and ending it.
//!
//! A run holds its source while `running`. Its process renews
//! `heartbeat_at` with every page (and while it waits to retry); a run whose
//! heartbeat is older than the lease belongs to a process that died, and is
//! marked `failed` by the next start or by any worker's scheduler pass. Every
//! write on a run is fenced on `state = 'running'`, so a process that wakes
//! up after losing its run cannot write into it, nor advance the cursor.

use crate::page::{self, IdWindow, Page};
use std::time::Duration;

use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, FromQueryResult, QueryFilter};

use crate::entities::reconcile_run::{self, Column, Model};
use crate::entities::source;

pub const RUNNING: &str = "running";
pub const DONE: &str = "done";
pub const FAILED: &str = "failed";
pub const STATES: [&str; 3] = [RUNNING, DONE, FAILED];

/// Who started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Api,
    Cli,
    Schedule,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Cli => "cli",
            Self::Schedule => "schedule",
        }
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct StartRun {
    pub source: String,
    pub dry_run: bool,
    /// `Some`: start from this cursor (`Some(None)`: from the very start)
    /// instead of the source's stored one.
    pub since: Option<Option<String>>,
    pub trigger: Trigger,
    /// A cron tick's claim (`schedule::tick_key`).
    pub tick_key: Option<String>,
    pub started_by: Option<i64>,
    /// How long a run may go without a heartbeat before it counts as dead.
    pub lease: Duration,
}

/// Why a run did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("no source '{0}'")]
    NoSuchSource(String),
    #[error("source '{0}' has no pull_url to reconcile from")]
    NoPullUrl(String),
    /// One run per source at a time; names the running one.
    #[error("a reconcile of '{}' is already running (run {})", .0.source, .0.id)]
    Running(Box<Model>),
    /// Another process already started the run for this cron tick.
    #[error("this tick was already claimed")]
    TickTaken,
    /// The database failed (`Error::Db`, "database error: …").
    #[error("{0}")]
    Db(#[from] crate::Error),
}

impl From<DbErr> for StartError {
    fn from(err: DbErr) -> Self {
        Self::Db(err.into())
    }
}

/// Inserts a `running` run for the source, or says why not. The insert
/// itself decides (`ON CONFLICT DO NOTHING` on the one-running-per-source
/// index and the tick key): no check-then-insert race.
pub async fn start<C: ConnectionTrait>(conn: &C, start: &StartRun) -> Result<Model, StartError> {
    let found = source::Entity::find_by_id(start.source.clone())
        .filter(source::Column::State.ne(crate::inbound::source::SourceState::Removed.as_str()))
        .one(conn)
        .await?
        .ok_or_else(|| StartError::NoSuchSource(start.source.clone()))?;
    if found.pull_url.is_none() {
        return Err(StartError::NoPullUrl(start.source.clone()));
    }
    fail_abandoned(conn, Some(&start.source), start.lease).await?;
    let cursor = match &start.since {
        Some(since) => since.clone(),
        None => found.reconcile_cursor.clone(),
    };
    // A run that finished between our insert and our look-up frees the
    // source: try again (a few times at most).
    for _ in 0..3 {
        if let Some(run) = insert(conn, start, cursor.clone()).await? {
            return Ok(run);
        }
        if let Some(tick_key) = &start.tick_key {
            let taken = reconcile_run::Entity::find()
                .filter(Column::TickKey.eq(tick_key.as_str()))
                .one(conn)
                .await?;
            if taken.is_some() {
                return Err(StartError::TickTaken);
            }
        }
        if let Some(running) = running(conn, &start.source).await? {
            return Err(StartError::Running(Box::new(running)));
        }
    }
    Err(StartError::from(DbErr::Custom(
        "could not start a reconcile run: the source's running run kept changing".into(),
    )))
}

async fn insert<C: ConnectionTrait>(
    conn: &C,
    start: &StartRun,
    cursor: Option<String>,
) -> Result<Option<Model>, DbErr> {
    let now = crate::clock::now();
    let mut insert = Query::insert();
    insert
        .into_table(reconcile_run::Entity)
        .columns([
            Column::Source,
            Column::State,
            Column::DryRun,
            Column::Trigger,
            Column::TickKey,
            Column::CursorStart,
            Column::Cursor,
            Column::StartedBy,
            Column::StartedAt,
            Column::HeartbeatAt,
        ])
        .values([
            start.source.clone().into(),
            RUNNING.into(),
            start.dry_run.into(),
            start.trigger.as_str().into(),
            start.tick_key.clone().into(),
            cursor.clone().into(),
            cursor.into(),
            start.started_by.into(),
            now.into(),
            now.into(),
        ])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        // No target: any unique index decides (the partial one-running index
        // or the tick key), on SQLite and PostgreSQL alike.
        .on_conflict(OnConflict::new().do_nothing().to_owned())
        .returning_all();
    let stmt = crate::store::statement(conn, &insert);
    Model::find_by_statement(stmt).one(conn).await
}

/// The source's running run, if any.
pub async fn running<C: ConnectionTrait>(
    conn: &C,
    source: &str,
) -> Result<Option<Model>, crate::Error> {
    Ok(reconcile_run::Entity::find()
        .filter(Column::Source.eq(source))
        .filter(Column::State.eq(RUNNING))
        .one(conn)
        .await?)
}

/// Marks runs whose heartbeat is older than `lease` failed (their process
/// died), for one source or all; returns how many.
pub async fn fail_abandoned<C: ConnectionTrait>(
    conn: &C,
    source: Option<&str>,
    lease: Duration,
) -> Result<u64, crate::Error> {
    let now = crate::clock::now();
    let cutoff = now - chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
    let mut update = reconcile_run::Entity::update_many()
        .col_expr(Column::State, Expr::val(FAILED))
        .col_expr(
            Column::Error,
            Expr::val(format!(
                "abandoned: no heartbeat for {}s (its process stopped)",
                lease.as_secs()
            )),
        )
        .col_expr(Column::FinishedAt, Expr::val(Some(now)))
        .filter(Column::State.eq(RUNNING))
        .filter(Column::HeartbeatAt.lt(cutoff));
    if let Some(source) = source {
        update = update.filter(Column::Source.eq(source));
    }
    let done = update.exec(conn).await?;
    if done.rows_affected > 0 {
        metrics::counter!("leadpipe_reconcile_runs_total", "source" => source.unwrap_or("").to_owned(), "state" => "abandoned")
            .increment(done.rows_affected);
    }
    Ok(done.rows_affected)
}

/// Renews the run's lease; `false` when the run is no longer ours (another
/// process marked it failed after its lease ran out).
pub async fn heartbeat<C: ConnectionTrait>(conn: &C, id: i64) -> Result<bool, crate::Error> {
    let done = reconcile_run::Entity::update_many()
        .col_expr(Column::HeartbeatAt, Expr::val(crate::clock::now()))
        .filter(Column::Id.eq(id))
        .filter(Column::State.eq(RUNNING))
        .exec(conn)
        .await?;
    Ok(done.rows_affected == 1)
}

/// Ends a running run as `done`, or as `failed` with `error`.
pub async fn finish<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    error: Option<&str>,
) -> Result<Option<Model>, crate::Error> {
    let now = crate::clock::now();
    let state = if error.is_some() { FAILED } else { DONE };
    let mut update = reconcile_run::Entity::update_many()
        .col_expr(Column::State, Expr::val(state))
        .col_expr(Column::FinishedAt, Expr::val(Some(now)))
        .col_expr(Column::HeartbeatAt, Expr::val(now))
        .filter(Column::Id.eq(id))
        .filter(Column::State.eq(RUNNING));
    if let Some(error) = error {
        update = update.col_expr(Column::Error, Expr::val(truncate(error, 1000)));
    }
    let done = update.exec(conn).await?;
    if done.rows_affected == 0 {
        return Ok(None);
    }
    find(conn, id).await
}

pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<Option<Model>, crate::Error> {
    Ok(reconcile_run::Entity::find_by_id(id).one(conn).await?)
}

/// Runs, newest first, optionally of one source and in one state.
pub async fn list<C: ConnectionTrait>(
    conn: &C,
    source: Option<&str>,
    state: Option<&str>,
    window: IdWindow,
) -> Result<Page<Model>, crate::Error> {
    let mut query = reconcile_run::Entity::find();
    if let Some(source) = source {
        query = query.filter(Column::Source.eq(source));
    }
    if let Some(state) = state {
        query = query.filter(Column::State.eq(state));
    }
    page::fetch_by_id(conn, query, Column::Id, window, |r| r.id).await
}

/// At most `max` bytes, cut at a character boundary.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// `Expr` for `col + n`, for the page counters.
pub(crate) fn add(col: Column, n: i64) -> (Column, sea_orm::sea_query::SimpleExpr) {
    (col, Expr::col(col).add(n))
}
