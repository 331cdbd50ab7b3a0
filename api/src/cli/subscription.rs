//! `leadpipe subscription …`: the same operations as `/api/subscriptions`,
//! straight on the database.

use chrono::{DateTime, Utc};
use clap::Subcommand;
use domain::net_guard::OutboundPolicy;
use domain::outbound::delivery;
use domain::outbound::subscription::{self, NewSubscription, SubscriptionView};
use domain::precondition::IfMatch;
use domain::sealed::Keyring;
use domain::store::Store;

use super::describe_missing;
use super::output::OutputArgs;

#[derive(Debug, Subcommand)]
pub enum SubscriptionCommand {
    /// Subscribe a downstream URL to lead events; prints its signing secret once.
    Add {
        /// Where to POST the events (http or https; an internal address
        /// only if LEADPIPE_OUTBOUND_ALLOW names its host).
        #[arg(long)]
        url: String,
        /// An event type to deliver (repeatable); none means every type.
        #[arg(long = "event-type")]
        event_types: Vec<String>,
        /// A note for people: whose system this is.
        #[arg(long)]
        description: Option<String>,
        /// Deliveries a second at most (1 to 10000), across every worker
        /// process; without it, no cap.
        #[arg(long)]
        rate_limit: Option<i32>,
    },
    /// List subscriptions (secrets are never shown).
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one subscription: its state, why it is disabled, since when it fails.
    Show {
        /// The subscription's id (`leadpipe subscription list`).
        id: i64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Enable a disabled subscription again; its held deliveries go out.
    Enable {
        /// The subscription's id (`leadpipe subscription list`).
        id: i64,
    },
    /// Send again every delivery since a moment that failed or died.
    Recover {
        /// The subscription's id (`leadpipe subscription list`).
        id: i64,
        /// Deliveries created at or after this instant (RFC 3339, e.g.
        /// 2026-12-01T00:00:00Z).
        #[arg(long)]
        since: DateTime<Utc>,
    },
    /// Stop delivering to a subscription.
    Remove {
        /// The subscription's id (`leadpipe subscription list`).
        id: i64,
    },
}

/// The columns `list` and `show` print.
const COLUMNS: &[&str] = &[
    "id",
    "state",
    "url",
    "event_types",
    "description",
    "disabled_reason",
    "failing_since",
    "rate_limit",
];

pub async fn run_subscription(
    db: &Store,
    outbound: &OutboundPolicy,
    keys: &Keyring,
    command: SubscriptionCommand,
) -> anyhow::Result<()> {
    match command {
        SubscriptionCommand::Add {
            url,
            event_types,
            description,
            rate_limit,
        } => {
            // The row and its sealed secret are written together.
            let txn = db.begin_write().await?;
            let created = subscription::create(
                &txn,
                outbound,
                keys,
                NewSubscription {
                    url,
                    event_types,
                    description,
                    rate_limit,
                },
            )
            .await
            .map_err(describe_missing("subscription"))?;
            txn.commit().await?;
            eprintln!(
                "created subscription {}; verify our signatures with this secret (shown only once):",
                created.subscription.id
            );
            println!("{}", created.secret);
        }
        SubscriptionCommand::List { output } => {
            output.print(&subscription::list(db).await?, COLUMNS)?;
        }
        SubscriptionCommand::Show { id, output } => {
            let found = subscription::find(db, id)
                .await
                .map_err(describe_missing("subscription"))?;
            output.print(&[SubscriptionView::from(found)], COLUMNS)?;
        }
        SubscriptionCommand::Enable { id } => {
            let enabled = subscription::enable(db, outbound, id, &IfMatch::Any)
                .await
                .map_err(describe_missing("subscription"))?;
            println!("subscription {} is {}", enabled.id, enabled.state);
        }
        SubscriptionCommand::Recover { id, since } => {
            let recovered = delivery::recover(db, id, since)
                .await
                .map_err(describe_missing("subscription"))?;
            println!(
                "subscription {id}: {} dead and {} failed deliveries sent again",
                recovered.dead, recovered.failed
            );
        }
        SubscriptionCommand::Remove { id } => {
            subscription::delete(db, id)
                .await
                .map_err(describe_missing("subscription"))?;
            println!("subscription {id} removed");
        }
    }
    Ok(())
}
