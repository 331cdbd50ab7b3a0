//! `leadpipe work` on its own (the layout for several nodes) serves its
//! `/metrics` on `LEADPIPE_METRICS_BIND`: what only a worker counts — inbox
//! attempts, the apalis workers' tasks, deliveries, reconcile runs — must
//! reach Prometheus too. It stops cleanly on SIGTERM, listener included.

#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use leadpipe_tests::webhooks::lead_event;
use leadpipe_tests::{Backend, TestApp, eventually, on_both_backends};

on_both_backends!(a_worker_process_serves_its_own_counters_on_the_metrics_bind);

/// Stops the worker process if the test fails half-way.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `ok` count of the apalis worker `worker` in a scrape, if it has one.
fn tasks_counted(scrape: &str, worker: &str) -> Option<f64> {
    let labels = format!(r#"worker="{worker}""#);
    scrape.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        (series.starts_with("leadpipe_worker_tasks_total{")
            && series.contains(&labels)
            && series.contains(r#"result="ok""#))
        .then(|| value.parse().ok())?
    })
}

async fn a_worker_process_serves_its_own_counters_on_the_metrics_bind(backend: Backend) {
    // The API alone: it stores the event and queues its job; the separate
    // worker process below must process it.
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let body = lead_event("w-1", "ada@example.com", "2026-11-30T10:00:00Z");
    let response = app.post_standard("webform", &key, "msg_w1", &body).await;
    assert_eq!(response.status(), 202);
    let ack: serde_json::Value = response.json().await.unwrap();

    let port = free_port();
    let mut worker = Worker(
        Command::new(env!("CARGO_BIN_EXE_leadpipe-cli"))
            .args(["work", "--no-migrate"])
            .env("DATABASE_URL", &app.database_url)
            .env(
                "LEADPIPE_SECRET_KEY",
                format!("test:{}", STANDARD.encode([7u8; 32])),
            )
            .env("LEADPIPE_METRICS_BIND", format!("127.0.0.1:{port}"))
            .env("LEADPIPE_WORKER_POLL_INTERVAL", "50ms")
            .env("LEADPIPE_SWEEP_GRACE", "1s")
            .env("LEADPIPE_SWEEP_INTERVAL", "1s")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    app.wait_for_state(ack["id"].as_i64().unwrap(), "processed")
        .await;
    let url = format!("http://127.0.0.1:{port}/metrics");
    let scrape = eventually(
        &format!("the worker to serve its counters on {url}"),
        Duration::from_secs(10),
        async || {
            let response = app.client.get(&url).send().await.ok()?;
            if response.status() != 200 {
                return None;
            }
            let text = response.text().await.unwrap();
            // A task is counted once it has returned, just after its attempts;
            // the lead's pass follows the event's.
            (text.contains("leadpipe_inbox_attempts_total")
                && tasks_counted(&text, "lead_drain").is_some())
            .then_some(text)
        },
    )
    .await;
    assert!(
        scrape
            .lines()
            .any(|l| l.starts_with("leadpipe_inbox_attempts_total{")
                && l.contains(r#"result="processed""#)),
        "{scrape}"
    );
    // The event was taken by the apalis inbox drain, as a task of its own
    // worker; every apalis worker counts its tasks in one series.
    assert!(tasks_counted(&scrape, "inbox_drain").is_some(), "{scrape}");
    // Passes that found nothing (a poll every 50 ms here) are not counted:
    // one lead took one pass, or two if it came in two batches.
    let lead_passes = tasks_counted(&scrape, "lead_drain").unwrap();
    assert!((1.0..=2.0).contains(&lead_passes), "{scrape}");
    // The database gauges are there too, refreshed by the worker itself.
    assert!(
        scrape.contains("leadpipe_metrics_gauges_age_seconds"),
        "{scrape}"
    );
    // Only /metrics, and no token needed: anything else is 404.
    let other = app
        .client
        .get(format!("http://127.0.0.1:{port}/api/leads"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);

    let pid = worker.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = eventually(
        "the worker to stop on SIGTERM",
        Duration::from_secs(15),
        async || worker.0.try_wait().unwrap(),
    )
    .await;
    assert!(status.success(), "the worker exited with {status}");
}
