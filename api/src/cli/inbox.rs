//! `leadpipe inbox …`: the same operations as `/api/ops/inbox`, straight on
//! the database.

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use domain::inbound::inbox::InboxState;
use domain::inbound::inbox::ops::{self, InboxFilter};
use domain::page::IdWindow;
use domain::retry::RetryPolicy;
use domain::store::Store;

use super::output::{Format, OutputArgs};
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
    /// Show one event: its payload and headers (masked as log lines are),
    /// how it was verified, and what it became (state, outcome, lead).
    Show {
        /// The event's id (`leadpipe inbox list`).
        id: i64,
        /// table: the event's fields, then its payload; json: the event as
        /// one JSON object, as `GET /api/ops/inbox/{id}` answers it.
        #[arg(long, short = 'o', value_enum, default_value_t = Format::Table)]
        output: Format,
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
        InboxCommand::Show { id, output } => {
            let event = ops::get(db, id)
                .await?
                .ok_or_else(|| describe_missing("inbox event")(domain::Error::NotFound))?;
            show(&InboxEventOut::shown(event), output)?;
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

/// One event: as JSON, or its fields one a line, then its payload.
fn show(event: &InboxEventOut, output: Format) -> anyhow::Result<()> {
    if output == Format::Json {
        println!("{}", serde_json::to_string(event)?);
        return Ok(());
    }
    let or_none = |value: Option<String>| value.unwrap_or_else(|| "-".into());
    let verification = event.verification.as_ref().map(|v| {
        format!(
            "{}; event id {} ({})",
            v.signature,
            if v.event_id_signed {
                "signed"
            } else {
                "not signed: the body's hash backs it"
            },
            event.event_id_from
        )
    });
    let lines = [
        ("id", event.id.to_string()),
        ("source", event.source.clone()),
        ("event_id", event.event_id.clone()),
        ("event_type", or_none(event.event_type.clone())),
        ("received_at", event.received_at.to_rfc3339()),
        ("deliveries", event.deliveries.to_string()),
        ("verification", or_none(verification)),
        ("state", event.state.clone()),
        ("outcome", or_none(event.outcome.clone())),
        ("lead_id", or_none(event.lead_id.map(|id| id.to_string()))),
        ("attempts", event.attempts.to_string()),
        ("last_error", or_none(event.last_error.clone())),
        (
            "processed_at",
            or_none(event.processed_at.map(|t| t.to_rfc3339())),
        ),
        ("correlation_id", or_none(event.correlation_id.clone())),
    ];
    for (name, value) in lines {
        println!("{name:<15} {value}");
    }
    if let Some(headers) = event.headers.as_ref().and_then(|h| h.as_object()) {
        println!("headers");
        for (name, value) in headers {
            println!("  {name}: {}", value.as_str().unwrap_or_default());
        }
    }
    println!("payload");
    match (&event.body, &event.body_text) {
        (Some(body), _) => println!("{}", serde_json::to_string_pretty(body)?),
        (None, Some(text)) if !text.is_empty() => println!("{text}"),
        _ => println!("  (none: erased, or past its retention)"),
    }
    Ok(())
}
