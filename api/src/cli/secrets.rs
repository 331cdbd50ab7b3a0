//! `leadpipe secrets …`: the sealed secrets at rest.

use clap::Subcommand;
use domain::sealed::Keyring;

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Re-seal every stored secret (source secrets, pull auth values,
    /// subscription secrets, stored replies that reveal one) under the first
    /// configured key, and seal legacy plaintext ones. Safe to re-run.
    Rotate,
}

/// Checks for a sealing key before it opens the database.
pub async fn run_secrets(
    db: &crate::config::DbSettings,
    keyring: &Keyring,
    command: SecretsCommand,
) -> anyhow::Result<()> {
    match command {
        SecretsCommand::Rotate => {
            let Some(key_id) = keyring.current_key_id().map(str::to_owned) else {
                anyhow::bail!(domain::sealed::SealError::NoKey);
            };
            let conn = db.open(1, true, keyring).await?;
            let report = domain::secret_rotation::rotate(&conn, keyring).await?;
            println!(
                "re-sealed under key '{key_id}': {} source secrets, {} pull auth values, {} \
             subscription secrets, {} stored replies; {} already current; {} changed while \
             rotating (run again)",
                report.source_secrets,
                report.pull_auth_values,
                report.subscription_secrets,
                report.stored_replies,
                report.already_current,
                report.raced,
            );
        }
    }
    Ok(())
}
