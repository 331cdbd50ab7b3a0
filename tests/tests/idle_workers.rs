//! Idle workers wait for their tick: the inbox and lead drains claim from
//! their tables once a poll interval, not in a loop that keeps a core and
//! the database busy. Its own test binary, since it installs the global
//! subscriber to count the claim statements sqlx logs.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use leadpipe_tests::captured::Captured;
use leadpipe_tests::{Backend, TestApp, postgres_skipped};
use tracing_subscriber::EnvFilter;
use workers::WorkerSettings;

/// Claims logged so far: the inbox drain's claiming `UPDATE inbox_event`
/// (it counts the attempt) and the lead drain's `SELECT` of waiting leads
/// (the backlog gauge's count of them reads no columns).
fn fetches(captured: &Captured, _backend: Backend) -> usize {
    let text = captured.text();
    let inbox = r#"\"attempts\" = \"attempts\" +"#;
    let leads = r#"\"lead\".\"updated_at\" FROM \"lead\" WHERE \"lead\".\"processed_version\" < \"lead\".\"version\""#;
    text.matches(inbox).count() + text.matches(leads).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_workers_fetch_jobs_once_a_tick() {
    let captured = Captured::default();
    let sink = captured.clone();
    api::telemetry::init_with(move || sink.clone(), EnvFilter::new("sqlx::query=debug"));
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if backend == Backend::Postgres && postgres_skipped() {
            continue;
        }
        let mut app = TestApp::spawn(backend).await;
        let mut settings = WorkerSettings::for_tests();
        settings.poll_interval = Duration::from_millis(250);
        settings.housekeeping_interval = Duration::from_secs(1);
        let before = fetches(&captured, backend);
        app.start_workers(settings);
        tokio::time::sleep(Duration::from_secs(2)).await;
        app.stop_workers().await;
        let fetched = fetches(&captured, backend) - before;
        let name = match backend {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        };
        // The inbox and lead drains look every 250 ms: about sixteen
        // claims in two seconds, a few more at start and stop.
        assert!(
            fetched <= 40,
            "{name}: the idle workers claimed {fetched} times in 2 s"
        );
        assert!(fetched >= 4, "{name}: no claim was counted");
    }
}
