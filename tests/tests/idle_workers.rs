//! Idle workers wait for their tick: an apalis storage fetches jobs once a
//! poll interval, not in a loop that keeps a core and the database busy.
//! Its own test binary, since it installs the global subscriber to count
//! the fetch statements sqlx logs.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use leadpipe_tests::captured::Captured;
use leadpipe_tests::{Backend, TestApp, postgres_skipped};
use tracing_subscriber::EnvFilter;
use workers::WorkerSettings;

/// Fetches of the job queue logged so far: apalis-sqlite's claiming
/// `UPDATE Jobs`, apalis-postgres's `get_jobs`.
fn fetches(captured: &Captured, backend: Backend) -> usize {
    let needle = match backend {
        Backend::Sqlite => "summary=\"UPDATE Jobs SET status",
        Backend::Postgres => "summary=\"SELECT * FROM apalis.get_jobs",
    };
    captured.text().matches(needle).count()
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
        settings.sweep_interval = Duration::from_secs(1);
        let before = fetches(&captured, backend);
        app.start_workers(settings);
        tokio::time::sleep(Duration::from_secs(2)).await;
        app.stop_workers().await;
        let fetched = fetches(&captured, backend) - before;
        let name = match backend {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        };
        // The inbox jobs look every 250 ms and the lead jobs every second:
        // about ten fetches in two seconds, a few more at start and stop.
        assert!(
            fetched <= 30,
            "{name}: the idle workers fetched jobs {fetched} times in 2 s"
        );
        assert!(fetched >= 2, "{name}: no fetch was counted");
    }
}
