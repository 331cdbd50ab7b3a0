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
use std::time::Duration;

use domain::auth::Role;
use domain::entities::{
    activity, deal, idempotency_key, inbox_event, lead, lead_conversion, lead_merge,
    outbox_delivery, subscription, task, user_session,
};
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::{Client, ClientBuilder, Locator};
use leadpipe_tests::client::Answer;
use leadpipe_tests::{Backend, TestApp, eventually, on_both_backends};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};

const SCREENSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/screenshots");
const WAIT: Duration = Duration::from_secs(15);

/// Saves the page as `target/screenshots/<name>.png`.
async fn screenshot(browser: &Client, name: &str) {
    let png = browser.screenshot().await.unwrap();
    std::fs::create_dir_all(SCREENSHOTS).unwrap();
    std::fs::write(Path::new(SCREENSHOTS).join(format!("{name}.png")), png).unwrap();
}

/// axe-core (`tests/vendor/axe-core`, MPL-2.0), injected into the page by
/// these tests only; the product never serves it.
const AXE: &str = include_str!("../vendor/axe-core/axe.min.js");

/// Checks the view shown and keeps a picture of it: axe-core finds no
/// serious or critical WCAG 2.1 A/AA violation (contrast, labels, names,
/// roles), the page does not scroll sideways at 1280 px, and screenshots at
/// 1400×1000 and 1280×800 go to `target/screenshots/<name>-<size>.png`.
async fn look(browser: &Client, name: &str) {
    let violations = browser
        .execute_async(
            &format!(
                "const done = arguments[arguments.length - 1]; \
                 if (!window.axe) {{ {AXE} }} \
                 axe.run(document, {{runOnly: {{type: 'tag', \
                   values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}}}}) \
                 .then(r => done(r.violations \
                   .filter(v => v.impact === 'serious' || v.impact === 'critical') \
                   .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' — ' + \
                     v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', ')))) \
                 .catch(e => done(['axe failed: ' + e]));"
            ),
            vec![],
        )
        .await
        .unwrap();
    let violations: Vec<String> = serde_json::from_value(violations).unwrap();
    assert!(
        violations.is_empty(),
        "{name}: accessibility violations:\n{}",
        violations.join("\n")
    );
    for (width, height) in [(1400, 1000), (1280, 800)] {
        browser.set_window_size(width, height).await.unwrap();
        if width == 1280 {
            let sideways = browser
                .execute(
                    "const d = document.documentElement; return d.scrollWidth - d.clientWidth;",
                    vec![],
                )
                .await
                .unwrap();
            assert!(
                sideways.as_i64().unwrap() <= 0,
                "{name}: the page scrolls sideways by {sideways} px at 1280 px"
            );
        }
        screenshot(browser, &format!("{name}-{width}")).await;
    }
    browser.set_window_size(1400, 1000).await.unwrap();
}

/// Clicks `css`, finding it again if the page redrew it meanwhile.
async fn click(browser: &Client, css: &str) {
    for _ in 0..5 {
        let element = browser
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no `{css}`: {e}"));
        match element.click().await {
            Err(fantoccini::error::CmdError::Standard(e))
                if e.error == fantoccini::error::ErrorStatus::StaleElementReference =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other.unwrap(),
        }
    }
    panic!("`{css}` kept being redrawn");
}

async fn fill(browser: &Client, css: &str, text: &str) {
    let field = browser.find(Locator::Css(css)).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

/// How many elements match `css`, once that is `expected` (or the wait ends).
async fn wait_for_count(browser: &Client, css: &str, expected: usize) {
    eventually(&format!("{expected} `{css}`"), WAIT, async || {
        let found = browser.find_all(Locator::Css(css)).await.unwrap().len();
        if found == expected {
            Ok(())
        } else {
            Err(format!("{found} elements"))
        }
    })
    .await;
}

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
        eventually("chromedriver to start", WAIT, async || {
            let ready = reqwest::get(format!("{}/status", driver.url))
                .await
                .ok()
                .filter(|r| r.status().is_success());
            match ready {
                Some(response) => {
                    let status: Value = response.json().await.unwrap_or_default();
                    status["value"]["ready"] == true
                }
                None => false,
            }
        })
        .await;
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

/// The page's text for a failure message: a page being reloaded (signing
/// out loads a fresh one) has no text yet, which is no failure itself.
async fn page_text(browser: &Client) -> String {
    match browser.find(Locator::Css("body")).await {
        Ok(body) => body
            .text()
            .await
            .unwrap_or_else(|e| format!("(unreadable: {e})")),
        Err(e) => format!("(no page: {e})"),
    }
}

/// Waits until the element's text contains `expected`.
async fn wait_for_text(browser: &Client, css: &str, expected: &str) {
    eventually(&format!("`{css}` to show {expected:?}"), WAIT, async || {
        if let Ok(element) = browser.find(Locator::Css(css)).await
            && element.text().await.is_ok_and(|t| t.contains(expected))
        {
            return Ok(());
        }
        Err(format!("page: {}", page_text(browser).await))
    })
    .await;
}

async fn wait_for(browser: &Client, css: &str) {
    browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("`{css}` never appeared: {e}"));
}

async fn stored_lead(app: &TestApp, id: i64) -> lead::Model {
    lead::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap()
}

/// Waits until the "Converted into" panel shows each `(field, text)`.
async fn wait_for_conversion(browser: &Client, shown: &[(&str, &str)]) {
    for (field, text) in shown {
        wait_for_text(
            browser,
            &format!("#conversion dd[data-field=\"{field}\"]"),
            text,
        )
        .await;
    }
}

async fn sign_in(browser: &Client, token: &str) {
    fill(browser, "#token", token).await;
    click(browser, "#sign-in").await;
}

/// Every person's password in these tests.
const PASSWORD: &str = "correct horse battery staple";

/// A user who signs in to the page with email and password, and a
/// personal token of theirs for setting things up through the API.
struct Person {
    id: i64,
    email: String,
    token: String,
}

/// Adds a user `name` with `email`, `role` and [`PASSWORD`].
async fn person(app: &TestApp, name: &str, email: &str, role: Role) -> Person {
    // Hashed once per test process: argon2 is slow on purpose.
    static DIGEST: tokio::sync::OnceCell<domain::users::PasswordDigest> =
        tokio::sync::OnceCell::const_new();
    let password = DIGEST
        .get_or_init(async || {
            domain::users::hash_password(domain::users::Password::new(PASSWORD.into()).unwrap())
                .await
                .unwrap()
        })
        .await
        .clone();
    let user = domain::users::add(
        &app.db,
        domain::users::NewUser {
            name: name.into(),
            email: email.into(),
            role,
            team: None,
            password,
        },
    )
    .await
    .unwrap();
    let id = user.principal.id;
    let token = domain::users::create_token(&app.db, id, "set-up", None)
        .await
        .unwrap()
        .token;
    Person {
        id,
        email: email.into(),
        token,
    }
}

/// Signs in on the page's form with `person`'s email and password.
async fn sign_in_as(browser: &Client, person: &Person) {
    fill(browser, "#login-email", &person.email).await;
    fill(browser, "#login-password", PASSWORD).await;
    click(browser, "#sign-in-password").await;
}

on_both_backends!(
    sales_moves_assigns_notes_follows_a_duplicate_and_converts_a_lead,
    ops_sees_figures_alerts_and_charts_and_retries_a_dead_event,
    sign_out_forgets_the_previous_session,
    each_role_sees_only_the_tabs_it_may_read,
    sales_adds_a_task_to_a_lead_and_completes_it_from_the_tasks_tab,
    sales_merges_a_duplicate_from_the_lead_and_undoes_it_from_the_timeline,
    sales_sorts_keeps_filters_in_the_address_and_moves_and_assigns_in_bulk,
    sales_browses_contacts_and_companies_and_moves_deals_on_the_board,
    a_keyboard_alone_signs_in_opens_a_lead_and_changes_its_status,
    admin_reads_every_view_it_is_offered,
    a_user_signs_in_with_email_and_password_writes_and_signs_out,
    admin_sees_a_disabled_subscription_recovers_and_enables_it,
);

/// Everything the page holds, hidden or not: the document's markup and its
/// in-memory state (the lists, the lead, the names it has read). `None`
/// while a page is being loaded.
async fn everything_the_page_holds(browser: &Client) -> Option<String> {
    let held = browser
        .execute(
            "const kept = typeof state === 'object' && state \
               ? JSON.stringify({me: state.me, leads: state.leads, lead: state.lead, \
                   conversion: state.conversion || null, people: [...state.people.values()], \
                   names: [...state.names], records: state.records, record: state.record}) \
               : ''; \
             return document.documentElement.outerHTML + '\\n' + kept;",
            vec![],
        )
        .await
        .ok()?;
    held.as_str().map(str::to_owned)
}

/// Waits until the sign-in form shows and nothing of `previous` is left
/// anywhere in the page.
async fn wait_until_forgotten(browser: &Client, previous: &[&str]) {
    eventually("the page to forget the session", WAIT, async || {
        let signed_out = match browser.find(Locator::Css("#login")).await {
            Ok(login) => login.is_displayed().await.unwrap_or(false),
            Err(_) => false,
        };
        let held = everything_the_page_holds(browser).await.unwrap_or_default();
        let kept: Vec<&&str> = previous.iter().filter(|p| held.contains(**p)).collect();
        if signed_out && !held.is_empty() && kept.is_empty() {
            return Ok(());
        }
        Err(format!(
            "after signing out the page still holds {kept:?} (sign-in form shown: {signed_out})"
        ))
    })
    .await;
}

fn assert_forgotten(held: &str, previous: &[&str], when: &str) {
    for text in previous {
        assert!(
            !held.contains(text),
            "{when}: the page still holds {text:?} of the previous session"
        );
    }
}

/// The tabs a user can see, in page order.
async fn visible_tabs(browser: &Client) -> Vec<String> {
    let mut shown = Vec::new();
    for button in browser
        .find_all(Locator::Css("#tabs button"))
        .await
        .unwrap()
    {
        if button.is_displayed().await.unwrap() {
            shown.push(button.attr("data-tab").await.unwrap().unwrap());
        }
    }
    shown
}

/// Every API call this page (since it was loaded) made, with its status:
/// the browser's own record of the requests.
async fn api_calls(browser: &Client) -> Vec<(String, u64)> {
    let calls = browser
        .execute(
            "return performance.getEntriesByType('resource') \
               .filter(e => new URL(e.name).pathname.startsWith('/api/')) \
               .map(e => [new URL(e.name).pathname, e.responseStatus]);",
            vec![],
        )
        .await
        .unwrap();
    calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c[0].as_str().unwrap().to_owned(), c[1].as_u64().unwrap()))
        .collect()
}

/// Waits until the page has called `path`, then checks that no call it made
/// was refused: a role is never offered a view of `403`s.
async fn assert_nothing_refused(browser: &Client, path: &str, role: &str) {
    let calls = eventually(
        &format!("{role}: the page to call {path}"),
        WAIT,
        async || {
            let calls = api_calls(browser).await;
            if calls.iter().any(|(p, _)| p == path) {
                Ok(calls)
            } else {
                Err(format!("{calls:?}"))
            }
        },
    )
    .await;
    let refused: Vec<_> = calls.iter().filter(|(_, status)| *status >= 400).collect();
    assert!(refused.is_empty(), "{role}: refused calls {refused:?}");
}

async fn sales_moves_assigns_notes_follows_a_duplicate_and_converts_a_lead(backend: Backend) {
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

    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let response = app
        .api(&intake)
        .create_lead(
            &json!({"source": "webform", "source_ref": "form-4711", "name": "Ada Lovelace",
                    "email": "Ada@Example.com", "company": "Analytical Engines",
                    "payload": {"message": "Wants a quote for three engines",
                                "utm": {"campaign": "spring-fair", "medium": "booth"}}}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let id = response.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    // The same person from another source: linked as a possible duplicate.
    let partner = app.token(Role::Intake, Some("partner")).await;
    let response = app
        .api(&partner)
        .create_lead(
            &json!({"source": "partner", "source_ref": "p-9", "name": "A. Lovelace",
                    "email": "ada@example.com"}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let twin = response.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    while workers::lead_processor::run_once(&app.db, 100)
        .await
        .unwrap()
        > 0
    {}
    // Created after processing, so routing had nobody to give the leads to.
    let grace = person(&app, "Grace Hopper", "grace@example.com", Role::Sales).await;
    let (sales, grace_id) = (grace.token.clone(), grace.id);

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();
    sign_in_as(&browser, &grace).await;
    wait_for_text(&browser, "#whoami", "Grace Hopper (sales)").await;
    // A rep starts on My day: nothing of theirs yet.
    wait_for(
        &browser,
        "#my-day-tab:not([hidden]) #my-leads-empty:not([hidden])",
    )
    .await;
    click(&browser, "#tabs button[data-tab=\"leads\"]").await;

    // The lead list shows the ingested lead.
    let row = format!("#lead-table tbody tr[data-lead-id=\"{id}\"]");
    wait_for(&browser, &row).await;
    wait_for_text(&browser, &row, "Ada Lovelace").await;
    wait_for_text(&browser, &row, "new").await;
    look(&browser, "sales-leads").await;

    // Its detail and timeline, what the sender sent, and no ETag for sales.
    click(&browser, &row).await;
    wait_for_text(&browser, "#lead-status", "new").await;
    wait_for(&browser, "#timeline li[data-kind=\"ingest\"]").await;
    wait_for_text(&browser, "#lead-payload", "Wants a quote for three engines").await;
    wait_for_text(&browser, "#lead-payload", "spring-fair").await;
    wait_for_text(&browser, "#lead-clock", "Waiting for an owner").await;
    assert_eq!(
        text_of(&browser, "#lead-version").await,
        "",
        "sales sees no version"
    );
    assert!(!text_of(&browser, "#lead-detail").await.contains("ETag"));

    // A status change by click; the timeline shows it.
    click(&browser, "#transitions button[data-to=\"contacted\"]").await;
    wait_for_text(&browser, "#lead-status", "contacted").await;
    wait_for(&browser, "#timeline li[data-kind=\"status_changed\"]").await;
    wait_for_text(&browser, "#timeline", "new → contacted").await;
    wait_for_text(&browser, &row, "contacted").await;

    // The database agrees, and the page sent an Idempotency-Key.
    let stored = stored_lead(&app, id).await;
    assert_eq!(stored.status, "contacted");
    assert_eq!(stored.version, 2);
    assert_eq!(app.count(idempotency_key::Entity).await, 1);

    // Someone else moves the lead on: the page's If-Match is stale. The
    // problem shows on the lead, in words, and the lead is read again.
    let moved = app
        .client
        .post(app.url(&format!("/api/leads/{id}/transitions")))
        .bearer_auth(&sales)
        .json(&json!({"to": "qualified"}))
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), 200);
    click(&browser, "#transitions button[data-to=\"qualified\"]").await;
    let problem = "#lead-detail > .problem";
    wait_for_text(&browser, problem, "Someone else changed this meanwhile").await;
    wait_for_text(&browser, problem, "Precondition failed").await;
    wait_for_text(&browser, problem, "now shows what is stored").await;
    wait_for(
        &browser,
        &format!("{problem} [data-type=\"/problems/precondition-failed\"]"),
    )
    .await;
    // Re-read without a click: the other user's move shows.
    wait_for_text(&browser, "#lead-status", "qualified").await;
    wait_for_text(&browser, &row, "qualified").await;
    assert!(
        browser
            .find(Locator::Css("#problem:not([hidden])"))
            .await
            .is_err(),
        "the problem is shown on the lead, not at the top of the page"
    );
    look(&browser, "sales-stale-412").await;
    let stored = stored_lead(&app, id).await;
    assert_eq!(stored.version, 3, "the stale click changed nothing");

    // Assign to me: the owner shows as a name, in the detail and the list.
    wait_for_text(&browser, "#lead-owner", "—").await;
    click(&browser, "#assign-me").await;
    wait_for_text(&browser, "#lead-owner", "Grace Hopper").await;
    wait_for_text(&browser, &format!("{row} td.owner"), "Grace Hopper").await;
    wait_for_text(&browser, "#timeline", "owner → Grace Hopper").await;
    assert!(
        browser.find(Locator::Css("#assign-me")).await.is_err(),
        "no 'assign to me' on my own lead"
    );
    let stored = stored_lead(&app, id).await;
    assert_eq!(stored.owner_id, Some(grace_id));

    // A note appears in the timeline, by name.
    fill(&browser, "#note-text", "Called her, wants a demo on Friday").await;
    click(&browser, "#add-note").await;
    wait_for_text(
        &browser,
        "#timeline li[data-kind=\"note\"]",
        "note: Called her, wants a demo on Friday",
    )
    .await;
    wait_for_text(
        &browser,
        "#timeline li[data-kind=\"note\"]",
        "by Grace Hopper",
    )
    .await;
    let notes = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(id))
        .filter(activity::Column::Kind.eq("note"))
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(notes.len(), 1);

    // The possible duplicate is a link to the other lead, by name; back comes back.
    let twin_link = format!("#duplicate-links a[data-lead-id=\"{twin}\"]");
    wait_for_text(&browser, &twin_link, "A. Lovelace").await;
    wait_for_text(&browser, "#duplicates", "from partner, same email").await;
    look(&browser, "sales-lead-detail").await;
    click(&browser, &twin_link).await;
    wait_for_text(&browser, "#lead-title", "A. Lovelace").await;
    assert!(
        browser
            .current_url()
            .await
            .unwrap()
            .as_str()
            .ends_with(&format!("#lead/{twin}"))
    );
    browser.back().await.unwrap();
    wait_for_text(&browser, "#lead-title", "Ada Lovelace").await;

    // Converting a qualified lead, with a deal: what it became is shown.
    wait_for(&browser, "#convert-form:not([hidden])").await;
    fill(&browser, "#deal-name", "Difference Engine No. 2").await;
    fill(&browser, "#deal-amount", "12500").await;
    fill(&browser, "#deal-currency", "eur").await;
    click(&browser, "#convert").await;
    wait_for_text(&browser, "#lead-status", "converted").await;
    let became = [
        ("contact", "Ada Lovelace"),
        ("company", "Analytical Engines"),
        ("deal", "Difference Engine No. 2 · 12,500.00 EUR"),
    ];
    wait_for_conversion(&browser, &became).await;
    assert!(
        browser
            .find(Locator::Css("#convert-form[hidden]"))
            .await
            .is_ok()
    );
    wait_for_text(
        &browser,
        "#timeline",
        "converted into contact Ada Lovelace, company Analytical Engines, \
         deal Difference Engine No. 2",
    )
    .await;
    look(&browser, "sales-converted").await;
    let stored = stored_lead(&app, id).await;
    assert_eq!(stored.status, "converted");
    assert_eq!(app.count(lead_conversion::Entity).await, 1);
    let deals = deal::Entity::find().all(&app.db).await.unwrap();
    assert_eq!(deals.len(), 1);
    assert_eq!(
        (deals[0].amount_cents, deals[0].currency.as_str()),
        (1_250_000, "EUR")
    );

    // Reloaded, the page opens the lead from its address and reads the
    // conversion back from the CRM.
    browser.refresh().await.unwrap();
    wait_for_text(&browser, "#lead-status", "converted").await;
    wait_for_conversion(&browser, &became).await;

    // What it became is a link: the deal opens on the Deals tab.
    click(&browser, "#conversion dd[data-field=\"deal\"] a").await;
    wait_for(&browser, "#deals-tab:not([hidden])").await;
    wait_for_text(&browser, "#deal-title", "Difference Engine No. 2").await;
    wait_for_text(&browser, "#deal-stage", "open").await;

    browser.close().await.unwrap();
}

async fn ops_sees_figures_alerts_and_charts_and_retries_a_dead_event(backend: Backend) {
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

    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("partner").await;
    let body = serde_json::to_vec(&json!({"type": "lead.created", "lead": {"id": "p-1"}})).unwrap();
    let response = app
        .post_standard("partner", &key, "msg_dead_1", &body)
        .await;
    assert_eq!(response.status(), 202);
    let event: Value = response.json().await.unwrap();
    let event_id = event["id"].as_i64().unwrap();
    // The sender delivers it again: one repeat in three deliveries overall.
    let again = app
        .post_standard("partner", &key, "msg_dead_1", &body)
        .await;
    assert!(again.status().is_success(), "{}", again.status());
    app.exec(&format!(
        "UPDATE inbox_event SET state = 'dead', attempts = 1, \
         last_error = 'no record at /data' WHERE id = {event_id}"
    ))
    .await;
    // An event waiting for ten minutes: a growing backlog.
    let body = serde_json::to_vec(&json!({"type": "lead.created", "lead": {"id": "p-2"}})).unwrap();
    let response = app
        .post_standard("partner", &key, "msg_waiting_1", &body)
        .await;
    assert_eq!(response.status(), 202);
    let waiting: Value = response.json().await.unwrap();
    let ten_minutes_ago = (chrono::Utc::now() - chrono::Duration::minutes(10))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
    app.exec(&format!(
        "UPDATE inbox_event SET received_at = '{ten_minutes_ago}' WHERE id = {}",
        waiting["id"]
    ))
    .await;
    let olive = person(&app, "Olive Ops", "olive@example.com", Role::Ops).await;
    let ops = olive.token.clone();

    // A receiver that answers 500 with an empty body, until its delivery dies.
    let admin = app.token(Role::Admin, None).await;
    let receiver = leadpipe_tests::receiver::Receiver::start().await;
    receiver.answer(500);
    app.api(&admin).subscribe(&receiver, json!([])).await;
    let lead_id = app
        .api(&admin)
        .new_lead(&json!({"source": "webform", "source_ref": "f-1", "name": "Ada Lovelace"}))
        .await;
    while workers::lead_processor::run_once(&app.db, 100)
        .await
        .unwrap()
        > 0
    {}
    let publisher = app.publisher(leadpipe_tests::publishing::settings_with(1, "127.0.0.1"));
    leadpipe_tests::publishing::publish_until(&publisher, "a dead delivery", WAIT, async || {
        outbox_delivery::Entity::find()
            .filter(outbox_delivery::Column::State.eq("dead"))
            .one(&app.db)
            .await
            .unwrap()
            .is_some()
    })
    .await;
    // A reconcile run that rejected one record.
    leadpipe_tests::reconcile::crm_with_one_broken_email(&app, &admin, 3).await;
    let run = app.reconcile(&ops, "crm", json!({})).await;
    assert_eq!(run.rejected, 1);

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();
    sign_in_as(&browser, &olive).await;
    wait_for_text(&browser, "#whoami", "Olive Ops (ops)").await;
    click(&browser, "#tabs button[data-tab=\"ops\"]").await;

    wait_for_text(&browser, "#dead-events", "no record at /data").await;
    wait_for_text(&browser, "#dead-events .alert", "1 dead event").await;

    // The dead delivery by the receiver's URL and what it answered, in words.
    let delivery = "#dead-delivery-table tbody tr";
    wait_for_text(&browser, delivery, &receiver.url).await;
    wait_for_text(
        &browser,
        delivery,
        "500 Internal Server Error — with an empty body",
    )
    .await;
    // The lead it was about, by name.
    wait_for_text(
        &browser,
        &format!("{delivery} a[data-lead-id=\"{lead_id}\"]"),
        "Ada Lovelace",
    )
    .await;
    assert!(
        !text_of(&browser, "#dead-deliveries")
            .await
            .contains("HTTP 500: ")
    );

    // Reconcile runs as a table in words, and one run in detail.
    let run_row = format!("#reconcile-table tr[data-run-id=\"{}\"]", run.id);
    wait_for_text(&browser, &run_row, "crm").await;
    wait_for_text(&browser, &run_row, "3 fetched").await;
    wait_for_text(&browser, &run_row, "1 rejected").await;
    wait_for_text(&browser, &run_row, "1 rejected to look at").await;
    assert_eq!(
        browser
            .find_all(Locator::Css(&format!("{run_row} td")))
            .await
            .unwrap()
            .len(),
        6,
        "started, who, source, counts, outcome, details"
    );
    click(&browser, &format!("{run_row} button")).await;
    wait_for_text(&browser, "#run-facts", "3 records").await;
    wait_for_text(&browser, "#run-facts", "records written").await;
    look(&browser, "ops-reconcile-run").await;

    // The inbox, and an event's payload in the viewer.
    let event_row = format!("#inbox-table tr[data-event-id=\"{event_id}\"]");
    wait_for_text(&browser, &event_row, "msg_dead_1").await;
    click(&browser, &format!("{event_row} button")).await;
    wait_for_text(&browser, "#inbox-body", "\"p-1\"").await;
    wait_for_text(&browser, "#inbox-viewer", "lead.created").await;
    look(&browser, "ops-inbox-payload").await;
    browser
        .execute(
            "document.getElementById('dead-deliveries').scrollIntoView();",
            vec![],
        )
        .await
        .unwrap();
    look(&browser, "ops-dead-deliveries").await;

    // Figures with units, and what needs attention flagged in words.
    let partner = "#source-stats tr[data-source=\"partner\"]";
    wait_for_text(&browser, &format!("{partner} td:nth-child(2)"), "2 events").await;
    wait_for_text(
        &browser,
        &format!("{partner} td.duplicate-rate"),
        "33.3 % (1 of 3 deliveries)",
    )
    .await;
    wait_for_text(
        &browser,
        &format!("{partner} td.dead .alert"),
        "1 event (dead letters)",
    )
    .await;
    wait_for_text(&browser, &format!("{partner} td.oldest .alert"), "10 min").await;
    wait_for_text(
        &browser,
        &format!("{partner} td.oldest .alert"),
        "backlog over 5 min",
    )
    .await;
    wait_for_text(&browser, "#ops-alerts", "partner: 1 dead inbox event").await;
    wait_for_text(
        &browser,
        "#ops-alerts",
        "oldest unprocessed event waiting 10 min",
    )
    .await;
    // What the webhooks of crm missed of what reconcile pulled.
    wait_for_text(
        &browser,
        "#source-stats tr[data-source=\"crm\"] td.missed-rate",
        &format!("({} of 3 records)", run.missed),
    )
    .await;
    let stats = text_of(&browser, "#stats").await;
    assert!(!stats.contains('{'), "no raw JSON: {stats}");

    // Charts from the series: one bar and one point per bucket.
    wait_for_count(&browser, "#chart-received svg rect.bar", 60).await;
    wait_for_count(&browser, "#chart-processed svg rect.bar", 60).await;
    wait_for_count(&browser, "#chart-duplicates svg circle.point", 60).await;
    wait_for_text(&browser, "#chart-received figcaption", "Received 2 events").await;
    wait_for_text(&browser, "#chart-received figcaption", "per minute").await;
    wait_for_count(&browser, "#chart-missed svg rect.bar", 60).await;
    wait_for_text(
        &browser,
        "#chart-missed figcaption",
        &format!("Missed by webhooks {} of 3 reconciled records", run.missed),
    )
    .await;
    browser
        .execute("window.scrollTo(0, 0);", vec![])
        .await
        .unwrap();
    look(&browser, "ops-tab").await;
    click(&browser, ".window-choice button[data-window=\"24h\"]").await;
    wait_for_count(&browser, "#chart-received svg rect.bar", 96).await;
    wait_for_text(&browser, "#chart-received figcaption", "per 15 min").await;
    screenshot(&browser, "ops-tab-day").await;
    // Built elsewhere: either their data or "not available", never stuck.
    for panel in ["#stats", "#reconcile-runs"] {
        eventually(&format!("{panel} to load"), WAIT, async || {
            !text_of(&browser, panel).await.contains("loading")
        })
        .await;
        assert!(
            browser
                .find(Locator::Css(&format!("{panel} .problem-body")))
                .await
                .is_err(),
            "{panel} shows an error: {}",
            text_of(&browser, panel).await
        );
    }

    click(&browser, "#dead-events button.retry").await;
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

    eventually("the reference to render", WAIT, async || {
        let text = reference_text(&browser).await;
        // The spec's title and an operation's summary, rendered.
        if text.contains("leadpipe") && text.contains("Rotate a subscription's signing secret") {
            Ok(())
        } else {
            Err(text.chars().take(500).collect::<String>())
        }
    })
    .await;
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
    screenshot(&browser, "api-reference").await;
    browser.close().await.unwrap();
}

/// chromium and chromedriver, or `None` (the test is skipped) outside CI.
fn browser_programs() -> Option<(PathBuf, PathBuf)> {
    let chromium = find_program(&["chromium", "chromium-browser"]);
    let chromedriver = find_program(&["chromedriver"]);
    let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but chromium or chromedriver is missing"
        );
        eprintln!("skipped: chromium and chromedriver are not installed; CI runs this test");
        return None;
    };
    Some((chromium, chromedriver))
}

async fn sign_out_forgets_the_previous_session(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let response = app
        .api(&intake)
        .create_lead(
            &json!({"source": "webform", "source_ref": "form-77", "name": "Ada Lovelace",
                    "email": "ada.private@example.com", "company": "Analytical Engines"}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let id = response.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    let sales = person(&app, "Grace Hopper", "grace@example.com", Role::Sales).await;
    // What the sales session read: the lead, its timeline, who was signed in.
    let previous = [
        "ada.private@example.com",
        "Ada Lovelace",
        "Analytical Engines",
        "form-77",
        "Grace Hopper",
    ];

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();
    sign_in_as(&browser, &sales).await;
    wait_for_text(&browser, "#whoami", "Grace Hopper (sales)").await;
    click(&browser, "#tabs button[data-tab=\"leads\"]").await;
    let row = format!("#lead-table tbody tr[data-lead-id=\"{id}\"]");
    wait_for_text(&browser, &row, "ada.private@example.com").await;
    click(&browser, &row).await;
    wait_for_text(&browser, "#lead-title", "Ada Lovelace").await;
    wait_for(&browser, "#timeline li[data-kind=\"ingest\"]").await;

    // Signed out, with no token: nothing of the session is left, not even
    // the lead's address.
    click(&browser, "#sign-out").await;
    wait_until_forgotten(&browser, &previous).await;
    let address = browser.current_url().await.unwrap();
    assert!(
        !address.as_str().contains("#lead/"),
        "the address still opens the lead: {address}"
    );
    look(&browser, "signed-out").await;

    // An intake token in the same tab: nothing of the previous session
    // comes back from memory, however long one waits.
    sign_in(&browser, &intake).await;
    wait_for_text(&browser, "#whoami", "(intake)").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_forgotten(
        &everything_the_page_holds(&browser).await.unwrap(),
        &previous,
        "signed in with an intake token",
    );

    // A token the server refuses: back to the sign-in form, saying why.
    click(&browser, "#sign-out").await;
    wait_until_forgotten(&browser, &previous).await;
    sign_in(&browser, "not-a-token").await;
    wait_for_text(&browser, "#problem", "Your token was not accepted").await;
    wait_until_forgotten(&browser, &previous).await;

    browser.close().await.unwrap();
}

async fn sales_adds_a_task_to_a_lead_and_completes_it_from_the_tasks_tab(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let id = app
        .api(&intake)
        .new_lead(
            &json!({"source": "webform", "source_ref": "form-99", "name": "Ada Lovelace",
                          "email": "ada@example.com"}),
        )
        .await;
    let grace = person(&app, "Grace Hopper", "grace@example.com", Role::Sales).await;

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser
        .goto(&app.url(&format!("/#lead/{id}")))
        .await
        .unwrap();
    sign_in_as(&browser, &grace).await;
    wait_for_text(&browser, "#lead-title", "Ada Lovelace").await;

    // Due later today in the browser's own day: the Tasks tab's "today".
    fill(&browser, "#task-title", "Call Ada back about the engine").await;
    browser
        .execute(
            "const d = new Date(); d.setHours(23, 59, 0, 0); \
             document.getElementById('task-due').value = \
               new Date(d - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);",
            vec![],
        )
        .await
        .unwrap();
    click(&browser, "#add-task").await;
    wait_for_text(&browser, "#lead-tasks", "Call Ada back about the engine").await;
    wait_for_text(&browser, "#timeline", "task for Grace Hopper").await;
    let stored = task::Entity::find().all(&app.db).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        (
            stored[0].subject_id,
            stored[0].owner_id,
            stored[0].status.as_str()
        ),
        (id, grace.id, "open")
    );

    // My day lists it among the tasks due, with the lead by name.
    click(&browser, "#tabs button[data-tab=\"my-day\"]").await;
    wait_for_text(&browser, "#my-tasks", "Call Ada back about the engine").await;
    wait_for_text(
        &browser,
        &format!("#my-tasks a[data-lead-id=\"{id}\"]"),
        "Ada Lovelace",
    )
    .await;
    look(&browser, "sales-my-day").await;

    click(&browser, "#tabs button[data-tab=\"tasks\"]").await;
    wait_for_text(&browser, "#task-table", "Call Ada back about the engine").await;
    wait_for_text(
        &browser,
        &format!("#task-table a[data-lead-id=\"{id}\"]"),
        "Ada Lovelace",
    )
    .await;
    assert!(!text_of(&browser, "#task-table").await.contains("lead #"));
    look(&browser, "tasks-today").await;
    click(&browser, "#task-table button").await;
    wait_for(&browser, "#task-empty:not([hidden])").await;
    click(&browser, ".due-choice button[data-due=\"done\"]").await;
    wait_for_text(&browser, "#task-table", "Call Ada back about the engine").await;
    let done = task::Entity::find_by_id(stored[0].id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, "done");
    assert_eq!(done.completed_by, Some(grace.id));
    assert_nothing_refused(&browser, "/api/tasks", "sales").await;

    // The lead link on the task opens the lead on the Leads tab.
    click(&browser, &format!("#task-table a[data-lead-id=\"{id}\"]")).await;
    wait_for(&browser, "#leads-tab:not([hidden])").await;
    wait_for_text(&browser, "#lead-tasks", "Call Ada back about the engine").await;
    browser.close().await.unwrap();
}

async fn each_role_sees_only_the_tabs_it_may_read(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let response = app
        .api(&intake)
        .create_lead(
            &json!({"source": "webform", "source_ref": "form-78", "email": "b@example.com"}),
        )
        .await;
    assert_eq!(response.status(), 201);
    let sales = person(&app, "Sam Sales", "sam@example.com", Role::Sales).await;
    let ops = person(&app, "Olive Ops", "olive@example.com", Role::Ops).await;
    let admin = person(&app, "Ada Admin", "ada@example.com", Role::Admin).await;

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();

    // intake may read nothing but who it is: no tab, and a word on why.
    sign_in(&browser, &intake).await;
    wait_for_text(&browser, "#whoami", "(intake)").await;
    // Time for a tab that should not be there to appear: none must.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(visible_tabs(&browser).await, Vec::<String>::new(), "intake");
    assert_nothing_refused(&browser, "/api/me", "intake").await;
    wait_for_text(&browser, "#no-views", "intake").await;
    look(&browser, "intake-signed-in").await;
    click(&browser, "#sign-out").await;
    wait_for(&browser, "#login:not([hidden])").await;

    // Sales reads leads and tasks, not the ops figures: no Ops tab.
    sign_in_as(&browser, &sales).await;
    wait_for_text(&browser, "#whoami", "Sam Sales (sales)").await;
    assert_eq!(
        visible_tabs(&browser).await,
        [
            "my-day",
            "leads",
            "contacts",
            "companies",
            "deals",
            "tasks",
            "reports"
        ],
        "sales"
    );
    click(&browser, "#tabs button[data-tab=\"leads\"]").await;
    wait_for_text(&browser, "#lead-table", "b@example.com").await;
    assert_nothing_refused(&browser, "/api/leads", "sales").await;
    click(&browser, "#tabs button[data-tab=\"reports\"]").await;
    wait_for_text(&browser, "#speed-table", "Source webform").await;
    look(&browser, "sales-reports").await;
    click(&browser, "#report-window button[data-window=\"7d\"]").await;
    assert_nothing_refused(&browser, "/api/reports/speed-to-lead", "sales").await;
    click(&browser, "#sign-out").await;
    wait_for(&browser, "#login:not([hidden])").await;

    // Ops and admin read both.
    for (person, role) in [(&ops, "ops"), (&admin, "admin")] {
        sign_in_as(&browser, person).await;
        wait_for_text(&browser, "#whoami", &format!("({role})")).await;
        assert_eq!(
            visible_tabs(&browser).await,
            [
                "leads",
                "contacts",
                "companies",
                "deals",
                "tasks",
                "reports",
                "ops"
            ],
            "{role}"
        );
        click(&browser, "#tabs button[data-tab=\"ops\"]").await;
        wait_for_text(&browser, "#dead-events", "none").await;
        assert_nothing_refused(&browser, "/api/ops/stats", role).await;
        click(&browser, "#sign-out").await;
        wait_for(&browser, "#login:not([hidden])").await;
    }

    browser.close().await.unwrap();
}

async fn sales_merges_a_duplicate_from_the_lead_and_undoes_it_from_the_timeline(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let admin = app.api_as(Role::Admin, None).await;
    let ada = admin
        .new_lead(
            &json!({"source": "webform", "source_ref": "form-1", "name": "Ada Lovelace",
                          "email": "ada@example.com"}),
        )
        .await;
    let twin = admin
        .new_lead(
            &json!({"source": "partner", "source_ref": "p-1", "name": "A. Lovelace",
                          "email": "ada@example.com", "phone": "+4930123"}),
        )
        .await;
    while workers::lead_processor::run_once(&app.db, 100)
        .await
        .unwrap()
        > 0
    {}
    let sales = person(&app, "Sam Sales", "sam@example.com", Role::Sales).await;

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser
        .goto(&app.url(&format!("/#lead/{ada}")))
        .await
        .unwrap();
    sign_in_as(&browser, &sales).await;
    wait_for_text(&browser, "#lead-title", "Ada Lovelace").await;
    wait_for_text(&browser, "#duplicate-links", "A. Lovelace").await;
    click(
        &browser,
        &format!("#duplicate-links button[data-merge-lead=\"{twin}\"]"),
    )
    .await;
    // The timeline names the merged lead and where it came from.
    wait_for_text(
        &browser,
        "#timeline",
        "merged A. Lovelace from partner into this one",
    )
    .await;
    // The survivor took the newer lead's name and phone; the twin is gone
    // from the list.
    wait_for_text(&browser, "#lead-title", "A. Lovelace").await;
    wait_for_text(&browser, "#lead-fields", "+4930123").await;
    wait_for(&browser, "#duplicates[hidden]").await;
    let twin_row = format!("#lead-table tr[data-lead-id=\"{twin}\"]");
    assert!(browser.find(Locator::Css(&twin_row)).await.is_err());
    let merged = lead::Entity::find_by_id(twin)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(merged.merged_into_id, Some(ada));
    look(&browser, "lead-merged").await;

    // Opening the merged lead's address shows the survivor.
    browser
        .execute(&format!("location.hash = '#lead/{twin}';"), vec![])
        .await
        .unwrap();
    let survivor_hash = format!("#lead/{ada}");
    eventually(
        "the page to follow the merged lead to its survivor",
        WAIT,
        async || {
            let hash = browser.execute("return location.hash;", vec![]).await;
            match hash {
                Ok(Value::String(h)) if h == survivor_hash => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    click(&browser, "#timeline button.undo-merge").await;
    wait_for_text(&browser, "#timeline", "merge of A. Lovelace undone").await;
    wait_for(&browser, &twin_row).await;
    let restored = lead::Entity::find_by_id(twin)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(restored.merged_into_id, None);
    let merge = lead_merge::Entity::find()
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert!(merge.undone_at.is_some());
    assert_nothing_refused(&browser, &format!("/api/merges/{}/undo", merge.id), "sales").await;
    browser.close().await.unwrap();
}

async fn sales_sorts_keeps_filters_in_the_address_and_moves_and_assigns_in_bulk(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let admin = app.api_as(Role::Admin, None).await;
    let mut ids = Vec::new();
    for (source_ref, name) in [("f-1", "Carol"), ("f-2", "Alan"), ("f-3", "Betty")] {
        let body = json!({"source": "webform", "source_ref": source_ref, "name": name});
        ids.push(admin.new_lead(&body).await);
    }
    // Two reps with one name: the page tells them apart.
    let alice = person(&app, "alice", "alice@example.com", Role::Sales).await;
    let other_alice = person(&app, "alice", "alice.b@example.com", Role::Sales).await;
    let (alice_id, other_id) = (alice.id, other_alice.id);

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    // A saved list: new leads, by name.
    browser
        .goto(&app.url("/?status=new&order=name:asc"))
        .await
        .unwrap();
    sign_in_as(&browser, &alice).await;
    wait_for_text(&browser, "#whoami", "alice (sales").await;
    click(&browser, "#tabs button[data-tab=\"leads\"]").await;
    wait_for_count(&browser, "#lead-table tbody tr", 3).await;
    let names = browser
        .execute(
            "return [...document.querySelectorAll('#lead-table tbody td.name a')].map(a => a.textContent);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(names, json!(["Alan", "Betty", "Carol"]));
    let status = browser
        .execute(
            "return document.getElementById('filter-status').value;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(status, json!("new"), "the filter came from the address");
    // Sorting again, descending, goes into the address.
    click(&browser, "#lead-table button.sort[data-sort=\"name\"]").await;
    wait_for_text(&browser, "#lead-table tbody tr:first-child", "Carol").await;
    let address = browser.current_url().await.unwrap();
    assert!(address.as_str().contains("order=name%3Adesc"), "{address}");
    assert!(address.as_str().contains("status=new"), "{address}");

    // Two leads to the other alice, told apart by id.
    for id in &ids[..2] {
        click(
            &browser,
            &format!("#lead-table tr[data-lead-id=\"{id}\"] input.pick"),
        )
        .await;
    }
    wait_for_text(&browser, "#bulk-count", "2 leads selected").await;
    click(
        &browser,
        &format!("#bulk-owner option[value=\"{other_id}\"]"),
    )
    .await;
    let other_label = format!("alice (sales, #{other_id})");
    assert_eq!(
        text_of(
            &browser,
            &format!("#bulk-owner option[value=\"{other_id}\"]")
        )
        .await,
        other_label
    );
    look(&browser, "sales-bulk-selected").await;
    click(&browser, "#bulk-assign").await;
    wait_for_text(&browser, "#bulk-result", "Assigned 2 leads.").await;
    for id in &ids[..2] {
        assert_eq!(stored_lead(&app, *id).await.owner_id, Some(other_id));
        wait_for_text(
            &browser,
            &format!("#lead-table tr[data-lead-id=\"{id}\"] td.owner"),
            &other_label,
        )
        .await;
    }
    assert_ne!(alice_id, other_id);

    // All three move on; each write carried its own Idempotency-Key.
    let keys_before = app.count(idempotency_key::Entity).await;
    click(&browser, "#pick-all").await;
    wait_for_text(&browser, "#bulk-count", "3 leads selected").await;
    click(&browser, "#bulk-status option[value=\"contacted\"]").await;
    click(&browser, "#bulk-move").await;
    wait_for_text(&browser, "#bulk-result", "Moved 3 leads.").await;
    for id in &ids {
        assert_eq!(stored_lead(&app, *id).await.status, "contacted");
    }
    assert_eq!(app.count(idempotency_key::Entity).await, keys_before + 3);
    // The saved filter (status new) now matches nothing.
    wait_for(&browser, "#lead-empty:not([hidden])").await;
    look(&browser, "sales-bulk-done").await;
    browser.close().await.unwrap();
}

/// A converted lead (Ada Lovelace of Analytical Engines, with the deal
/// "Difference Engine No. 2", and an overdue task about that deal) and a
/// second open deal of hers, owned by a sales rep; returns `(rep, lead id, first deal id, second deal id)`.
async fn a_customer_with_two_deals(app: &TestApp) -> (Person, i64, i64, i64) {
    let intake = app.token(Role::Intake, Some("webform")).await;
    let lead = app
        .api(&intake)
        .new_lead(
            &json!({"source": "webform", "source_ref": "form-12", "name": "Ada Lovelace",
                    "email": "ada@example.com", "company": "Analytical Engines"}),
        )
        .await;
    let grace = person(app, "Grace Hopper", "grace@example.com", Role::Sales).await;
    let rep = app.api(&grace.token);
    for to in ["contacted", "qualified"] {
        rep.move_lead(lead, to, None).await.expect(200).await;
    }
    let converted = rep
        .convert_lead(
            lead,
            &json!({"deal": {"name": "Difference Engine No. 2", "amount_cents": 1_250_000,
                             "currency": "EUR"}}),
        )
        .key("convert-12")
        .await
        .expect(201)
        .await;
    let first = converted["deal"]["id"].as_i64().unwrap();
    let second = rep
        .create_crm(
            "deals",
            &json!({"name": "Jacquard loom service", "amount_cents": 30_000, "currency": "EUR",
                    "contact_id": converted["contact"]["id"],
                    "company_id": converted["company"]["id"]}),
        )
        .key("deal-2")
        .await
        .expect(201)
        .await["id"]
        .as_i64()
        .unwrap();
    // A task about the first deal, an hour overdue.
    let due = (chrono::Utc::now() - chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    rep.post(
        "/api/tasks",
        &json!({"subject_type": "deal", "subject_id": first,
                "title": "Send the engine contract", "due_at": due}),
    )
    .key("task-1")
    .await
    .expect(201)
    .await;
    (grace, lead, first, second)
}

async fn stored_deal(app: &TestApp, id: i64) -> deal::Model {
    deal::Entity::find_by_id(id)
        .one(&app.db)
        .await
        .unwrap()
        .unwrap()
}

/// The id of the element that has the keyboard focus.
async fn focused_id(browser: &Client) -> String {
    browser
        .execute("return document.activeElement.id;", vec![])
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn press(browser: &Client, key: char) {
    let keys = KeyActions::new("keyboard".to_owned())
        .then(KeyAction::Down { value: key })
        .then(KeyAction::Up { value: key });
    browser.perform_actions(keys).await.unwrap();
}

/// Types `text` into whatever has the focus, key by key.
async fn type_keys(browser: &Client, text: &str) {
    let keys = text
        .chars()
        .fold(KeyActions::new("typing".to_owned()), |keys, c| {
            keys.then(KeyAction::Down { value: c })
                .then(KeyAction::Up { value: c })
        });
    browser.perform_actions(keys).await.unwrap();
}

const TAB: char = '\u{e004}';
const ENTER: char = '\u{e007}';

/// Presses Tab until the element matching `css` has the focus.
async fn tab_to(browser: &Client, css: &str) {
    for _ in 0..120 {
        let there = browser
            .execute(
                "return !!document.activeElement && document.activeElement.matches(arguments[0]);",
                vec![json!(css)],
            )
            .await
            .unwrap();
        if there == Value::Bool(true) {
            return;
        }
        press(browser, TAB).await;
    }
    panic!("Tab never reached `{css}`");
}

async fn sales_browses_contacts_and_companies_and_moves_deals_on_the_board(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let (grace, lead, first, second) = a_customer_with_two_deals(&app).await;
    let contact = stored_deal(&app, first).await.contact_id.unwrap();
    let company = stored_deal(&app, first).await.company_id.unwrap();

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();
    sign_in_as(&browser, &grace).await;
    wait_for_text(&browser, "#whoami", "Grace Hopper (sales)").await;
    // My day names what the overdue task is about: the deal.
    wait_for_text(
        &browser,
        &format!("#my-tasks a[data-deal-id=\"{first}\"]"),
        "Difference Engine No. 2",
    )
    .await;

    // Contacts: the list with each contact's company by name.
    click(&browser, "#tabs button[data-tab=\"contacts\"]").await;
    let row = format!("#contact-table tbody tr[data-id=\"{contact}\"]");
    wait_for_text(&browser, &row, "Ada Lovelace").await;
    wait_for_text(&browser, &row, "ada@example.com").await;
    wait_for_text(
        &browser,
        &format!("{row} a[data-company-id=\"{company}\"]"),
        "Analytical Engines",
    )
    .await;
    look(&browser, "sales-contacts").await;

    // The contact's detail: its heading takes the focus, its deals by name,
    // its timeline in words with the lead it came from.
    click(&browser, &format!("{row} a[data-contact-id=\"{contact}\"]")).await;
    wait_for_text(&browser, "#contact-title", "Ada Lovelace").await;
    assert_eq!(focused_id(&browser).await, "contact-title");
    wait_for_text(&browser, "#contact-deals", "Difference Engine No. 2").await;
    wait_for_text(&browser, "#contact-deals", "open · 12,500.00 EUR").await;
    wait_for_text(&browser, "#contact-deals", "Jacquard loom service").await;
    wait_for_text(&browser, "#contact-timeline", "converted from Ada Lovelace").await;
    wait_for_text(&browser, "#contact-timeline", "by Grace Hopper").await;
    look(&browser, "sales-contact-detail").await;

    // Its company, from the link: the company's contacts and deals.
    click(
        &browser,
        &format!("#contact-fields a[data-company-id=\"{company}\"]"),
    )
    .await;
    wait_for(&browser, "#companies-tab:not([hidden])").await;
    wait_for_text(&browser, "#company-title", "Analytical Engines").await;
    wait_for_text(&browser, "#company-contacts", "Ada Lovelace").await;
    wait_for_text(&browser, "#company-deals", "Jacquard loom service").await;
    wait_for_text(&browser, "#company-timeline", "company created").await;
    wait_for_text(&browser, "#company-timeline", "From a lead").await;
    assert!(
        browser
            .current_url()
            .await
            .unwrap()
            .as_str()
            .ends_with(&format!("#company/{company}"))
    );
    wait_for(
        &browser,
        &format!("#company-table tbody tr[data-id=\"{company}\"]"),
    )
    .await;
    look(&browser, "sales-company-detail").await;

    // Deals by stage: both open, with who they are for and the column's sum.
    click(&browser, "#tabs button[data-tab=\"deals\"]").await;
    let open = "#deal-board [data-stage=\"open\"]";
    let won = "#deal-board [data-stage=\"won\"]";
    let lost = "#deal-board [data-stage=\"lost\"]";
    wait_for_count(&browser, &format!("{open} li.deal-card"), 2).await;
    wait_for_text(&browser, open, "2 deals").await;
    wait_for_text(&browser, open, "12,800.00 EUR").await;
    wait_for_text(&browser, open, "Ada Lovelace, Analytical Engines").await;
    wait_for_text(&browser, won, "0 deals").await;
    look(&browser, "sales-deals-board").await;

    // A card dragged to another column (the browser's own drag events):
    // it moves there and the database agrees.
    browser
        .execute(
            "const [card, column] = [document.querySelector(arguments[0]), \
                                     document.querySelector(arguments[1])]; \
             const dataTransfer = new DataTransfer(); \
             const fire = (node, type) => node.dispatchEvent( \
               new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer})); \
             fire(card, 'dragstart'); fire(column, 'dragover'); fire(column, 'drop'); \
             fire(card, 'dragend');",
            vec![
                json!(format!("{open} li[data-deal-id=\"{first}\"]")),
                json!(won),
            ],
        )
        .await
        .unwrap();
    wait_for(&browser, &format!("{won} li[data-deal-id=\"{first}\"]")).await;
    wait_for_text(
        &browser,
        "#deal-result",
        "Moved Difference Engine No. 2 to won",
    )
    .await;
    let stored = stored_deal(&app, first).await;
    assert_eq!((stored.stage.as_str(), stored.version), ("won", 2));

    // Someone else closes the other deal meanwhile: the board's If-Match is
    // stale. The problem shows on the board, in words, and the board is
    // read again.
    app.api(&grace.token)
        .move_deal(second, "lost", Some("went with a rival"))
        .key("lost-2")
        .await
        .expect(200)
        .await;
    click(
        &browser,
        &format!("{open} li[data-deal-id=\"{second}\"] button[data-to=\"won\"]"),
    )
    .await;
    let problem = "#deal-list > .problem";
    wait_for_text(&browser, problem, "Someone else changed this meanwhile").await;
    wait_for_text(&browser, problem, "board now shows what is stored").await;
    wait_for(&browser, &format!("{lost} li[data-deal-id=\"{second}\"]")).await;
    wait_for_text(&browser, open, "0 deals").await;
    look(&browser, "sales-deals-stale-412").await;
    let stored = stored_deal(&app, second).await;
    assert_eq!(
        (stored.stage.as_str(), stored.version),
        ("lost", 2),
        "the stale click changed nothing"
    );

    // The won deal's detail: its stage, where it came from, its timeline.
    click(&browser, &format!("{won} a[data-deal-id=\"{first}\"]")).await;
    wait_for_text(&browser, "#deal-title", "Difference Engine No. 2").await;
    assert_eq!(focused_id(&browser).await, "deal-title");
    wait_for_text(&browser, "#deal-stage", "won").await;
    wait_for_text(&browser, "#deal-moves", "stays so").await;
    wait_for_text(
        &browser,
        &format!("#deal-fields a[data-lead-id=\"{lead}\"]"),
        "Ada Lovelace",
    )
    .await;
    wait_for_text(&browser, "#deal-timeline", "stage open → won").await;
    wait_for_text(&browser, "#deal-timeline", "deal opened at 12,500.00 EUR").await;
    assert_eq!(
        text_of(&browser, "#deal-version").await,
        "",
        "sales sees no version"
    );
    look(&browser, "sales-deal-detail").await;

    // Reloaded, the page opens the deal from its address.
    browser.refresh().await.unwrap();
    wait_for_text(&browser, "#deal-title", "Difference Engine No. 2").await;
    wait_for(
        &browser,
        &format!("{won} li[data-deal-id=\"{first}\"].selected"),
    )
    .await;
    assert_nothing_refused(&browser, "/api/deals", "sales").await;
    browser.close().await.unwrap();
}

async fn a_keyboard_alone_signs_in_opens_a_lead_and_changes_its_status(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let id = app
        .api(&intake)
        .new_lead(&json!({"source": "webform", "source_ref": "form-5", "name": "Ada Lovelace"}))
        .await;
    let grace = person(&app, "Grace Hopper", "grace@example.com", Role::Sales).await;

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();

    // Sign in: Tab to the email, type it, on to the password, Enter.
    tab_to(&browser, "#login-email").await;
    type_keys(&browser, &grace.email).await;
    tab_to(&browser, "#login-password").await;
    type_keys(&browser, PASSWORD).await;
    press(&browser, ENTER).await;
    wait_for_text(&browser, "#whoami", "Grace Hopper (sales)").await;

    // To the Leads tab, and the lead by its name.
    tab_to(&browser, "#tabs button[data-tab=\"leads\"]").await;
    press(&browser, ENTER).await;
    let link = format!("#lead-table tr[data-lead-id=\"{id}\"] td.name a");
    wait_for(&browser, &link).await;
    tab_to(&browser, &link).await;
    press(&browser, ENTER).await;

    // The lead opens with its heading focused; on to a status move.
    wait_for_text(&browser, "#lead-title", "Ada Lovelace").await;
    eventually(
        "the lead's heading to take the focus",
        WAIT,
        async || match focused_id(&browser).await.as_str() {
            "lead-title" => Ok(()),
            other => Err(format!("focus on #{other}")),
        },
    )
    .await;
    tab_to(&browser, "#transitions button[data-to=\"contacted\"]").await;
    press(&browser, ENTER).await;
    wait_for_text(&browser, "#lead-status", "contacted").await;
    wait_for_text(&browser, "#timeline", "new → contacted").await;
    assert_eq!(stored_lead(&app, id).await.status, "contacted");
    browser.close().await.unwrap();
}

async fn admin_reads_every_view_it_is_offered(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let (_, lead, first, _) = a_customer_with_two_deals(&app).await;
    let admin = person(&app, "Ada Admin", "ada.admin@example.com", Role::Admin).await;

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();
    sign_in_as(&browser, &admin).await;
    wait_for_text(&browser, "#whoami", "Ada Admin (admin)").await;

    // Each view, loaded, checked and pictured; then one record of each kind.
    let views = [
        ("leads", "#lead-table", "Ada Lovelace"),
        ("contacts", "#contact-table", "Ada Lovelace"),
        ("companies", "#company-table", "Analytical Engines"),
        ("deals", "#deal-board", "Jacquard loom service"),
        ("tasks", "#task-table", "Difference Engine No. 2"),
        ("reports", "#speed-table", "Source webform"),
        ("ops", "#dead-events", "none"),
    ];
    for (tab, css, text) in views {
        click(&browser, &format!("#tabs button[data-tab=\"{tab}\"]")).await;
        if tab == "tasks" {
            // Everyone's overdue tasks, each about its record by name.
            click(&browser, ".due-choice button[data-due=\"overdue\"]").await;
        }
        wait_for_text(&browser, css, text).await;
        look(&browser, &format!("admin-{tab}")).await;
    }
    for (address, title, text) in [
        (format!("#lead/{lead}"), "#lead-title", "Ada Lovelace"),
        (
            format!("#deal/{first}"),
            "#deal-title",
            "Difference Engine No. 2",
        ),
    ] {
        browser
            .goto(&app.url(&format!("/{address}")))
            .await
            .unwrap();
        wait_for_text(&browser, title, text).await;
    }
    // Admin reads the API: the deal's version shows.
    wait_for_text(&browser, "#deal-version", "version 1").await;
    look(&browser, "admin-deal-detail").await;

    // Lost from the detail, with a reason: the board and the database agree.
    fill(&browser, "#deal-reason", "budget moved to next year").await;
    click(&browser, "#deal-moves button[data-to=\"lost\"]").await;
    wait_for_text(&browser, "#deal-stage", "lost").await;
    wait_for_text(
        &browser,
        "#deal-fields dd[data-field=\"why lost\"]",
        "budget moved to next year",
    )
    .await;
    wait_for_text(
        &browser,
        "#deal-timeline",
        "stage open → lost (budget moved to next year)",
    )
    .await;
    wait_for(
        &browser,
        &format!("#deal-board [data-stage=\"lost\"] li[data-deal-id=\"{first}\"]"),
    )
    .await;
    let stored = stored_deal(&app, first).await;
    assert_eq!(
        (stored.stage.as_str(), stored.lost_reason.as_deref()),
        ("lost", Some("budget moved to next year"))
    );
    assert_nothing_refused(&browser, "/api/deals", "admin").await;
    browser.close().await.unwrap();
}

/// A user signs in with email and password (no token anywhere): the page
/// works by the session cookie, a write carries the session's CSRF token
/// (the note is stored), a reload keeps the session, a wrong password says
/// so in the sign-in card, and signing out ends the session on the server.
async fn a_user_signs_in_with_email_and_password_writes_and_signs_out(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let password = domain::users::hash_password(
        domain::users::Password::new("correct horse battery staple".into()).unwrap(),
    )
    .await
    .unwrap();
    domain::users::add(
        &app.db,
        domain::users::NewUser {
            name: "Grace Hopper".into(),
            email: "grace@example.com".into(),
            role: Role::Sales,
            team: None,
            password,
        },
    )
    .await
    .unwrap();
    let intake = app.token(Role::Intake, Some("webform")).await;
    let created = app
        .api(&intake)
        .create_lead(&json!({"source": "webform", "source_ref": "pw-1", "name": "Ada Lovelace"}))
        .await;
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();
    look(&browser, "sign-in").await;
    fill(&browser, "#login-email", "grace@example.com").await;
    fill(&browser, "#login-password", "not her password at all").await;
    click(&browser, "#sign-in-password").await;
    wait_for_text(&browser, "#problem", "do not match").await;

    fill(&browser, "#login-email", "Grace@Example.com").await;
    fill(&browser, "#login-password", "correct horse battery staple").await;
    click(&browser, "#sign-in-password").await;
    wait_for_text(&browser, "#whoami", "Grace Hopper (sales)").await;
    let stored_token = browser
        .execute("return sessionStorage.getItem('leadpipe.token');", vec![])
        .await
        .unwrap();
    assert_eq!(
        stored_token,
        Value::Null,
        "no token is kept for a cookie session"
    );

    // A write by cookie: the page sends the CSRF token, the note is stored.
    browser
        .goto(&app.url(&format!("/#lead/{id}")))
        .await
        .unwrap();
    wait_for_text(&browser, "#whoami", "Grace Hopper (sales)").await;
    wait_for_text(&browser, "#lead-title", "Ada Lovelace").await;
    fill(&browser, "#note-text", "Signed in with a password").await;
    click(&browser, "#add-note").await;
    wait_for_text(
        &browser,
        "#timeline li[data-kind=\"note\"]",
        "note: Signed in with a password",
    )
    .await;
    let notes = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(id))
        .filter(activity::Column::Kind.eq("note"))
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(app.count(user_session::Entity).await, 1);

    click(&browser, "#sign-out").await;
    wait_until_forgotten(&browser, &["Grace Hopper", "Ada Lovelace"]).await;
    eventually("the session to end on the server", WAIT, async || match app
        .count(user_session::Entity)
        .await
    {
        0 => Ok(()),
        n => Err(format!("{n} sessions left")),
    })
    .await;
    // A fresh page finds no session to resume.
    browser.goto(&app.url("/")).await.unwrap();
    wait_for(&browser, "#login-email").await;
    assert!(
        browser
            .find(Locator::Css("#login"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap()
    );
    browser.close().await.unwrap();
}

/// A receiver that failed for days: the Ops view flags its subscription
/// disabled, and an admin sends its dead delivery again and enables it there.
async fn admin_sees_a_disabled_subscription_recovers_and_enables_it(backend: Backend) {
    let Some((chromium, chromedriver)) = browser_programs() else {
        return;
    };
    let app = TestApp::spawn(backend).await;
    let ada = person(&app, "Ada Admin", "ada.admin@example.com", Role::Admin).await;
    let olive = person(&app, "Olive Ops", "olive@example.com", Role::Ops).await;
    let receiver = leadpipe_tests::receiver::Receiver::start().await;
    receiver.answer(500);
    let created = app.api(&ada.token).subscribe(&receiver, json!([])).await;
    let sub = created["id"].as_i64().unwrap();
    app.api(&ada.token)
        .new_lead(&json!({"source": "webform", "source_ref": "f-1", "name": "Ada Lovelace"}))
        .await;
    while workers::lead_processor::run_once(&app.db, 100)
        .await
        .unwrap()
        > 0
    {}
    // Two attempts: the first starts the failing streak, which is then made
    // six days old; the second fails past the limit, disabling it, and dies.
    let publisher = app.publisher(leadpipe_tests::publishing::settings_with(2, "127.0.0.1"));
    leadpipe_tests::publishing::publish_until(&publisher, "a failed attempt", WAIT, async || {
        !receiver.received().is_empty()
    })
    .await;
    app.exec(&format!(
        "UPDATE subscription SET failing_since = '{}' WHERE id = {sub}",
        (chrono::Utc::now() - chrono::Duration::days(6))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    ))
    .await;
    let stored = async || {
        subscription::Entity::find_by_id(sub)
            .one(&app.db)
            .await
            .unwrap()
            .unwrap()
    };
    leadpipe_tests::publishing::publish_until(
        &publisher,
        "the subscription disabled",
        WAIT,
        async || {
            stored().await.state == "disabled"
                && outbox_delivery::Entity::find()
                    .filter(outbox_delivery::Column::State.eq("dead"))
                    .one(&app.db)
                    .await
                    .unwrap()
                    .is_some()
        },
    )
    .await;

    let driver = Driver::start(&chromedriver).await;
    let browser = driver.browser(&chromium).await;
    browser.goto(&app.url("/")).await.unwrap();

    // Ops reads the state, with no buttons to change it.
    sign_in_as(&browser, &olive).await;
    wait_for_text(&browser, "#whoami", "Olive Ops (ops)").await;
    click(&browser, "#tabs button[data-tab=\"ops\"]").await;
    let row = format!("#subscription-table tr[data-subscription-id=\"{sub}\"]");
    wait_for_text(&browser, &row, &receiver.url).await;
    wait_for_text(&browser, &format!("{row} .alert"), "disabled").await;
    wait_for_text(
        &browser,
        &format!("{row} td:nth-child(3)"),
        "no delivery succeeded since",
    )
    .await;
    wait_for_text(&browser, &row, "0.0 % of 2 attempts answered 2xx").await;
    wait_for_text(
        &browser,
        "#ops-alerts",
        "is disabled; its deliveries are held",
    )
    .await;
    wait_for_text(&browser, "#subscriptions", "an admin enables and recovers").await;
    assert!(
        browser
            .find(Locator::Css(&format!("{row} button")))
            .await
            .is_err(),
        "ops gets no buttons"
    );
    click(&browser, "#sign-out").await;
    wait_for(&browser, "#login:not([hidden])").await;

    // The admin sends the dead delivery again: held while disabled.
    sign_in_as(&browser, &ada).await;
    wait_for_text(&browser, "#whoami", "Ada Admin (admin)").await;
    click(&browser, "#tabs button[data-tab=\"ops\"]").await;
    wait_for_text(&browser, &row, "disabled").await;
    browser
        .execute(
            "document.getElementById('subscriptions').scrollIntoView();",
            vec![],
        )
        .await
        .unwrap();
    look(&browser, "ops-subscriptions").await;
    click(&browser, &format!("{row} button:not(.enable)")).await;
    wait_for(&browser, "#recover-form:not([hidden])").await;
    click(&browser, "#recover-form button[type=\"submit\"]").await;
    wait_for_text(
        &browser,
        "#recover-result",
        "Sent again: 1 dead delivery, 0 deliveries waiting for a retry.",
    )
    .await;
    wait_for_text(&browser, "#outbox-stats", "1 delivery (sent once enabled)").await;

    // Enabled: the held delivery goes out to the mended receiver.
    receiver.answer(200);
    click(&browser, &format!("{row} button.enable")).await;
    eventually("the subscription enabled", WAIT, async || {
        (stored().await.state == "active").then_some(())
    })
    .await;
    wait_for_text(&browser, &format!("{row} td:nth-child(3)"), "active").await;
    leadpipe_tests::publishing::publish_until(
        &publisher,
        "the delivery accepted",
        WAIT,
        async || !receiver.accepted().is_empty(),
    )
    .await;
    assert_eq!(receiver.accepted()[0].body["type"], "lead.created");
    browser.close().await.unwrap();
}
