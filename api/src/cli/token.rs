//! `leadpipe token …`: API principals and their bearer tokens.

use chrono::{DateTime, Utc};
use clap::Subcommand;
use clap::builder::TypedValueParser as _;
use domain::auth::{Expiry, Role};
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
        /// How long the token works (e.g. `90d`, `12h`), or `never`.
        /// Default: 90d for sales, ops and admin tokens; never for a
        /// source's (intake) token.
        #[arg(long, value_name = "DURATION", value_parser = parse_expiry)]
        expires_in: Option<Expiry>,
    },
    /// List principals: id, name, role, source, state, when its token
    /// expires and was last used, and for sales staff team, availability
    /// and capacity (never tokens).
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
    /// Replace a principal's token with a new one (printed once); the old
    /// one is refused (servers that remember it accept it for at most
    /// LEADPIPE_AUTH_CACHE_SECS more). The new one lives as long as the old
    /// one was given, from now.
    Rotate {
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
        TokenCommand::Create {
            name,
            role,
            source,
            expires_in,
        } => {
            if role == Role::Intake && source.is_none() {
                return Err(super::Failure::error(
                    super::Exit::Usage,
                    "--source is required for --role intake: an intake token posts leads for one source",
                ));
            }
            let issued = domain::auth::create_principal_with(
                db,
                &name,
                role,
                source.as_deref(),
                expires_in.unwrap_or(Expiry::Default),
            )
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
            eprintln!("{}", expiry_note(issued.record.expires_at));
            println!("{}", issued.token);
        }
        TokenCommand::Rotate { id } => {
            let txn = db.begin_write().await?;
            let issued = domain::auth::rotate_principal_token(&*txn, id)
                .await
                .map_err(super::describe_missing("principal"))?;
            txn.commit().await?;
            eprintln!(
                "rotated the token of principal {id}; {}; the new token below is shown only once:",
                expiry_note(issued.record.expires_at)
            );
            println!("{}", issued.token);
        }
        TokenCommand::List { output } => {
            let tokens = domain::auth::all_tokens(db).await?;
            let rows: Vec<PrincipalListingOut> = staff::list(db)
                .await?
                .into_iter()
                .map(|record| {
                    let id = record.principal.id;
                    PrincipalListingOut::from(record)
                        .with_tokens(tokens.iter().filter(|t| t.principal_id == id))
                })
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
                    "expires_at",
                    "last_used_at",
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

/// `--expires-in`: a duration (`90d`, `12h`) or `never`.
fn parse_expiry(text: &str) -> Result<Expiry, String> {
    if text.trim() == "never" {
        return Ok(Expiry::Never);
    }
    let lifetime = workers::settings::parse_duration(text)?;
    if lifetime.is_zero() {
        return Err("a token must live longer than 0".into());
    }
    chrono::Duration::from_std(lifetime)
        .map(Expiry::After)
        .map_err(|_| format!("'{text}' is too long"))
}

/// When a token stops working, for people.
fn expiry_note(expires_at: Option<DateTime<Utc>>) -> String {
    match expires_at {
        Some(at) => format!(
            "it expires at {}",
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
        None => "it does not expire".to_owned(),
    }
}
