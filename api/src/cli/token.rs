//! `leadpipe token …`: API principals and their bearer tokens.

use clap::Subcommand;
use domain::auth::Role;
use sea_orm::DatabaseConnection;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a principal and print its bearer token (shown only this once).
    Create {
        #[arg(long)]
        name: String,
        /// intake, sales, ops or admin
        #[arg(long)]
        role: Role,
        /// The source an intake token may post leads for.
        #[arg(long)]
        source: Option<String>,
    },
    /// List principals: id, name, role, source, active (never tokens).
    List,
    /// Revoke a principal's token. Servers accept it for at most
    /// LEADPIPE_AUTH_CACHE_SECS more.
    Revoke {
        /// The principal's id (`leadpipe token list`).
        #[arg(long)]
        id: i64,
    },
}

pub async fn run_token(db: &DatabaseConnection, command: TokenCommand) -> anyhow::Result<()> {
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
        TokenCommand::List => {
            println!(
                "{:>6}  {:<24} {:<7} {:<16} {:<7} created",
                "id", "name", "role", "source", "active"
            );
            for row in domain::auth::list_principals(db).await? {
                let p = &row.principal;
                println!(
                    "{:>6}  {:<24} {:<7} {:<16} {:<7} {}",
                    p.id,
                    p.name,
                    p.role.as_str(),
                    p.source.as_deref().unwrap_or("-"),
                    if row.active { "yes" } else { "revoked" },
                    row.created_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                );
            }
        }
        TokenCommand::Revoke { id } => {
            if !domain::auth::revoke(db, id).await? {
                anyhow::bail!("no principal {id}");
            }
            println!(
                "revoked principal {id}; servers accept its token for at most LEADPIPE_AUTH_CACHE_SECS more"
            );
        }
    }
    Ok(())
}
