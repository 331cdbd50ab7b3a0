//! `leadpipe import`: a file through `domain::import`, with a progress bar.

use domain::store::Store;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use domain::import::{self, Format, ImportSpec, Mapping, Progress, report};
use indicatif::{ProgressBar, ProgressStyle};

use super::describe;

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The lead source the rows belong to (e.g. `tradeshow-2026`).
    #[arg(long)]
    pub source: String,
    /// Column mapping by header name: `source_ref=Lead ID,email=E-mail`.
    /// Unmapped fields are read from a column of the same name; other
    /// columns go to the lead's payload.
    #[arg(long)]
    pub map: Option<String>,
    /// Report what would happen, writing no lead.
    #[arg(long)]
    pub dry_run: bool,
    /// `csv` or `ndjson` (default: by extension, `.ndjson`/`.jsonl` are NDJSON).
    #[arg(long)]
    pub format: Option<Format>,
    /// Rows per transaction.
    #[arg(long, default_value_t = import::DEFAULT_BATCH_SIZE)]
    pub batch_size: usize,
    /// Write the per-row report (CSV) to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// The CSV or NDJSON file.
    pub file: PathBuf,
}

pub async fn run(db: &Store, args: ImportArgs) -> anyhow::Result<()> {
    let format = args.format.unwrap_or_else(|| Format::of_path(&args.file));
    let spec = ImportSpec {
        source: args.source.clone(),
        format,
        mapping: Mapping::parse(args.map.as_deref().unwrap_or("")).map_err(describe)?,
        dry_run: args.dry_run,
        file_name: args
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
        started_by: None,
        batch_size: args.batch_size,
    };
    let prepared = import::prepare(db, &spec, &args.file)
        .await
        .map_err(describe)?;
    let run_id = prepared.run.id;
    let total = u64::try_from(prepared.run.bytes_total.unwrap_or(0)).unwrap_or(0);
    let bar = if args.no_progress {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    eprintln!(
        "import run {run_id}{}: see GET /api/imports/{run_id}",
        if spec.dry_run { " (dry run)" } else { "" }
    );
    let result = import::execute(db, prepared, spec.batch_size, |p: &Progress| {
        bar.set_position(u64::try_from(p.bytes_read).unwrap_or(0));
        bar.set_message(summary(p));
    })
    .await;
    bar.finish_and_clear();
    let run = result.map_err(describe)?;
    if !run.dry_run && run.created + run.updated > 0 {
        workers::wake::announce_once(db, domain::store::Work::Leads).await;
    }
    println!(
        "import run {}: {} rows: {} created, {} updated, {} unchanged, {} stale, {} suppressed, {} rejected{}",
        run.id,
        run.rows,
        run.created,
        run.updated,
        run.unchanged,
        run.stale,
        run.suppressed,
        run.rejected,
        if run.dry_run {
            " (dry run: nothing written)"
        } else {
            ""
        }
    );
    if let Some(path) = &args.report {
        write_report(db, run.id, path).await?;
        println!("report written to {}", path.display());
    } else if run.rejected > 0 {
        println!(
            "rejected rows are listed with their line numbers in the report: \
             --report FILE, or GET /api/imports/{}/report.csv",
            run.id
        );
    }
    Ok(())
}

fn summary(p: &Progress) -> String {
    format!(
        "{} rows · {} created · {} updated · {} unchanged · {} stale · {} rejected",
        p.rows, p.created, p.updated, p.unchanged, p.stale, p.rejected
    )
}

async fn write_report(db: &Store, run_id: i64, path: &PathBuf) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    out.write_all(report::HEADER.as_bytes())?;
    let mut after = 0;
    loop {
        let rows = import::report_rows(db, run_id, after, 1000)
            .await
            .map_err(describe)?;
        let Some(last) = rows.last() else { break };
        after = last.row_number;
        out.write_all(&report::to_csv(&rows))?;
    }
    out.flush()?;
    Ok(())
}
