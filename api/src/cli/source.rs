//! `leadpipe source …`: the same operations as `/api/sources`, straight on
//! the database.

use super::output::OutputArgs;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use domain::inbound::signature::{Scheme, generate_standard_secret};
use domain::inbound::source::{self, NewSource, Saved};
use domain::outbound::net_guard::OutboundPolicy;
use domain::sealed::Keyring;
use sea_orm::DatabaseConnection;

use super::describe;
use crate::routes::sources::wire::{SourceIn, SourceOut};

// Parsed once per run: the size of the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum SourceCommand {
    /// Create a webhook source, or replace the configuration of an existing one.
    Add(SourceArgs),
    /// List sources (secrets are never shown).
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, Args)]
pub struct SourceArgs {
    #[arg(long)]
    name: String,
    #[arg(long, value_parser = super::one_of(Scheme::ALL.map(Scheme::as_str)))]
    scheme: String,
    /// A verification secret; repeat for rotation (any may match). Omit on
    /// an update to keep the stored ones. Discouraged: argv is visible to
    /// every user of the machine (`ps`); use --secret-file or --secret-env.
    #[arg(long = "secret")]
    secrets: Vec<String>,
    /// Read the secrets from this file, one a line (`-`: standard input).
    #[arg(long, conflicts_with = "secrets")]
    secret_file: Option<PathBuf>,
    /// Read the secrets from this environment variable, one a line.
    #[arg(long, value_name = "VAR", conflicts_with_all = ["secrets", "secret_file"])]
    secret_env: Option<String>,
    /// standard-webhooks: generate a whsec_ secret and print it once.
    #[arg(long, conflicts_with_all = ["secrets", "secret_file", "secret_env"])]
    generate_secret: bool,
    #[arg(long)]
    tolerance_secs: Option<i64>,
    /// hmac-sha256: the header carrying the signature (default x-signature).
    #[arg(long)]
    signature_header: Option<String>,
    #[arg(long, conflicts_with = "event_id_pointer")]
    event_id_header: Option<String>,
    #[arg(long)]
    event_id_pointer: Option<String>,
    #[arg(long, conflicts_with = "event_type_pointer")]
    event_type_header: Option<String>,
    #[arg(long)]
    event_type_pointer: Option<String>,
    /// An event type to process (repeatable); others are stored as skipped.
    #[arg(long = "allow-event-type")]
    allowed_event_types: Vec<String>,
    #[arg(long)]
    record_pointer: Option<String>,
    #[arg(long)]
    source_ref_pointer: Option<String>,
    #[arg(long)]
    email_pointer: Option<String>,
    #[arg(long)]
    name_pointer: Option<String>,
    #[arg(long)]
    phone_pointer: Option<String>,
    #[arg(long)]
    company_pointer: Option<String>,
    #[arg(long)]
    updated_at_pointer: Option<String>,
    /// Reconcile: the sender's pull API, `GET {pull_url}?since=…&limit=…`.
    #[arg(long)]
    pull_url: Option<String>,
    /// A header sent with every pull, e.g. `authorization`.
    #[arg(long)]
    pull_auth_header: Option<String>,
    /// Its value (write-only; omitted on an update: the stored one stays,
    /// unless pull_url moves to another origin). Discouraged on the command
    /// line: use the environment variable or --pull-auth-secret-file.
    #[arg(long, env = "LEADPIPE_PULL_AUTH_SECRET", hide_env_values = true)]
    pull_auth_secret: Option<String>,
    /// Read the pull auth value from this file (`-`: standard input).
    #[arg(long, conflicts_with = "pull_auth_secret")]
    pull_auth_secret_file: Option<PathBuf>,
    /// Records per pull request (1–1000, default 100).
    #[arg(long)]
    pull_page_size: Option<i64>,
    /// Reconcile by itself on this cron schedule, seconds field first
    /// (`0 */15 * * * *`: every quarter hour).
    #[arg(long)]
    cron: Option<String>,
}

/// A secret-bearing file's contents (`-`: standard input), so secrets need
/// not appear on the command line.
fn read_secret_file(path: &Path) -> anyhow::Result<String> {
    let mut text = String::new();
    if path == Path::new("-") {
        std::io::stdin().read_to_string(&mut text)?;
    } else {
        text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    }
    Ok(text)
}

pub async fn run_source(
    db: &DatabaseConnection,
    command: SourceCommand,
    outbound: &OutboundPolicy,
    keys: &Keyring,
) -> anyhow::Result<()> {
    match command {
        SourceCommand::Add(mut args) => {
            let stdin_twice = args.secret_file.as_deref() == Some(Path::new("-"))
                && args.pull_auth_secret_file.as_deref() == Some(Path::new("-"));
            if stdin_twice {
                anyhow::bail!("only one of --secret-file and --pull-auth-secret-file can be `-`");
            }
            let given = match (&args.secret_file, &args.secret_env) {
                (Some(path), _) => Some((read_secret_file(path)?, path.display().to_string())),
                (None, Some(var)) => {
                    let value = std::env::var(var)
                        .map_err(|_| anyhow::anyhow!("environment variable {var} is not set"))?;
                    Some((value, var.clone()))
                }
                (None, None) => None,
            };
            if let Some((text, from)) = given {
                args.secrets = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect();
                if args.secrets.is_empty() {
                    anyhow::bail!("{from} holds no secret");
                }
            }
            if let Some(path) = &args.pull_auth_secret_file {
                let value = read_secret_file(path)?;
                args.pull_auth_secret = Some(value.trim_end_matches(['\r', '\n']).to_owned());
            }
            let generated = if args.generate_secret {
                if args.scheme.parse::<Scheme>().ok() != Some(Scheme::StandardWebhooks) {
                    anyhow::bail!("--generate-secret is for the standard-webhooks scheme");
                }
                Some(generate_standard_secret())
            } else {
                None
            };
            let secrets = match &generated {
                Some(secret) => Some(vec![secret.clone()]),
                None if args.secrets.is_empty() => None,
                None => Some(args.secrets),
            };
            let input = SourceIn {
                name: args.name,
                scheme: args.scheme,
                secrets,
                tolerance_secs: args.tolerance_secs,
                signature_header: args.signature_header,
                event_id_header: args.event_id_header,
                event_id_pointer: args.event_id_pointer,
                event_type_header: args.event_type_header,
                event_type_pointer: args.event_type_pointer,
                allowed_event_types: Some(args.allowed_event_types),
                record_pointer: args.record_pointer,
                source_ref_pointer: args.source_ref_pointer,
                email_pointer: args.email_pointer,
                name_pointer: args.name_pointer,
                phone_pointer: args.phone_pointer,
                company_pointer: args.company_pointer,
                updated_at_pointer: args.updated_at_pointer,
                pull_url: args.pull_url,
                pull_auth_header: args.pull_auth_header,
                pull_auth_secret: args.pull_auth_secret,
                pull_page_size: args.pull_page_size,
                cron: args.cron,
            };
            let new = NewSource::parse(input.into(), outbound).map_err(describe)?;
            let (saved, how) = source::upsert(db, new, keys).await.map_err(describe)?;
            let view = SourceOut::from(saved);
            eprintln!(
                "{} source '{}' ({}); webhook URL path: /webhooks/{}",
                if how == Saved::Created {
                    "created"
                } else {
                    "updated"
                },
                view.name,
                view.scheme,
                view.name
            );
            eprintln!("{}", serde_json::to_string_pretty(&view)?);
            if let Some(secret) = generated {
                eprintln!("the generated secret below is shown only once:");
                println!("{secret}");
            }
        }
        SourceCommand::List { output } => {
            let sources: Vec<SourceOut> = source::list(db)
                .await?
                .into_iter()
                .map(SourceOut::from)
                .collect();
            output.print(
                &sources,
                &["name", "scheme", "secret_count", "allowed_event_types"],
            )?;
        }
    }
    Ok(())
}
