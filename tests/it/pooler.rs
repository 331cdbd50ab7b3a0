//! leadpipe behind PgBouncer in transaction pooling mode, the pooler
//! `scripts/test` starts in front of the throwaway PostgreSQL
//! (`LEADPIPE_TEST_PGBOUNCER_URL`), with `LEADPIPE_DB_POOLER=transaction`:
//! two API nodes and a worker take concurrent intake and signed webhooks
//! through it, each lead written once, the worker woken by `LISTEN` on
//! `DATABASE_DIRECT_URL`; without that URL the worker polls and pending
//! migrations are refused.

#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use domain::entities::{inbox_event, lead, outbox_event};
use leadpipe_tests::cli::{self, server_key};
use leadpipe_tests::webhooks::{lead_event, standard_headers};
use leadpipe_tests::{Backend, TestApp, eventually, fresh_postgres_database};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// The pooler's URL for the database `direct_url` names; `None` (the test
/// skips, saying so) without a pooler, except in CI.
fn through_the_pooler(direct_url: &str) -> Option<String> {
    let Ok(pooler) = std::env::var("LEADPIPE_TEST_PGBOUNCER_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but LEADPIPE_TEST_PGBOUNCER_URL is not: scripts/test starts PgBouncer"
        );
        eprintln!("skipped: no PgBouncer (scripts/test starts one)");
        return None;
    };
    let (base, _) = pooler.rsplit_once('/').unwrap();
    let (_, name) = direct_url.rsplit_once('/').unwrap();
    Some(format!("{base}/{name}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `leadpipe` process on `pooled`, behind a transaction-mode pooler.
fn behind_the_pooler(pooled: &str, direct: Option<&str>) -> Command {
    let mut command = cli::command(pooled);
    command
        .env("LEADPIPE_DB_POOLER", "transaction")
        .env("LEADPIPE_SECRET_KEY", server_key())
        .env("LEADPIPE_WEBHOOK_RATE", "0")
        .env("RUST_LOG", "warn");
    match direct {
        Some(direct) => command.env("DATABASE_DIRECT_URL", direct),
        None => command.env_remove("DATABASE_DIRECT_URL"),
    };
    command
}

/// Kills the process when dropped (a failed assertion included).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn api_node(pooled: &str, direct: Option<&str>) -> (Running, String) {
    let port = free_port();
    let child = behind_the_pooler(pooled, direct)
        .args([
            "serve",
            "--no-workers",
            "--no-migrate",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    eventually(
        "an API node behind the pooler to be ready",
        WAIT,
        async || {
            client
                .get(format!("{base}/readyz"))
                .send()
                .await
                .ok()
                .filter(|r| r.status() == 200)
                .map(|_| ())
        },
    )
    .await;
    (Running(child), base)
}

async fn count_leads(app: &TestApp, source: &str) -> u64 {
    lead::Entity::find()
        .filter(lead::Column::Source.eq(source))
        .count(&app.db)
        .await
        .unwrap()
}

/// Every intake request and every webhook delivery sent twice, to two API
/// nodes at once, through the pooler; a worker behind it too, polling only
/// every minute, so only a wake-up by `LISTEN` on the direct URL gets the
/// events processed in time. Each lead is written once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn two_api_nodes_and_a_worker_behind_the_pooler_write_each_lead_once() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let Some(pooled) = through_the_pooler(&app.database_url) else {
        return;
    };
    let key = app.standard_source("partner").await;
    let admin = app.admin_token().await;
    let (_first, one) = api_node(&pooled, Some(&app.database_url)).await;
    let (_second, two) = api_node(&pooled, Some(&app.database_url)).await;
    let _worker = Running(
        behind_the_pooler(&pooled, Some(&app.database_url))
            .args(["work", "--no-migrate"])
            .env("LEADPIPE_WORKER_POLL_INTERVAL", "60s")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Let the worker's first pass (on an empty inbox) go by.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let client = reqwest::Client::new();
    let mut requests = Vec::new();
    for n in 0..40 {
        for base in [&one, &two] {
            let intake = client
                .post(format!("{base}/api/leads"))
                .bearer_auth(&admin)
                .json(&json!({"source": "webform", "source_ref": format!("r-{n}"), "email": format!("r{n}@example.com")}))
                .send();
            requests.push(tokio::spawn(async move {
                intake.await.unwrap().status().as_u16()
            }));
            let body = lead_event(&format!("p-{n}"), "ada@example.com", "2026-11-30T10:00:00Z");
            let mut webhook = client.post(format!("{base}/webhooks/partner"));
            for (name, value) in standard_headers(
                &key,
                &format!("msg_{n}"),
                chrono::Utc::now().timestamp(),
                &body,
            ) {
                webhook = webhook.header(name, value);
            }
            let webhook = webhook.body(body).send();
            requests.push(tokio::spawn(async move {
                webhook.await.unwrap().status().as_u16()
            }));
        }
    }
    for request in requests {
        let status = request.await.unwrap();
        assert!((200..300).contains(&status), "{status}");
    }

    assert_eq!(count_leads(&app, "webform").await, 40);
    eventually("the webhooks' leads, woken by LISTEN", WAIT, async || {
        let processed = inbox_event::Entity::find()
            .filter(inbox_event::Column::State.eq("processed"))
            .count(&app.db)
            .await
            .unwrap();
        (processed == 40 && count_leads(&app, "partner").await == 40).then_some(())
    })
    .await;
    // Written once: version 1 each, one `lead.created` each.
    let rewritten = lead::Entity::find()
        .filter(lead::Column::Version.ne(1))
        .count(&app.db)
        .await
        .unwrap();
    assert_eq!(rewritten, 0);
    let created = outbox_event::Entity::find()
        .filter(outbox_event::Column::EventType.eq("lead.created"))
        .count(&app.db)
        .await
        .unwrap();
    assert_eq!(created, 80);
}

/// Without `DATABASE_DIRECT_URL` a command refuses to apply pending
/// migrations through the pooler (and works once they are applied), and a
/// worker finds work by polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn without_a_direct_url_migrations_are_refused_and_workers_poll() {
    let direct = fresh_postgres_database().await;
    let Some(pooled) = through_the_pooler(&direct) else {
        return;
    };
    let token_create = ["token", "create", "--name", "ops-1", "--role", "ops"];
    let refused = behind_the_pooler(&pooled, None)
        .args(token_create)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("migration(s) pending") && said.contains("DATABASE_DIRECT_URL"),
        "{said}"
    );
    let migrated = behind_the_pooler(&pooled, Some(&direct))
        .arg("migrate")
        .output()
        .unwrap();
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let created = behind_the_pooler(&pooled, None)
        .args(token_create)
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );

    // An event stored by an API node, processed by a polling worker, both
    // behind the pooler alone.
    let app =
        TestApp::spawn_on_postgres(direct.clone(), api::config::HttpSettings::for_tests()).await;
    let key = app.standard_source("partner").await;
    let (_api, base) = api_node(&pooled, None).await;
    let body = lead_event("p-1", "ada@example.com", "2026-11-30T10:00:00Z");
    let mut webhook = reqwest::Client::new().post(format!("{base}/webhooks/partner"));
    for (name, value) in standard_headers(&key, "msg_1", chrono::Utc::now().timestamp(), &body) {
        webhook = webhook.header(name, value);
    }
    assert_eq!(webhook.body(body).send().await.unwrap().status(), 202);
    assert_eq!(
        count_leads(&app, "partner").await,
        0,
        "stored, not processed yet"
    );
    let _worker = Running(
        behind_the_pooler(&pooled, None)
            .args(["work", "--no-migrate"])
            .env("LEADPIPE_WORKER_POLL_INTERVAL", "200ms")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    eventually("the event processed by polling", WAIT, async || {
        (count_leads(&app, "partner").await == 1).then_some(())
    })
    .await;
}
