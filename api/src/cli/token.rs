//! `leadpipe token …`: API principals and their bearer tokens.

use chrono::{DateTime, Utc};
use clap::Subcommand;
use clap::builder::TypedValueParser as _;
use domain::auth::Role;
use domain::field_presence::Patch;
use domain::precondition::IfMatch;
use domain::routing::staff::{self, Availability, PrincipalPatch};
use domain::store::{Store, Work};

use super::output::OutputArgs;
use crate::wire::principals::PrincipalListingOut;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a principal and print its bearer token (shown only this once).
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, value_parser = super::one_of(Role::ALL.map(Role::as_str)).try_map(|s| s.parse::<Role>()))]
        role: Role,
        /// The source an intake token may post leads for.
        #[arg(long)]
        source: Option<String>,
    },
    /// List principals: id, name, role, source, state, and for sales staff
    /// team, availability and capacity (never tokens).
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Revoke a principal's token. Servers accept it for at most
    /// LEADPIPE_AUTH_CACHE_SECS more.
    Revoke {
        /// The principal's id (`leadpipe token list`).
        #[arg(long)]
        id: i64,
    },
    /// Set what routing knows about a sales principal: its team, its
    /// capacity (most open leads), and whether it is away. Leads waiting for
    /// an owner are routed again when it can take more.
    Set {
        /// The principal's id (`leadpipe token list`).
        #[arg(long)]
        id: i64,
        /// The team whose routing rules send it leads.
        #[arg(long, conflicts_with = "no_team")]
        team: Option<String>,
        /// In no team.
        #[arg(long)]
        no_team: bool,
        /// The most open leads routing gives it (0 to 100000).
        #[arg(long, conflicts_with = "no_capacity")]
        capacity: Option<i64>,
        /// No limit on open leads.
        #[arg(long)]
        no_capacity: bool,
        /// Routing passes it by (until --until, if given).
        #[arg(long, conflicts_with = "available")]
        away: bool,
        /// With --away: when it is back (RFC 3339).
        #[arg(long, requires = "away")]
        until: Option<DateTime<Utc>>,
        /// Routing gives it leads again (clears a return time).
        #[arg(long)]
        available: bool,
    },
}

pub async fn run_token(db: &Store, command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create { name, role, source } => {
            if role == Role::Intake && source.is_none() {
                return Err(super::Failure::error(
                    super::Exit::Usage,
                    "--source is required for --role intake: an intake token posts leads for one source",
                ));
            }
            let issued = domain::auth::create_principal(db, &name, role, source.as_deref())
                .await
                .map_err(super::describe)?;
            eprintln!(
                "created principal {} '{}' with role {}{}; the token below is shown only once:",
                issued.principal.id,
                issued.principal.name,
                issued.principal.role,
                issued
                    .principal
                    .source
                    .map(|s| format!(" for source '{s}'"))
                    .unwrap_or_default()
            );
            println!("{}", issued.token);
        }
        TokenCommand::List { output } => {
            let rows: Vec<PrincipalListingOut> = staff::list(db)
                .await?
                .into_iter()
                .map(PrincipalListingOut::from)
                .collect();
            output.print(
                &rows,
                &[
                    "id",
                    "name",
                    "role",
                    "source",
                    "state",
                    "created_at",
                    "team",
                    "availability",
                    "capacity",
                ],
            )?;
        }
        TokenCommand::Revoke { id } => {
            if !domain::auth::revoke(db, id).await? {
                return Err(super::Failure::error(
                    super::Exit::NotFound,
                    format!("no principal {id}"),
                ));
            }
            println!(
                "revoked principal {id}; servers accept its token for at most LEADPIPE_AUTH_CACHE_SECS more"
            );
        }
        TokenCommand::Set {
            id,
            team,
            no_team,
            capacity,
            no_capacity,
            away,
            until,
            available,
        } => {
            let patch = PrincipalPatch {
                team: given(team, no_team),
                capacity: given(capacity, no_capacity),
                availability: if away {
                    Some(Availability::Away)
                } else if available {
                    Some(Availability::Available)
                } else {
                    None
                },
                // `--away` alone is away until further notice.
                away_until: match (away, until) {
                    (true, Some(at)) => Patch::Value(at),
                    (true, None) => Patch::Null,
                    (false, _) => Patch::Absent,
                },
            };
            let txn = db.begin_write().await?;
            let updated = staff::update(&*txn, id, patch, &IfMatch::Any, None)
                .await
                .map_err(super::describe_missing("principal"))?;
            // A principal who can take more leads sends the waiting ones
            // back to the lead drain.
            txn.enqueued(Work::Leads);
            txn.commit().await?;
            let row = PrincipalListingOut::from(updated.record);
            println!(
                "principal {id}: team {}, {}, capacity {}",
                row.team.as_deref().unwrap_or("-"),
                row.availability,
                row.capacity
                    .map_or_else(|| "unlimited".to_owned(), |c| c.to_string())
            );
        }
    }
    Ok(())
}

/// A flag pair as a change: a value, `--no-…` (clear it), or neither.
fn given<T>(value: Option<T>, clear: bool) -> Patch<T> {
    match (value, clear) {
        (Some(value), _) => Patch::Value(value),
        (None, true) => Patch::Null,
        (None, false) => Patch::Absent,
    }
}
