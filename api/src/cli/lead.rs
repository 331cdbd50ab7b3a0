//! `leadpipe lead …` and `leadpipe export`: erasure, lifting a tombstone,
//! merging and undoing a merge, failed lead processing and the bulk export,
//! straight on the database, through the same domain calls as
//! `DELETE /api/leads/{id}`, `DELETE /api/tombstones/{hash}`,
//! `POST /api/leads/{id}/merge`, `POST /api/merges/{id}/undo`,
//! `/api/ops/lead-processing/…` and `GET /api/leads/export`.

use domain::page::IdWindow;
use domain::store::Store;
use std::io::Write;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use domain::actor::Actor;
use domain::erasure::{self, EraseRequest};
use domain::lead::export::{BulkExport, Format};
use domain::lead::failures::{self, BulkRetryRequest, RetryReport};
use domain::lead::merge::{self, MergeRequest};
use domain::lead::query::{LeadFilter, OwnerFilter};
use domain::lead::tombstone;
use domain::page::SortKey;
use domain::precondition::IfMatch;
use domain::retry::RetryPolicy;
use domain::store::Work;

use super::output::{self, OutputArgs};
use super::{describe, describe_missing};
use crate::wire::lead_processing::{FailureOut, RetryOut};
use crate::wire::leads::ErasureRecordOut;
use crate::wire::merges::MergeRecordOut;

#[derive(Debug, Subcommand)]
pub enum LeadCommand {
    /// Erase a lead and everything stored about it, and bury its natural key
    /// so no door brings it back (see docs/guide/data-protection.md).
    Erase {
        /// The lead's id.
        id: i64,
        /// Why (kept in the audit record: do not name the person).
        #[arg(long)]
        reason: String,
        /// Also blank the contact the lead was converted into.
        #[arg(long)]
        include_contact: bool,
    },
    /// Lift the tombstone of a natural key: its next arrival creates a lead again.
    Unsuppress {
        /// The erased lead's source.
        #[arg(long)]
        source: String,
        /// The erased lead's id at its source.
        #[arg(long)]
        source_ref: String,
    },
    /// Merge leads into one (see docs/guide/crm.md#merging-leads); prints the
    /// merge as `GET /api/merges/{id}` shows it.
    Merge {
        /// The lead that stays.
        survivor: i64,
        /// A lead to merge into it (repeat for more).
        #[arg(long = "from", required = true)]
        from: Vec<i64>,
        /// Keep a field's value from a given lead: FIELD=LEAD_ID (repeatable;
        /// fields: email, phone, name, company, status, owner_id).
        #[arg(long = "keep", value_parser = parse_keep)]
        keep: Vec<(String, i64)>,
    },
    /// Undo a merge: the merged leads come back with their keys and values.
    Unmerge {
        /// The merge's id (printed by `lead merge`, `GET /api/merges/{id}`).
        merge_id: i64,
    },
    /// List leads whose processing failed (retried later) or is dead
    /// (given up), newest lead first.
    Failures {
        /// Only failed (retried later) or only dead (given up) leads.
        #[arg(long, value_parser = super::one_of(failures::STATES))]
        state: Option<String>,
        /// The most leads listed.
        #[arg(long, default_value_t = 50)]
        limit: u64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Process a lead (by id) whose processing failed or is dead again now,
    /// or every dead (or --state failed) lead up to --limit. A lead is
    /// claimed as a worker claims it, so it is processed once.
    Retry {
        /// One lead; without it, every lead in --state.
        lead_id: Option<i64>,
        /// Bulk: dead (default) or failed.
        #[arg(long, value_parser = super::one_of(failures::STATES))]
        state: Option<String>,
        /// Bulk: at most this many leads (1–1000).
        #[arg(long)]
        limit: Option<u64>,
        /// Bulk: only count them.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub async fn run_lead(db: &Store, command: LeadCommand) -> anyhow::Result<()> {
    match command {
        LeadCommand::Erase {
            id,
            reason,
            include_contact,
        } => {
            let request = EraseRequest {
                lead_id: id,
                reason,
                include_contact,
                erased_by: None,
                correlation_id: Some(format!("cli-erase-{id}")),
            };
            let done = erasure::erase(db, &request)
                .await
                .map_err(describe_missing("lead"))?;
            if done.repeated {
                eprintln!("lead {id} was already erased");
            }
            if let Some(vacuum) = done.vacuum {
                // The process ends next: finish the vacuum first.
                vacuum.await?;
            }
            println!(
                "{}",
                serde_json::to_string(&ErasureRecordOut::from(done.audit))?
            );
        }
        LeadCommand::Merge {
            survivor,
            from,
            keep,
        } => {
            let request = MergeRequest {
                lead_ids: from,
                fields: keep.into_iter().collect(),
            };
            let actor = Actor {
                principal_id: None,
                correlation_id: Some(format!("cli-merge-{survivor}")),
            };
            let txn = db.begin_write().await?;
            let merged = merge::merge(&txn, survivor, &request, &IfMatch::Any, &actor)
                .await
                .map_err(describe_missing("lead"))?;
            txn.enqueued(Work::Leads);
            txn.commit().await?;
            println!(
                "{}",
                serde_json::to_string(&MergeRecordOut::from(merged.merge))?
            );
        }
        LeadCommand::Unmerge { merge_id } => {
            let actor = Actor {
                principal_id: None,
                correlation_id: Some(format!("cli-unmerge-{merge_id}")),
            };
            let txn = db.begin_write().await?;
            let undone = merge::undo(&txn, db.hasher(), merge_id, &actor)
                .await
                .map_err(describe_missing("merge"))?;
            txn.enqueued(Work::Leads);
            txn.commit().await?;
            println!(
                "{}",
                serde_json::to_string(&MergeRecordOut::from(undone.merge))?
            );
        }
        LeadCommand::Unsuppress { source, source_ref } => {
            let lifted =
                tombstone::lift_key(db, db.hasher(), source.trim(), source_ref.trim()).await?;
            if lifted == 0 {
                return Err(super::Failure::error(
                    super::Exit::NotFound,
                    format!(
                        "no tombstone for source '{}', source_ref '{}': nothing to lift",
                        source.trim(),
                        source_ref.trim()
                    ),
                ));
            }
            println!("{lifted} tombstone(s) lifted");
        }
        LeadCommand::Failures {
            state,
            limit,
            output,
        } => {
            let rows: Vec<FailureOut> = failures::list(
                db,
                state.as_deref(),
                IdWindow {
                    limit,
                    before: None,
                },
            )
            .await?
            .data
            .into_iter()
            .map(FailureOut::from)
            .collect();
            output.print(
                &rows,
                &[
                    "lead_id",
                    "version",
                    "state",
                    "attempts",
                    "next_attempt_at",
                    "updated_at",
                    "last_error",
                ],
            )?;
        }
        LeadCommand::Retry {
            lead_id,
            state,
            limit,
            dry_run,
            output,
        } => {
            let policy = RetryPolicy::default();
            let report = match lead_id {
                Some(_) if state.is_some() || limit.is_some() || dry_run => {
                    anyhow::bail!("give either a lead id or --state/--limit/--dry-run, not both")
                }
                Some(id) => failures::retry_one(db, id, &policy, Utc::now())
                    .await
                    .map_err(describe_missing("lead"))?,
                None => {
                    let request = BulkRetryRequest {
                        state: match state.as_deref() {
                            Some(s) => failures::parse_state(s).map_err(describe)?,
                            None => BulkRetryRequest::default().state,
                        },
                        limit: limit.unwrap_or(failures::DEFAULT_RETRY_LIMIT),
                        dry_run,
                    };
                    failures::retry_matching(db, &request, &policy)
                        .await
                        .map_err(describe)?
                }
            };
            print_retry(&report, dry_run, output)?;
        }
    }
    Ok(())
}

/// `FIELD=LEAD_ID` of `lead merge --keep`.
fn parse_keep(text: &str) -> Result<(String, i64), String> {
    let (field, id) = text
        .split_once('=')
        .ok_or_else(|| format!("expected FIELD=LEAD_ID, got '{text}'"))?;
    let id = id
        .trim()
        .parse()
        .map_err(|_| format!("'{id}' is not a lead id"))?;
    Ok((field.trim().to_owned(), id))
}

/// A sentence for people; with `-o json`, the report as one JSON object.
fn print_retry(report: &RetryReport, dry_run: bool, out: OutputArgs) -> anyhow::Result<()> {
    if out.output == output::Format::Json {
        // The answer of `POST /api/ops/lead-processing/retry`.
        let row = RetryOut {
            dry_run,
            matched: report.matched,
            retried: report.retried,
            results: report.results.clone(),
        };
        return out.print(&[row], &[]);
    }
    if dry_run {
        println!("{} lead(s) would be processed again", report.matched);
    } else {
        let results = report
            .results
            .iter()
            .map(|(outcome, n)| format!("{outcome} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "{} of {} lead(s) processed again ({results})",
            report.retried, report.matched
        );
    }
    Ok(())
}

/// `leadpipe export`: the filters of `GET /api/leads`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// csv or ndjson
    #[arg(long, default_value = "csv")]
    format: String,
    /// Only leads in this status (new, contacted, qualified, …).
    #[arg(long)]
    status: Option<String>,
    /// A principal id, or `none` (no owner).
    #[arg(long)]
    owner: Option<String>,
    /// Only leads of this source.
    #[arg(long)]
    source: Option<String>,
    /// Case-insensitive text in name, email or company.
    #[arg(long)]
    q: Option<String>,
    /// Only leads changed at or after this time (RFC 3339).
    #[arg(long)]
    updated_since: Option<DateTime<Utc>>,
    /// updated_at (default) or created_at
    #[arg(long, default_value = "updated_at")]
    sort: String,
}

pub async fn run_export(db: &Store, args: ExportArgs) -> anyhow::Result<()> {
    let format: Format = args.format.parse().map_err(anyhow::Error::msg)?;
    let owner = match args.owner.as_deref() {
        None => None,
        Some("none") => Some(OwnerFilter::Unassigned),
        Some(id) => Some(OwnerFilter::Id(id.parse().map_err(|_| {
            anyhow::anyhow!("--owner must be a principal id or 'none'")
        })?)),
    };
    let filter = LeadFilter {
        status: args
            .status
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: String| anyhow::anyhow!("--status: {e}"))?,
        owner,
        source: args.source,
        q: args.q,
        updated_since: args.updated_since,
        sort: match args.sort.as_str() {
            "updated_at" => SortKey::UpdatedAt,
            "created_at" => SortKey::CreatedAt,
            _ => anyhow::bail!("--sort must be 'updated_at' or 'created_at'"),
        },
    };
    let mut pages = BulkExport::new(db.clone(), filter, format);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    while let Some(chunk) = pages.next_chunk().await.map_err(super::describe)? {
        out.write_all(&chunk)?;
    }
    out.flush()?;
    Ok(())
}
