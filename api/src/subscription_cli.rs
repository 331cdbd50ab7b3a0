//! `leadpipe subscription …` and `leadpipe delivery …`: the same operations as
//! `/api/subscriptions` and `/api/ops/deliveries`, straight on the database.

use clap::Subcommand;
use domain::outbound::delivery::{self, DeliveryFilter};
use domain::outbound::net_guard::OutboundPolicy;
use domain::outbound::subscription::{self, NewSubscription};
use domain::sealed::Keyring;
use sea_orm::{DatabaseConnection, TransactionTrait};

#[derive(Debug, Subcommand)]
pub enum SubscriptionCommand {
    /// Subscribe a downstream URL to lead events; prints its signing secret once.
    Add {
        #[arg(long)]
        url: String,
        /// An event type to deliver (repeatable); none means every type.
        #[arg(long = "event-type")]
        event_types: Vec<String>,
        #[arg(long)]
        description: Option<String>,
    },
    /// List subscriptions (secrets are never shown).
    List,
    /// Stop delivering to a subscription.
    Remove { id: i64 },
}

#[derive(Debug, Subcommand)]
pub enum DeliveryCommand {
    /// Outgoing deliveries, newest first.
    List {
        /// pending, delivering, failed, delivered or dead
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        subscription: Option<i64>,
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
    /// Put dead deliveries back in line: one by id, or all (of a subscription).
    Retry {
        id: Option<i64>,
        #[arg(long, conflicts_with = "id")]
        subscription: Option<i64>,
        /// Only count what would be retried.
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn run_subscription(
    db: &DatabaseConnection,
    outbound: &OutboundPolicy,
    keys: &Keyring,
    command: SubscriptionCommand,
) -> anyhow::Result<()> {
    match command {
        SubscriptionCommand::Add {
            url,
            event_types,
            description,
        } => {
            // The row and its sealed secret are written together.
            let txn = db.begin().await?;
            let created = subscription::create(
                &txn,
                outbound,
                keys,
                NewSubscription {
                    url,
                    event_types,
                    description,
                },
            )
            .await
            .map_err(describe)?;
            txn.commit().await?;
            eprintln!(
                "created subscription {}; verify our signatures with this secret (shown only once):",
                created.subscription.id
            );
            println!("{}", created.secret);
        }
        SubscriptionCommand::List => {
            for view in subscription::list(db).await? {
                println!("{}", serde_json::to_string(&view)?);
            }
        }
        SubscriptionCommand::Remove { id } => {
            subscription::delete(db, id).await.map_err(describe)?;
            println!("subscription {id} removed");
        }
    }
    Ok(())
}

pub async fn run_delivery(db: &DatabaseConnection, command: DeliveryCommand) -> anyhow::Result<()> {
    match command {
        DeliveryCommand::List {
            state,
            subscription,
            limit,
        } => {
            let filter = DeliveryFilter {
                state,
                subscription_id: subscription,
            };
            for row in delivery::list(db, &filter, limit.clamp(1, 1_000), None).await? {
                println!("{}", serde_json::to_string(&row)?);
            }
        }
        DeliveryCommand::Retry {
            id,
            subscription,
            dry_run,
        } => {
            let ids = id.map(|id| vec![id]);
            let filter = DeliveryFilter {
                state: None,
                subscription_id: subscription,
            };
            let report = delivery::retry_dead(db, ids.as_deref(), &filter, dry_run).await?;
            println!("{}", serde_json::to_string(&report)?);
        }
    }
    Ok(())
}

/// Validation errors name their fields; say so on the command line.
fn describe(err: domain::Error) -> anyhow::Error {
    match err {
        domain::Error::Invalid(fields) => anyhow::anyhow!(
            "{}",
            fields
                .iter()
                .map(|f| format!("{} {}", f.field, f.message))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        domain::Error::NotFound => anyhow::anyhow!("no such subscription"),
        other => other.into(),
    }
}
