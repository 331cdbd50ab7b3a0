//! The front page in a real headless browser: Debian's `chromium`, driven
//! through `chromedriver` (WebDriver) with `fantoccini`, against the real
//! app on a random port.
//!
//! Without chromium and chromedriver the test is skipped with a message —
//! unless `CI` is set, where it must run (`.ci/run` installs both).

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use domain::auth::Role;
use domain::entities::{idempotency_key, inbox_event, lead, lead_conversion};
use fantoccini::{Client, ClientBuilder, Locator};
use leadpipe_tests::{Backend, TestApp};
use sea_orm::EntityTrait;
use serde_json::{Value, json};

const SCREENSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/front-page.png");
const WAIT: Duration = Duration::from_secs(15);

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// chromedriver on a free port; killed when dropped.
struct Driver {
    child: Child,
    url: String,
    profile: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    async fn start(chromedriver: &Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let profile =
            std::env::temp_dir().join(format!("leadpipe-chromium-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&profile).unwrap();
        let driver = Self {
            child,
            url,
            profile: TempDir(profile),
        };
        let started = Instant::now();
        loop {
            let ready = reqwest::get(format!("{}/status", driver.url))
                .await
                .ok()
                .filter(|r| r.status().is_success());
            if let Some(response) = ready {
                let status: Value = response.json().await.unwrap_or_default();
                if status["value"]["ready"] == true {
                    break;
                }
            }
            assert!(started.elapsed() < WAIT, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        driver
    }

    async fn browser(&self, chromium: &Path) -> Client {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,1000",
            &format!("--user-data-dir={}", self.profile.0.display()),
        ];
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium.display().to_string(), "args": args},
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap()
    }
}

async fn text_of(browser: &Client, css: &str) -> String {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Waits until the element's text contains `expected`.
async fn wait_for_text(browser: &Client, css: &str, expected: &str) {
    let started = Instant::now();
    loop {
        if let Ok(element) = browser.find(Locator::Css(css)).await
            && element.text().await.is_ok_and(|t| t.contains(expected))
        {
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "`{css}` never showed {expected:?}; page: {}",
            text_of(browser, "body").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_for(browser: &Client, css: &str) {
    browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("`{css}` never appeared: {e}"));
}

async fn sign_in(browser: &Client, token: &str) {
    browser
        .find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    browser
        .find(Locator::Id("sign-in"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sales_sees_an_ingested_lead_changes_its_status_and_sees_the_timeline() {
    let chromium = find_program(&["chromium", "chromium-browser"]);
    let chromedriver = find_program(&["chromedriver"]);
    let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but chromium or chromedriver is missing: .ci/run installs them \
             (apt-get install chromium chromium-driver)"
        );
        eprintln!(
            "skipped: chromium and chromedriver are not installed \
             (apt-get install chromium chromium-driver); CI runs this test"
        );
        return;
    };

    let app = TestApp::spawn(Backend::Sqlite).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let sales = app.token(Role::Sales, None).await;
    let response = app
        .post_lead(
            &intake,
            &json!({"source": "webform", "source_ref": "form-4711", "name": "Ada Lovelace",
                    "email": "Ada@Example.com", "company": "Analytical Engines"}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let id = response.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();
    sign_in(&browser, &sales).await;

    // The lead list shows the ingested lead.
    let row = format!("#lead-table tbody tr[data-lead-id=\"{id}\"]");
    wait_for(&browser, &row).await;
    wait_for_text(&browser, &row, "Ada Lovelace").await;
    wait_for_text(&browser, &row, "new").await;

    // Its detail and timeline.
    browser
        .find(Locator::Css(&row))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&browser, "#lead-status", "new").await;
    wait_for(&browser, "#timeline li[data-kind=\"ingest\"]").await;
    wait_for_text(&browser, "#lead-version", "\"1\"").await;

    // A status change by click; the timeline shows it.
    browser
        .find(Locator::Css("#transitions button[data-to=\"contacted\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&browser, "#lead-status", "contacted").await;
    wait_for(&browser, "#timeline li[data-kind=\"status_changed\"]").await;
    wait_for_text(&browser, "#timeline", "new → contacted").await;
    wait_for_text(&browser, &row, "contacted").await;
    let png = browser.screenshot().await.unwrap();
    std::fs::write(SCREENSHOT, png).unwrap();

    // The database agrees, and the page sent an Idempotency-Key.
    let stored = lead::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, "contacted");
    assert_eq!(stored.version, 2);
    assert_eq!(app.count(idempotency_key::Entity).await, 1);

    // Someone else moves the lead on: the page's If-Match is stale, and the
    // 412 problem is shown readably; nothing changes.
    let moved = app
        .client
        .post(app.url(&format!("/api/leads/{id}/transitions")))
        .bearer_auth(&sales)
        .json(&json!({"to": "qualified"}))
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), 200);
    browser
        .find(Locator::Css("#transitions button[data-to=\"qualified\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&browser, "#problem", "Precondition failed").await;
    wait_for_text(&browser, "#problem", "/problems/precondition-failed").await;
    let stored = lead::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.version, 3, "the stale click changed nothing");

    // Converting from the page goes through the conversion endpoint, which
    // records the contact and company the lead became.
    browser
        .find(Locator::Css(&row))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&browser, "#lead-status", "qualified").await;
    browser
        .find(Locator::Css("#transitions button[data-to=\"converted\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&browser, "#lead-status", "converted").await;
    let stored = lead::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, "converted");
    assert_eq!(app.count(lead_conversion::Entity).await, 1);

    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_sees_dead_events_and_retries_one_and_optional_panels_degrade() {
    let chromium = find_program(&["chromium", "chromium-browser"]);
    let chromedriver = find_program(&["chromedriver"]);
    let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but chromium or chromedriver is missing"
        );
        eprintln!("skipped: chromium and chromedriver are not installed; CI runs this test");
        return;
    };

    let app = TestApp::spawn(Backend::Sqlite).await;
    let key = app.standard_source("partner").await;
    let body = serde_json::to_vec(&json!({"type": "lead.created", "lead": {"id": "p-1"}})).unwrap();
    let response = app
        .post_standard("partner", &key, "msg_dead_1", &body)
        .await;
    assert_eq!(response.status(), 202);
    let event: Value = response.json().await.unwrap();
    let event_id = event["id"].as_i64().unwrap();
    app.exec(&format!(
        "UPDATE inbox_event SET state = 'dead', attempts = 1, \
         last_error = 'no record at /data' WHERE id = {event_id}"
    ))
    .await;
    let ops = app.token(Role::Ops, None).await;

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();
    sign_in(&browser, &ops).await;
    wait_for(&browser, "#lead-table").await;
    browser
        .find(Locator::Css("#tabs button[data-tab=\"ops\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();

    wait_for_text(&browser, "#dead-events", "no record at /data").await;
    wait_for_text(&browser, "#dead-deliveries", "none").await;
    // Built elsewhere: either their data or "not available", never stuck.
    for panel in ["#stats", "#reconcile-runs"] {
        let started = Instant::now();
        while text_of(&browser, panel).await.contains("loading") {
            assert!(started.elapsed() < WAIT, "{panel} never loaded");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            browser
                .find(Locator::Css(&format!("{panel} .problem-body")))
                .await
                .is_err(),
            "{panel} shows an error: {}",
            text_of(&browser, panel).await
        );
    }

    browser
        .find(Locator::Css("#dead-events button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&browser, "#dead-events", "none").await;
    let event = inbox_event::Entity::find_by_id(event_id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(event.state, "dead", "the retry button sent it back");
    assert_eq!(event.retries, 1);

    browser.close().await.unwrap();
}

/// The text inside `<rapi-doc>`'s shadow root (WebDriver's CSS locators do
/// not reach into it).
async fn reference_text(browser: &Client) -> String {
    browser
        .execute(
            "const d = document.querySelector('rapi-doc'); \
             return d && d.shadowRoot ? d.shadowRoot.textContent : '';",
            vec![],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_reference_renders_from_the_binary_without_the_network() {
    let chromium = find_program(&["chromium", "chromium-browser"]);
    let chromedriver = find_program(&["chromedriver"]);
    let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but chromium or chromedriver is missing"
        );
        eprintln!("skipped: chromium and chromedriver are not installed; CI runs this test");
        return;
    };
    let app = TestApp::spawn(Backend::Sqlite).await;
    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/docs")).await.unwrap();
    assert_eq!(browser.title().await.unwrap(), "leadpipe API reference");

    let started = Instant::now();
    loop {
        let text = reference_text(&browser).await;
        // The spec's title and an operation's summary, rendered.
        if text.contains("leadpipe") && text.contains("Rotate a subscription's signing secret") {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the reference never rendered; it shows: {}",
            text.chars().take(500).collect::<String>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let loaded = browser
        .execute(
            "return performance.getEntriesByType('resource').map(e => e.name);",
            vec![],
        )
        .await
        .unwrap();
    let origin = app.url("");
    for url in loaded.as_array().unwrap() {
        let url = url.as_str().unwrap();
        assert!(url.starts_with(&origin), "{url} is not from {origin}");
    }
    browser
        .screenshot()
        .await
        .map(|png| std::fs::write(SCREENSHOT.replace("front-page", "api-reference"), png))
        .unwrap()
        .unwrap();
    browser.close().await.unwrap();
}
