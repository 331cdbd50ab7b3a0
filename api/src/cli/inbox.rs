//! `leadpipe inbox …`: the same operations as `/api/ops/inbox`, straight on
//! the database.

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use domain::inbound::inbox::InboxState;
use domain::inbound::inbox::ops::{self, InboxFilter};
use domain::page::IdWindow;
use domain::retry::RetryPolicy;
use domain::store::Store;

use super::output::OutputArgs;
use super::{describe, describe_missing};
use crate::wire::inbox::InboxEventOut;

#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// List inbox events, newest first.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        /// The most events listed.
        #[arg(long, default_value_t = 50)]
        limit: u64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Send an event (by id) or every event matching a filter back for
    /// processing. The same event is reprocessed, so no lead is duplicated.
    Retry {
        /// One event; without it, --state (and optionally more) selects.
        id: Option<i64>,
        #[command(flatten)]
        filter: FilterArgs,
        /// Only count what a bulk retry would take.
        #[arg(long)]
        dry_run: bool,
        /// Take processed events too (a bulk retry refuses them otherwise):
        /// they re-apply historic payloads.
        #[arg(long)]
        include_processed: bool,
    },
}

#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only events sent to this source.
    #[arg(long)]
    source: Option<String>,
    /// Only events in this state.
    #[arg(long, value_parser = super::one_of(InboxState::ALL.map(InboxState::as_str)))]
    state: Option<String>,
    /// Received at or after (RFC 3339).
    #[arg(long)]
    since: Option<DateTime<Utc>>,
    /// Received before (RFC 3339).
    #[arg(long)]
    until: Option<DateTime<Utc>>,
}

impl FilterArgs {
    fn filter(&self) -> anyhow::Result<InboxFilter> {
        Ok(InboxFilter {
            source: self.source.clone(),
            state: self
                .state
                .as_deref()
                .map(str::parse::<InboxState>)
                .transpose()
                .map_err(anyhow::Error::msg)?,
            received_since: self.since,
            received_until: self.until,
        })
    }

    fn is_empty(&self) -> bool {
        self.source.is_none()
            && self.state.is_none()
            && self.since.is_none()
            && self.until.is_none()
    }
}

pub async fn run_inbox(db: &Store, command: InboxCommand) -> anyhow::Result<()> {
    match command {
        InboxCommand::List {
            filter,
            limit,
            output,
        } => {
            let rows: Vec<InboxEventOut> = ops::list(
                db,
                &filter.filter()?,
                IdWindow {
                    limit,
                    before: None,
                },
            )
            .await?
            .data
            .into_iter()
            .map(InboxEventOut::summary)
            .collect();
            output.print(
                &rows,
                &[
                    "id",
                    "source",
                    "state",
                    "attempts",
                    "event_type",
                    "received_at",
                    "lead_id",
                    "last_error",
                ],
            )?;
        }
        InboxCommand::Retry {
            id,
            filter,
            dry_run,
            include_processed,
        } => match id {
            Some(_) if !filter.is_empty() || dry_run || include_processed => {
                anyhow::bail!("give either an event id or a filter, not both")
            }
            Some(id) => {
                ops::retry(db, id, Utc::now())
                    .await
                    .map_err(describe_missing("inbox event"))?;
                workers::wake::announce_once(db, domain::store::Work::Inbox).await;
                println!("1 event(s) sent back for processing");
            }
            None => {
                let request = ops::BulkRetryRequest {
                    filter: filter.filter()?,
                    include_processed,
                    dry_run,
                };
                let done = ops::retry_matching(db, &request, &RetryPolicy::default())
                    .await
                    .map_err(describe)?;
                let counts = |map: &std::collections::BTreeMap<String, u64>| {
                    map.iter()
                        .map(|(state, n)| format!("{state} {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                if dry_run {
                    println!(
                        "{} event(s) would be re-applied in received order ({})",
                        done.matched,
                        counts(&done.by_state)
                    );
                } else {
                    workers::wake::announce_once(db, domain::store::Work::Leads).await;
                    println!(
                        "{} event(s) re-applied in received order ({})",
                        done.retried,
                        counts(&done.results)
                    );
                }
                if done.skipped_erased > 0 {
                    println!(
                        "{} erased event(s) skipped: their body is gone, nothing is left to process",
                        done.skipped_erased
                    );
                }
                if let Some(note) = ops::historic_note(&done, dry_run) {
                    println!("note: {note}");
                }
            }
        },
    }
    Ok(())
}
