//! `leadpipe delivery …`: the same operations as `/api/ops/deliveries`,
//! straight on the database.

use clap::Subcommand;
use domain::entities::outbox_delivery;
use domain::outbound::delivery::{self, DeliveryFilter};
use domain::page::IdWindow;
use domain::store::Store;
use sea_orm::EntityTrait;

use super::output::OutputArgs;
use super::{Exit, Failure};
use crate::wire::deliveries::OutboxDeliveryOut;

#[derive(Debug, Subcommand)]
pub enum DeliveryCommand {
    /// Outgoing deliveries, newest first.
    List {
        /// Only deliveries in this state.
        #[arg(long, value_parser = super::one_of([
            delivery::PENDING,
            delivery::DELIVERING,
            delivery::FAILED,
            delivery::DELIVERED,
            delivery::DEAD,
        ]))]
        state: Option<String>,
        /// Only deliveries to this subscription (its id).
        #[arg(long)]
        subscription: Option<i64>,
        /// The most deliveries listed (1 to 1000).
        #[arg(long, default_value_t = 50)]
        limit: u64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Put dead deliveries back in line: one by id, or all (of a subscription).
    Retry {
        /// One dead delivery (its id); without it, every dead one.
        id: Option<i64>,
        /// Every dead delivery to this subscription (its id).
        #[arg(long, conflicts_with = "id")]
        subscription: Option<i64>,
        /// Only count what would be retried.
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn run_delivery(db: &Store, command: DeliveryCommand) -> anyhow::Result<()> {
    match command {
        DeliveryCommand::List {
            state,
            subscription,
            limit,
            output,
        } => {
            let filter = DeliveryFilter {
                state,
                subscription_id: subscription,
            };
            let rows: Vec<OutboxDeliveryOut> = delivery::list(
                db,
                &filter,
                IdWindow {
                    limit: limit.clamp(1, 1_000),
                    before: None,
                },
            )
            .await?
            .data
            .into_iter()
            .map(OutboxDeliveryOut::from)
            .collect();
            output.print(
                &rows,
                &[
                    "id",
                    "subscription_id",
                    "outbox_event_id",
                    "state",
                    "attempts",
                    "last_status",
                    "next_attempt_at",
                    "last_error",
                ],
            )?;
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
            if let Some(id) = id
                && report.matched == 0
            {
                return Err(not_dead(db, id).await);
            }
            let count = |n: u64| match n {
                1 => "1 dead delivery".to_owned(),
                n => format!("{n} dead deliveries"),
            };
            if dry_run {
                println!("{} would be put back in line", count(report.matched));
            } else {
                println!("{} put back in line", count(report.retried));
            }
        }
    }
    Ok(())
}

/// Why delivery `id` cannot be retried: there is none (exit code 3), or it
/// is not dead (exit code 4).
async fn not_dead(db: &Store, id: i64) -> anyhow::Error {
    match outbox_delivery::Entity::find_by_id(id).one(db).await {
        Ok(None) => Failure::error(
            Exit::NotFound,
            format!("no delivery {id} (`leadpipe delivery list` shows them)"),
        ),
        Ok(Some(found)) => Failure::error(
            Exit::Conflict,
            format!(
                "delivery {id} is {}, not dead: only dead deliveries are put back in line",
                found.state
            ),
        ),
        Err(err) => err.into(),
    }
}
