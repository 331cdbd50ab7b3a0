//! `leadpipe task list`: follow-up tasks straight from the database, through
//! the same domain call as `GET /api/tasks` (who has overdue work, for a
//! morning report or a cron mail).

use clap::Subcommand;
use domain::crm::task::{self, TaskFilter};
use domain::store::Store;

use super::output::OutputArgs;
use crate::wire::tasks::TaskOut;

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// List tasks, soonest due first.
    List {
        /// Only the tasks this principal owns (an id).
        #[arg(long)]
        owner: Option<i64>,
        /// today, overdue or upcoming (open tasks only; "today" is the UTC day
        /// unless --utc-offset says otherwise).
        #[arg(long, value_parser = super::one_of(["today", "overdue", "upcoming"]))]
        due: Option<String>,
        /// Only open or only done tasks.
        #[arg(long, value_parser = super::one_of(["open", "done"]))]
        status: Option<String>,
        /// Where the day starts for --due today, e.g. +01:00.
        #[arg(long, allow_hyphen_values = true)]
        utc_offset: Option<chrono::FixedOffset>,
        /// The most tasks listed.
        #[arg(long, default_value_t = 50)]
        limit: u64,
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub async fn run_task(db: &Store, command: TaskCommand) -> anyhow::Result<()> {
    match command {
        TaskCommand::List {
            owner,
            due,
            status,
            utc_offset,
            limit,
            output,
        } => {
            let filter = TaskFilter {
                owner_id: owner,
                // Both were checked against their words by clap.
                status: status.as_deref().and_then(|s| s.parse().ok()),
                due: due.as_deref().and_then(|d| d.parse().ok()),
                utc_offset,
                subject: None,
            };
            let page =
                task::list(db, &filter, domain::page::clamp_limit(Some(limit)), None).await?;
            let rows: Vec<TaskOut> = page.data.into_iter().map(TaskOut::from).collect();
            output.print(
                &rows,
                &[
                    "id",
                    "due_at",
                    "status",
                    "owner_id",
                    "subject_type",
                    "subject_id",
                    "title",
                ],
            )?;
        }
    }
    Ok(())
}
