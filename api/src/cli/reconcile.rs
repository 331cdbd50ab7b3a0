//! `leadpipe reconcile --source S [--dry-run] [--since CURSOR]`: one run in
//! this process, with a progress bar, then a summary table. The run is an
//! ordinary `reconcile_run` row: a scheduled or API run of the same source
//! makes this one refuse to start, and the other way round.
//! `leadpipe reconcile retry-rejected [--source S]` re-applies the records
//! runs rejected, after a mapping fix.

use anyhow::Context;
use clap::{Args, Subcommand};
use domain::entities::reconcile_run::Model as Run;
use domain::net_guard::OutboundPolicy;
use domain::reconcile::run::{self, StartError, StartRun, Trigger};
use domain::store::Store;
use indicatif::{ProgressBar, ProgressStyle};

use super::{Exit, Failure};
use workers::reconcile::{Progress, ReconcileSettings, Reconciler};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReconcileArgs {
    #[command(subcommand)]
    pub command: Option<ReconcileCommand>,
    /// The source to reconcile (it needs a `pull_url`).
    #[arg(long, required = true)]
    pub source: Option<String>,
    /// Fetch and compare only: count what would be created or updated.
    #[arg(long)]
    pub dry_run: bool,
    /// Start from this cursor instead of the source's stored one (`''`: from
    /// the very beginning).
    #[arg(long)]
    pub since: Option<String>,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// The page timeout, attempts, backoff and lease, as `serve` and `work`
    /// read them: a run started here behaves as a scheduled one.
    #[command(flatten)]
    pub settings: ReconcileSettings,
}

#[derive(Debug, Subcommand)]
pub enum ReconcileCommand {
    /// Re-apply the records runs rejected (after fixing the source's
    /// mapping); those that now map are written once and marked resolved.
    RetryRejected {
        /// Only this source's records.
        #[arg(long)]
        source: Option<String>,
    },
}

pub async fn run(
    db: &Store,
    args: ReconcileArgs,
    outbound: OutboundPolicy,
    keyring: domain::sealed::Keyring,
) -> anyhow::Result<()> {
    if let Some(ReconcileCommand::RetryRejected { source }) = args.command {
        let done = domain::reconcile::rejected::retry(db, source.as_deref()).await?;
        if done.resolved > 0 {
            workers::wake::announce_once(db, domain::store::Work::Leads).await;
        }
        println!(
            "{} rejected record(s) retried: {} resolved, {} still rejected",
            done.retried, done.resolved, done.still_rejected
        );
        return Ok(());
    }
    let source = args
        .source
        .clone()
        .context("--source is required to start a run")?;
    let settings = ReconcileSettings {
        outbound,
        keyring,
        ..args.settings
    };
    settings
        .validate()
        .map_err(|reason| Failure::error(Exit::Usage, reason))?;
    let start = StartRun {
        source,
        dry_run: args.dry_run,
        since: args.since.map(|s| Some(s).filter(|s| !s.is_empty())),
        trigger: Trigger::Cli,
        tick_key: None,
        started_by: None,
        lease: settings.lease,
    };
    let started = run::start(db, &start).await.map_err(|e| match e {
        StartError::Running(other) => Failure::error(
            Exit::Conflict,
            format!(
                "a reconcile of '{}' is already running: run {} (started {} by {})",
                other.source,
                other.id,
                other.started_at.to_rfc3339(),
                other.trigger
            ),
        ),
        StartError::NoSuchSource(name) => Failure::error(
            Exit::NotFound,
            format!("no source '{name}' (`leadpipe source list` names them)"),
        ),
        StartError::NoPullUrl(name) => Failure::error(
            Exit::Usage,
            format!(
                "source '{name}' has no pull_url to reconcile from \
                 (set one with `leadpipe source update --name {name} --pull-url URL`)"
            ),
        ),
        other => anyhow::anyhow!(other),
    })?;
    let run_id = started.id;
    eprintln!(
        "reconcile run {run_id} of '{}'{} from {}: see GET /api/ops/reconcile-runs/{run_id}",
        started.source,
        if started.dry_run { " (dry run)" } else { "" },
        started
            .cursor_start
            .as_deref()
            .map_or_else(|| "the beginning".to_owned(), |c| format!("cursor {c}"))
    );
    let reconciler = Reconciler::new(db.clone(), settings).context("building the HTTP client")?;
    let bar = if args.no_progress || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos} records {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let execution = reconciler.execute(started, |p: &Progress| {
        bar.set_position(u64::try_from(p.counts.fetched).unwrap_or(0));
        bar.set_message(format!(
            "· {} pages · {} created · {} updated · {} unchanged · {} missed",
            p.pages, p.counts.created, p.counts.updated, p.counts.unchanged, p.counts.missed
        ));
    });
    let finished = tokio::select! {
        result = execution => result?,
        _ = tokio::signal::ctrl_c() => {
            bar.finish_and_clear();
            reconciler.interrupt(run_id, "interrupted: Ctrl-C").await;
            anyhow::bail!("interrupted; the cursor stays at the last complete page");
        }
    };
    bar.finish_and_clear();
    if finished.created + finished.updated > 0 {
        workers::wake::announce_once(db, domain::store::Work::Leads).await;
    }
    println!("{}", summary(&finished));
    if let Some(error) = &finished.error {
        anyhow::bail!("reconcile run {} failed: {error}", finished.id);
    }
    Ok(())
}

/// The run as a two-column table.
pub fn summary(run: &Run) -> String {
    let elapsed = run
        .finished_at
        .map(|f| (f - run.started_at).num_milliseconds() as f64 / 1000.0)
        .unwrap_or(0.0);
    let rows: Vec<(&str, String)> = vec![
        ("run", run.id.to_string()),
        ("source", run.source.clone()),
        (
            "state",
            if run.dry_run {
                format!("{} (dry run: nothing written)", run.state)
            } else {
                run.state.clone()
            },
        ),
        ("pages", run.pages.to_string()),
        ("fetched", run.fetched.to_string()),
        ("created", run.created.to_string()),
        ("updated", run.updated.to_string()),
        ("unchanged", run.unchanged.to_string()),
        ("stale", run.stale.to_string()),
        ("suppressed", run.suppressed.to_string()),
        ("rejected", run.rejected.to_string()),
        ("missed", run.missed.to_string()),
        (
            "cursor",
            run.cursor.clone().unwrap_or_else(|| "(start)".into()),
        ),
        ("time", format!("{elapsed:.1} s")),
    ];
    let mut out = String::new();
    for (label, value) in rows {
        out.push_str(&format!("{label:<10} {value}\n"));
    }
    if let Some(error) = &run.error {
        out.push_str(&format!("{:<10} {error}\n", "error"));
    }
    out.trim_end().to_owned()
}
