//! `leadpipe team …` and `leadpipe report speed-to-lead`: teams' working
//! hours, response targets and escalation, and the speed-to-lead report,
//! through the same domain calls as `/api/teams` and
//! `/api/reports/speed-to-lead`.

use clap::Subcommand;
use domain::lead::speed_to_lead::report::{self, ReportFilter};
use domain::lead::speed_to_lead::team::{self, Escalation, TeamSettings};
use domain::precondition::IfMatch;
use domain::store::Store;

use super::describe;
use super::output::OutputArgs;
use crate::wire::teams::TeamOut;

#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Teams with settings.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Create or replace a team's working hours, response target and
    /// escalation (`default`: for principals without a team).
    Set {
        /// The team's name, as routing rules and `token set --team` name it.
        name: String,
        /// An IANA time zone, e.g. Europe/Berlin.
        #[arg(long, default_value = "UTC")]
        time_zone: String,
        /// Working days, comma-separated: mon,tue,wed,thu,fri.
        #[arg(long, default_value = "mon,tue,wed,thu,fri")]
        days: String,
        /// Working hours, local: 09:00-17:30.
        #[arg(long, default_value = "09:00-17:00")]
        hours: String,
        /// Working minutes from assignment to the first response.
        #[arg(long)]
        target_minutes: i32,
        /// Who takes an overdue lead: next-available, or a principal id.
        #[arg(long)]
        escalate: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// How fast leads get an owner and an answer, per source and owner.
    SpeedToLead {
        /// 24h, 7d or 30d.
        #[arg(long, default_value = "24h")]
        window: String,
        /// Only leads of this source.
        #[arg(long)]
        source: Option<String>,
        /// Only leads owned by this team's members.
        #[arg(long)]
        team: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub async fn run_team(db: &Store, command: TeamCommand) -> anyhow::Result<()> {
    match command {
        TeamCommand::List { output } => {
            let rows: Vec<TeamOut> = team::list(db)
                .await?
                .into_iter()
                .map(TeamOut::from)
                .collect();
            output.print(
                &rows,
                &[
                    "name",
                    "time_zone",
                    "work_days",
                    "work_start",
                    "work_end",
                    "response_target_minutes",
                    "escalation",
                ],
            )?;
        }
        TeamCommand::Set {
            name,
            time_zone,
            days,
            hours,
            target_minutes,
            escalate,
        } => {
            let (start, end) = hours
                .split_once('-')
                .ok_or_else(|| anyhow::anyhow!("--hours: expected HH:MM-HH:MM, got '{hours}'"))?;
            let escalation = match escalate.as_deref() {
                None => None,
                Some("next-available") => Some(Escalation::NextAvailable),
                Some(id) => Some(Escalation::Principal {
                    principal_id: id.parse().map_err(|_| {
                        anyhow::anyhow!("--escalate: next-available or a principal id, got '{id}'")
                    })?,
                }),
            };
            let settings = TeamSettings {
                time_zone,
                work_days: days.split(',').map(|d| d.trim().to_owned()).collect(),
                work_start: start.trim().to_owned(),
                work_end: end.trim().to_owned(),
                response_target_minutes: target_minutes,
                escalation,
            };
            let txn = db.begin_write().await?;
            let (saved, _) = team::put(&*txn, &name, &settings, &IfMatch::Any)
                .await
                .map_err(describe)?;
            txn.commit().await?;
            println!("{}", serde_json::to_string(&TeamOut::from(saved))?);
        }
    }
    Ok(())
}

pub async fn run_report(db: &Store, command: ReportCommand) -> anyhow::Result<()> {
    match command {
        ReportCommand::SpeedToLead {
            window,
            source,
            team,
            output,
        } => {
            let filter = ReportFilter {
                window,
                source,
                team,
            };
            let report = report::report(db, &filter, domain::clock::now())
                .await
                .map_err(describe)?;
            let mut rows: Vec<serde_json::Value> = Vec::new();
            let row = |group: String, f: &report::Figures| {
                serde_json::json!({
                    "group": group, "leads": f.leads, "assigned": f.assigned,
                    "responded": f.responded,
                    "system_p50_s": f.system_delay_seconds.p50, "system_p90_s": f.system_delay_seconds.p90,
                    "rep_p50_s": f.rep_delay_seconds.p50, "rep_p90_s": f.rep_delay_seconds.p90,
                    "within_target": f.within_target, "breaches": f.breaches,
                })
            };
            rows.push(row("all".into(), &report.total));
            for s in &report.by_source {
                rows.push(row(format!("source {}", s.source), &s.figures));
            }
            for o in &report.by_owner {
                rows.push(row(format!("owner {}", o.owner_id), &o.figures));
            }
            output.print(
                &rows,
                &[
                    "group",
                    "leads",
                    "assigned",
                    "responded",
                    "system_p50_s",
                    "system_p90_s",
                    "rep_p50_s",
                    "rep_p90_s",
                    "within_target",
                    "breaches",
                ],
            )?;
        }
    }
    Ok(())
}
