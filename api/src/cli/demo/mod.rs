//! `leadpipe demo`: the whole pipeline in one command. It starts leadpipe
//! in-process (API and workers, on a fresh SQLite file by default) and a
//! fake lead source on loopback, sends every record as signed Standard
//! Webhooks deliveries — some twice, some never — waits for the inbox to be
//! processed, runs a reconcile through the ops API, and checks that every
//! record is in the lead table exactly once.

pub mod fake_source;

use domain::store::Store;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use domain::auth::Role;
use domain::entities::{inbox_event, lead};
use domain::inbound::signature::standard_webhooks;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::config::HttpSettings;
use crate::startup::Application;
use fake_source::FakeSource;

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Records the fake source holds.
    #[arg(long, default_value_t = 1000)]
    pub records: usize,
    /// Sources, each with a fake sender of `--records` records; their
    /// reconcile runs start at once.
    #[arg(long, default_value_t = 1)]
    pub sources: usize,
    /// Share of records whose webhook is delivered twice (0–1).
    #[arg(long, default_value_t = 0.3)]
    pub redeliver_share: f64,
    /// Share of records whose webhook never arrives (0–1); reconcile repairs them.
    #[arg(long, default_value_t = 0.1)]
    pub drop_share: f64,
    /// Records per pull request.
    #[arg(long, default_value_t = 500)]
    pub page_size: u32,
    /// Webhook deliveries in flight at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Seed of which records are dropped or redelivered.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Run on this database instead of a fresh temporary SQLite file
    /// (`postgres://…` works too; the demo uses a source of its own).
    #[arg(long)]
    pub db: Option<String>,
    /// Keep the temporary SQLite file (its path is printed).
    #[arg(long)]
    pub keep_db: bool,
    /// No progress bars.
    #[arg(long)]
    pub no_progress: bool,
    /// Then reconcile everything once more from the start (every record
    /// `unchanged`): what a reconcile costs when the webhooks worked.
    #[arg(long)]
    pub reconcile_again: bool,
    /// Seals the demo source's secrets: the configured key, or else
    /// development mode's well-known one (the demo's data is throwaway).
    #[arg(skip)]
    pub keyring: domain::sealed::Keyring,
}

impl DemoArgs {
    /// The defaults, for `records` records (tests).
    pub fn with_records(records: usize) -> Self {
        Self {
            records,
            sources: 1,
            redeliver_share: 0.3,
            drop_share: 0.1,
            page_size: 500,
            concurrency: 16,
            seed: 7,
            db: None,
            keep_db: false,
            no_progress: true,
            reconcile_again: false,
            keyring: domain::sealed::Keyring::for_tests(),
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        for (name, share) in [
            ("--redeliver-share", self.redeliver_share),
            ("--drop-share", self.drop_share),
        ] {
            anyhow::ensure!(
                (0.0..=1.0).contains(&share),
                "{name} must be between 0 and 1"
            );
        }
        anyhow::ensure!(self.records > 0, "--records must be at least 1");
        anyhow::ensure!(
            (1..=64).contains(&self.sources),
            "--sources must be 1 to 64"
        );
        anyhow::ensure!(
            (1..=1000).contains(&self.page_size),
            "--page-size must be 1 to 1000"
        );
        Ok(())
    }
}

/// What the demo saw; `failures` lists the invariants that did not hold.
#[derive(Debug, Clone)]
pub struct DemoReport {
    pub source: String,
    pub records: u64,
    pub deliveries_sent: u64,
    pub duplicates_absorbed: u64,
    pub redeliveries: u64,
    pub dropped: u64,
    pub rejected_deliveries: u64,
    pub created_by_webhooks: u64,
    pub reconcile_run: Value,
    pub missed_repaired: u64,
    pub leads_in_table: u64,
    pub duplicate_leads: u64,
    pub webhook_time: Duration,
    pub reconcile_time: Duration,
    /// `--reconcile-again`: the second run (all unchanged) and its time.
    pub second_run: Option<(Value, Duration)>,
}

impl DemoReport {
    /// The invariants, as messages for the ones that fail.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                failures.push(what);
            }
        };
        check(
            self.leads_in_table == self.records,
            format!(
                "leads in the table ({}) != records at the source ({})",
                self.leads_in_table, self.records
            ),
        );
        check(
            self.duplicate_leads == 0,
            format!("{} duplicate leads in the table", self.duplicate_leads),
        );
        check(
            self.reconcile_run["state"] == "done",
            format!("the reconcile run ended {}", self.reconcile_run["state"]),
        );
        check(
            self.missed_repaired == self.dropped,
            format!(
                "reconcile repaired {} records, but {} deliveries were dropped",
                self.missed_repaired, self.dropped
            ),
        );
        check(
            self.created_by_webhooks == self.records - self.dropped,
            format!(
                "webhooks created {} leads, expected {}",
                self.created_by_webhooks,
                self.records - self.dropped
            ),
        );
        check(
            self.duplicates_absorbed == self.redeliveries,
            format!(
                "{} duplicates absorbed, but {} redeliveries sent",
                self.duplicates_absorbed, self.redeliveries
            ),
        );
        check(
            self.rejected_deliveries == 0,
            format!("{} deliveries were rejected", self.rejected_deliveries),
        );
        if let Some((run, _)) = &self.second_run {
            check(
                run["state"] == "done" && run["unchanged"].as_u64() == Some(self.records),
                format!(
                    "the second reconcile ended {} with {} unchanged: {}",
                    run["state"], run["unchanged"], run["error"]
                ),
            );
        }
        failures
    }

    pub fn render(&self) -> String {
        let mark = |ok: bool| if ok { "ok" } else { "FAILED" };
        let rate = |n: u64, t: Duration| (n as f64 / t.as_secs_f64().max(0.001)).round() as u64;
        let fetched = self.reconcile_run["fetched"].as_u64().unwrap_or(0);
        let rows = [
            ("records at the source", self.records, String::new()),
            (
                "webhook deliveries sent",
                self.deliveries_sent,
                format!(
                    "{} redelivered, {} dropped",
                    self.redeliveries, self.dropped
                ),
            ),
            (
                "duplicates absorbed by the inbox",
                self.duplicates_absorbed,
                mark(self.duplicates_absorbed == self.redeliveries).into(),
            ),
            (
                "leads created by webhooks",
                self.created_by_webhooks,
                String::new(),
            ),
            (
                "missed and repaired by reconcile",
                self.missed_repaired,
                format!("{} (= dropped)", mark(self.missed_repaired == self.dropped)),
            ),
            (
                "leads in the table",
                self.leads_in_table,
                format!(
                    "{} (= records at the source)",
                    mark(self.leads_in_table == self.records)
                ),
            ),
            (
                "duplicate leads in the table",
                self.duplicate_leads,
                mark(self.duplicate_leads == 0).into(),
            ),
        ];
        let mut out = String::new();
        for (label, n, note) in rows {
            out.push_str(&format!("  {label:<34} {n:>9}   {note}\n"));
        }
        out.push_str(&format!(
            "\n  webhooks: {:.1} s ({} deliveries/s)   reconcile run {}: {:.1} s, {} records in {} pages ({} records/s)\n",
            self.webhook_time.as_secs_f64(),
            rate(self.deliveries_sent, self.webhook_time),
            self.reconcile_run["id"],
            self.reconcile_time.as_secs_f64(),
            fetched,
            self.reconcile_run["pages"],
            rate(fetched, self.reconcile_time),
        ));
        if let Some((run, time)) = &self.second_run {
            let fetched = run["fetched"].as_u64().unwrap_or(0);
            out.push_str(&format!(
                "  reconcile again from the start (run {}): {:.1} s, {} unchanged of {} ({} records/s)\n",
                run["id"],
                time.as_secs_f64(),
                run["unchanged"],
                fetched,
                rate(fetched, *time),
            ));
        }
        out
    }
}

/// `leadpipe demo`: runs it, prints the table, fails when an invariant does.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    args.validate()?;
    let (database_url, temp) = match &args.db {
        Some(url) => (url.clone(), None),
        None => {
            let dir = std::env::temp_dir().join(format!("leadpipe-demo-{}", uuid::Uuid::now_v7()));
            std::fs::create_dir_all(&dir).context("creating the demo's directory")?;
            let url = format!("sqlite://{}?mode=rwc", dir.join("demo.db").display());
            (url, Some(dir))
        }
    };
    eprintln!(
        "leadpipe demo: {} source(s) of {} records, {:.0}% redelivered, {:.0}% dropped, on {}",
        args.sources,
        args.records,
        args.redeliver_share * 100.0,
        args.drop_share * 100.0,
        temp.as_ref().map_or_else(
            || "the given database".to_owned(),
            |d| d.join("demo.db").display().to_string()
        )
    );
    let result = run_demos(&database_url, &args).await;
    if let Some(dir) = temp {
        if args.keep_db {
            eprintln!("database kept: {}", dir.join("demo.db").display());
        } else {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    let demo = result?;
    let several = demo.reports.len() > 1;
    let mut failures = Vec::new();
    for report in &demo.reports {
        if several {
            println!("source {}:", report.source);
        }
        println!("{}", report.render());
        failures.extend(
            report
                .failures()
                .into_iter()
                .map(|f| format!("{}: {f}", report.source)),
        );
    }
    if several {
        println!("{}", demo.render_together());
    }
    if failures.is_empty() {
        println!("every record is in the lead table exactly once.");
        Ok(())
    } else {
        anyhow::bail!("invariants failed: {}", failures.join("; "))
    }
}

/// Every source's report, and the reconcile of all of them at once.
#[derive(Debug, Clone)]
pub struct DemoRuns {
    pub reports: Vec<DemoReport>,
    /// From the first run's start to the last run's end: the runs of
    /// different sources overlap.
    pub reconcile_time: Duration,
}

impl DemoRuns {
    /// The line that sums up the runs reconciled together.
    pub fn render_together(&self) -> String {
        let fetched: u64 = self
            .reports
            .iter()
            .map(|r| r.reconcile_run["fetched"].as_u64().unwrap_or(0))
            .sum();
        format!(
            "  {} sources reconciled at once: {fetched} records in {:.1} s ({} records/s together)\n",
            self.reports.len(),
            self.reconcile_time.as_secs_f64(),
            (fetched as f64 / self.reconcile_time.as_secs_f64().max(0.001)).round() as u64,
        )
    }
}

/// The demo of one source on `database_url`; returns what it saw (the
/// caller judges).
pub async fn run_demo(database_url: &str, args: &DemoArgs) -> anyhow::Result<DemoReport> {
    let args = DemoArgs {
        sources: 1,
        ..args.clone()
    };
    run_demos(database_url, &args)
        .await?
        .reports
        .pop()
        .context("the demo reported no source")
}

/// One source of the demo: its fake sender and how leadpipe knows it.
struct Feed {
    fake: FakeSource,
    source: String,
    secret: String,
}

/// What the webhooks of one source did.
struct Sent {
    deliveries: u64,
    duplicates: u64,
    rejected: u64,
    redeliveries: u64,
    dropped: u64,
    time: Duration,
}

/// The demo of `args.sources` sources on `database_url`: each source's
/// webhooks in turn, then every source's reconcile started at once, as a
/// deployment with several senders reconciles them.
pub async fn run_demos(database_url: &str, args: &DemoArgs) -> anyhow::Result<DemoRuns> {
    args.validate()?;
    // A connection for each run writing a page, and some for the API.
    let pool = u32::try_from(args.sources + 4).unwrap_or(u32::MAX).max(8);
    let db = crate::storage::open(database_url, pool, true, &args.keyring).await?;
    // Loopback settings with fast retries: the demo's peers are all local.
    let mut http = HttpSettings::for_tests();
    http.outbound_allow = "127.0.0.1".into();
    // Its own fake sender floods one source on purpose.
    http.webhook_rate = 0;
    // As `serve` refreshes its gauges, not twice a second as the tests do:
    // `bench/run` reconciles through this command, and each refresh counts
    // the growing lead table.
    http.metrics.refresh_secs = crate::config::DEFAULT_METRICS_REFRESH_SECS;
    http.keyring = args.keyring.clone();
    let app = Application::build(db.clone(), http)?;
    let base = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    let mut worker_settings = workers::WorkerSettings::for_tests().with_keyring(&args.keyring);
    worker_settings.concurrency = 8;
    let workers = Workers::start(db.clone(), worker_settings);

    let client = reqwest::Client::new();
    let admin =
        domain::auth::create_principal(&db, &principal_name("demo-admin"), Role::Admin, None)
            .await?
            .token;
    let ops = domain::auth::create_principal(&db, &principal_name("demo-ops"), Role::Ops, None)
        .await?
        .token;
    // One run at a time has a progress bar; several at once would overwrite it.
    let hide_progress = args.no_progress || args.sources > 1;
    let mut feeds = Vec::with_capacity(args.sources);
    for index in 0..args.sources {
        let feed = add_feed(&client, &base, &admin, args, index).await?;
        feeds.push(feed);
    }
    let mut sent = Vec::with_capacity(feeds.len());
    for (index, feed) in feeds.iter().enumerate() {
        sent.push(
            send_webhooks(&db, &client, &base, feed, args, index as u64, hide_progress).await?,
        );
    }
    workers.stop().await;
    let mut created_by_webhooks = Vec::with_capacity(feeds.len());
    for feed in &feeds {
        created_by_webhooks.push(count_leads(&db, &feed.source).await?);
    }

    let api = Api {
        client: &client,
        base: &base,
        token: &ops,
    };
    let reconcile_all = |body: Value| {
        let api = &api;
        let feeds = &feeds;
        async move {
            let started = Instant::now();
            let runs = futures::future::try_join_all(feeds.iter().map(|feed| {
                let body = body.clone();
                async move {
                    let started = Instant::now();
                    let run = api
                        .reconcile(&feed.source, body, hide_progress, args.records)
                        .await?;
                    anyhow::Ok((run, started.elapsed()))
                }
            }))
            .await?;
            anyhow::Ok((runs, started.elapsed()))
        }
    };
    let (runs, reconcile_time) = reconcile_all(json!({})).await?;
    let second_runs = if args.reconcile_again {
        Some(reconcile_all(json!({"from_start": true})).await?.0)
    } else {
        None
    };

    let mut reports = Vec::with_capacity(feeds.len());
    for (index, ((feed, sent), created)) in
        feeds.iter().zip(sent).zip(created_by_webhooks).enumerate()
    {
        feed.fake.stop().await;
        let (run, time) = runs[index].clone();
        reports.push(DemoReport {
            records: args.records as u64,
            deliveries_sent: sent.deliveries,
            duplicates_absorbed: sent.duplicates,
            redeliveries: sent.redeliveries,
            dropped: sent.dropped,
            rejected_deliveries: sent.rejected,
            created_by_webhooks: created,
            missed_repaired: run["missed"].as_u64().unwrap_or(0),
            reconcile_run: run,
            leads_in_table: count_leads(&db, &feed.source).await?,
            duplicate_leads: duplicate_leads(&db, &feed.source).await?,
            webhook_time: sent.time,
            reconcile_time: time,
            second_run: second_runs.as_ref().map(|runs| runs[index].clone()),
            source: feed.source.clone(),
        });
    }
    Ok(DemoRuns {
        reports,
        reconcile_time,
    })
}

/// Starts the fake sender of source `index` and configures the source.
async fn add_feed(
    client: &reqwest::Client,
    base: &str,
    admin: &str,
    args: &DemoArgs,
    index: usize,
) -> anyhow::Result<Feed> {
    let fake = FakeSource::start(args.records).await?;
    let mut source = if args.db.is_some() {
        format!("demo-partner-{:06x}", rand::random::<u32>() & 0xff_ffff)
    } else {
        "demo-partner".to_owned()
    };
    if args.sources > 1 {
        source.push_str(&format!("-{}", index + 1));
    }
    let secret = domain::crypto::generate_standard_secret();
    let saved = client
        .post(format!("{base}/api/sources"))
        .bearer_auth(admin)
        .json(
            &json!({"name": source, "scheme": "standard-webhooks", "secrets": [secret],
                      "pull_url": fake.pull_url, "pull_page_size": args.page_size}),
        )
        .send()
        .await?;
    anyhow::ensure!(
        saved.status().is_success(),
        "configuring the source failed: {}",
        saved.text().await.unwrap_or_default()
    );
    Ok(Feed {
        fake,
        source,
        secret,
    })
}

/// Sends one source's webhooks and waits until the inbox has processed them.
async fn send_webhooks(
    db: &Store,
    client: &reqwest::Client,
    base: &str,
    feed: &Feed,
    args: &DemoArgs,
    index: u64,
    hide_progress: bool,
) -> anyhow::Result<Sent> {
    // Which records are dropped, which are sent twice; shuffled so a
    // redelivery may overtake its first copy, as on the internet.
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed.wrapping_add(index));
    let mut plan = Vec::with_capacity(args.records * 2);
    let (mut dropped, mut redeliveries) = (0u64, 0u64);
    for index in 0..args.records {
        if rng.random::<f64>() < args.drop_share {
            dropped += 1;
            continue;
        }
        plan.push(index);
        if rng.random::<f64>() < args.redeliver_share {
            plan.push(index);
            redeliveries += 1;
        }
    }
    plan.shuffle(&mut rng);

    let bar = progress_bar(hide_progress, plan.len() as u64, "webhooks");
    let started = Instant::now();
    let url = format!("{base}/webhooks/{}", feed.source);
    let answers: Vec<Result<u16, String>> = futures::stream::iter(plan.iter().copied())
        .map(|index| {
            let (event_id, body) = feed.fake.delivery(index);
            let (url, secret, bar) = (&url, &feed.secret, &bar);
            async move {
                let answer = deliver(client, url, secret, &event_id, body).await;
                bar.inc(1);
                answer
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .collect()
        .await;
    let (mut accepted, mut duplicates, mut rejected) = (0u64, 0u64, 0u64);
    for answer in answers {
        match answer {
            Ok(202) => accepted += 1,
            Ok(200) => duplicates += 1,
            Ok(_) | Err(_) => rejected += 1,
        }
    }
    bar.set_message("waiting for the inbox to be processed");
    wait_for_inbox(db, &feed.source, accepted, args.records).await?;
    bar.finish_and_clear();
    Ok(Sent {
        deliveries: plan.len() as u64,
        duplicates,
        rejected,
        redeliveries,
        dropped,
        time: started.elapsed(),
    })
}

/// The ops API as the demo uses it.
struct Api<'a> {
    client: &'a reqwest::Client,
    base: &'a str,
    token: &'a str,
}

impl Api<'_> {
    /// Starts a run and follows it to its end; returns it.
    async fn reconcile(
        &self,
        source: &str,
        body: Value,
        no_progress: bool,
        records: usize,
    ) -> anyhow::Result<Value> {
        let bar = progress_bar(no_progress, records as u64, "reconcile");
        let response = self
            .client
            .post(format!("{}/api/ops/reconcile/{source}", self.base))
            .bearer_auth(self.token)
            .json(&body)
            .send()
            .await?;
        anyhow::ensure!(
            response.status() == 202,
            "starting the reconcile failed: {}",
            response.text().await.unwrap_or_default()
        );
        let run: Value = response.json().await?;
        let run_url = format!("{}/api/ops/reconcile-runs/{}", self.base, run["id"]);
        loop {
            let run: Value = self
                .client
                .get(&run_url)
                .bearer_auth(self.token)
                .send()
                .await?
                .json()
                .await?;
            bar.set_position(run["fetched"].as_u64().unwrap_or(0));
            if run["state"] != "running" {
                bar.finish_and_clear();
                return Ok(run);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One signed Standard Webhooks delivery; the status it got.
async fn deliver(
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    event_id: &str,
    body: Vec<u8>,
) -> Result<u16, String> {
    let timestamp = chrono::Utc::now().timestamp();
    let signature =
        standard_webhooks::sign(secret, event_id, timestamp, &body).map_err(|e| e.to_string())?;
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header(standard_webhooks::ID_HEADER, event_id)
        .header(standard_webhooks::TIMESTAMP_HEADER, timestamp.to_string())
        .header(standard_webhooks::SIGNATURE_HEADER, signature)
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    Ok(response.status().as_u16())
}

/// Waits until every accepted event is processed (or one is dead).
async fn wait_for_inbox(
    db: &Store,
    source: &str,
    accepted: u64,
    records: usize,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60 + records as u64 / 20);
    loop {
        let count = |state: &'static str| {
            inbox_event::Entity::find()
                .filter(inbox_event::Column::Source.eq(source))
                .filter(inbox_event::Column::State.eq(state))
                .count(db)
        };
        let processed = count("processed").await?;
        let dead = count("dead").await?;
        anyhow::ensure!(dead == 0, "{dead} inbox events are dead");
        if processed >= accepted {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the inbox was not processed in time ({processed} of {accepted})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn count_leads(db: &Store, source: &str) -> anyhow::Result<u64> {
    Ok(lead::Entity::find()
        .filter(lead::Column::Source.eq(source))
        .count(db)
        .await?)
}

/// `source_ref`s stored more than once (the unique key makes this 0).
async fn duplicate_leads(db: &Store, source: &str) -> anyhow::Result<u64> {
    use sea_orm::sea_query::{Expr, ExprTrait};
    Ok(lead::Entity::find()
        .select_only()
        .column(lead::Column::SourceRef)
        .filter(lead::Column::Source.eq(source))
        .group_by(lead::Column::SourceRef)
        .having(Expr::col(lead::Column::Id).count().gt(1))
        .count(db)
        .await?)
}

fn principal_name(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

fn progress_bar(hidden: bool, total: u64, what: &'static str) -> ProgressBar {
    let bar = if hidden || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{what:>10} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// The worker runtime, in-process, until `stop`.
struct Workers {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Workers {
    fn start(db: Store, settings: workers::WorkerSettings) -> Self {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            if let Err(error) = workers::runtime::run(db, settings, shutdown).await {
                tracing::error!(%error, "demo workers failed");
            }
        });
        Self { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}
