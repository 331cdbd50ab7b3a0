//! `leadpipe lead …` and `leadpipe export`: erasure, lifting a tombstone and
//! the bulk export, straight on the database, through the same domain calls
//! as `DELETE /api/leads/{id}`, `DELETE /api/tombstones/{hash}` and
//! `GET /api/leads/export`.

use std::io::Write;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use domain::lead::erasure::{self, EraseRequest};
use domain::lead::export::{BulkExport, Format};
use domain::lead::query::{LeadFilter, OwnerFilter};
use domain::lead::tombstone;
use domain::page::SortKey;
use sea_orm::DatabaseConnection;

use super::describe_missing;
use crate::routes::leads::wire::ErasureRecordOut;

#[derive(Debug, Subcommand)]
pub enum LeadCommand {
    /// Erase a lead and everything stored about it, and bury its natural key
    /// so no door brings it back (see docs/guide/data-protection.md).
    Erase {
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
        #[arg(long)]
        source: String,
        #[arg(long)]
        source_ref: String,
    },
}

pub async fn run_lead(db: &DatabaseConnection, command: LeadCommand) -> anyhow::Result<()> {
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
            println!(
                "{}",
                serde_json::to_string(&ErasureRecordOut::from(done.audit))?
            );
        }
        LeadCommand::Unsuppress { source, source_ref } => {
            let hash = tombstone::key_hash(source.trim(), source_ref.trim());
            if !tombstone::lift(db, &hash).await? {
                anyhow::bail!("no tombstone for this source and source_ref");
            }
            println!("tombstone {hash} lifted");
        }
    }
    Ok(())
}

/// `leadpipe export`: the filters of `GET /api/leads`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// csv or ndjson
    #[arg(long, default_value = "csv")]
    format: String,
    #[arg(long)]
    status: Option<String>,
    /// A principal id, or `none` (no owner).
    #[arg(long)]
    owner: Option<String>,
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

pub async fn run_export(db: &DatabaseConnection, args: ExportArgs) -> anyhow::Result<()> {
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
