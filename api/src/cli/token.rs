//! `leadpipe token …`: API principals and their bearer tokens.

use clap::Subcommand;
use clap::builder::TypedValueParser as _;
use domain::auth::Role;
use domain::store::Store;

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
    /// List principals: id, name, role, source, state (never tokens).
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
}

pub async fn run_token(db: &Store, command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create { name, role, source } => {
            let issued = domain::auth::create_principal(db, &name, role, source.as_deref()).await?;
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
            let rows: Vec<PrincipalListingOut> = domain::auth::list_principals(db)
                .await?
                .into_iter()
                .map(PrincipalListingOut::from)
                .collect();
            output.print(
                &rows,
                &["id", "name", "role", "source", "state", "created_at"],
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
    }
    Ok(())
}
