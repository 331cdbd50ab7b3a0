//! The command line says what is wrong: the exit codes of
//! `docs/guide/cli.md`, messages that name the flag, path, host or setting
//! at fault, an unreachable database reported within two seconds with its
//! cause (by the CLI, `serve` and `/readyz` alike), and `-o json` with every
//! field the API shows.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::process::Output;
use std::time::{Duration, Instant};

use domain::auth::Role;
use leadpipe_tests::cli::{self, output_text};
use leadpipe_tests::{Backend, TestApp, assert_problem};
use serde_json::{Value, json};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `leadpipe args` on the app's database and checks its exit code.
fn exits(app: &TestApp, args: &[&str], code: i32) -> Output {
    let output = app.run_cli(args, &[]);
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}: {}",
        output_text(&output)
    );
    output
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_things_exit_3_and_say_what_is_missing() {
    let app = TestApp::spawn(Backend::Sqlite).await;

    let nope = exits(&app, &["reconcile", "--source", "nope"], 3);
    assert!(
        stderr(&nope).contains("no source 'nope'"),
        "{}",
        stderr(&nope)
    );

    let tombstone = exits(
        &app,
        &[
            "lead",
            "unsuppress",
            "--source",
            "webform",
            "--source-ref",
            "r-1",
        ],
        3,
    );
    assert!(
        stderr(&tombstone).contains("no tombstone for source 'webform', source_ref 'r-1'"),
        "{}",
        stderr(&tombstone)
    );

    let delivery = exits(&app, &["delivery", "retry", "999"], 3);
    assert!(
        stderr(&delivery).contains("no delivery 999"),
        "{}",
        stderr(&delivery)
    );
    assert_eq!(stdout(&delivery), "", "nothing on stdout for a failure");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_retry_answers_in_prose_as_the_other_commands_do() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let counted = exits(&app, &["delivery", "retry", "--dry-run"], 0);
    assert_eq!(
        stdout(&counted).trim(),
        "0 dead deliveries would be put back in line"
    );
    let retried = exits(&app, &["delivery", "retry"], 0);
    assert_eq!(
        stdout(&retried).trim(),
        "0 dead deliveries put back in line"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_the_flag_or_setting_at_fault() {
    let app = TestApp::spawn(Backend::Sqlite).await;

    let intake = exits(
        &app,
        &["token", "create", "--name", "web", "--role", "intake"],
        2,
    );
    assert!(
        stderr(&intake).contains("--source is required for --role intake"),
        "{}",
        stderr(&intake)
    );

    let internal = app
        .cli()
        .args(["subscription", "add", "--url", "http://10.1.2.3/hook"])
        .env("LEADPIPE_SECRET_KEY", cli::server_key())
        .env_remove("LEADPIPE_OUTBOUND_ALLOW")
        .output()
        .unwrap();
    assert_eq!(
        internal.status.code(),
        Some(2),
        "{}",
        output_text(&internal)
    );
    assert!(
        stderr(&internal).contains("LEADPIPE_OUTBOUND_ALLOW"),
        "{}",
        stderr(&internal)
    );

    for (args, flag) in [
        (&["serve", "--bind", "127.0.0.1:99999"][..], "--bind"),
        (
            &["serve", "--metrics-bind", "127.0.0.1:70000"],
            "--metrics-bind",
        ),
        (
            &["work", "--metrics-bind", "localhost:http"],
            "--metrics-bind",
        ),
    ] {
        let refused = exits(&app, args, 2);
        let said = stderr(&refused);
        assert!(
            said.contains(flag) && said.contains("port"),
            "{args:?}: {said}"
        );
    }
    // From the environment too.
    let from_env = app
        .cli()
        .arg("serve")
        .env("LEADPIPE_BIND", "0.0.0.0:80800")
        .output()
        .unwrap();
    assert_eq!(
        from_env.status.code(),
        Some(2),
        "{}",
        output_text(&from_env)
    );
    assert!(
        stderr(&from_env).contains("--bind"),
        "{}",
        stderr(&from_env)
    );
}

#[test]
fn a_sqlite_file_in_a_missing_directory_is_named() {
    let dir = std::env::temp_dir().join(format!("leadpipe-gone-{}", uuid::Uuid::new_v4()));
    let file = dir.join("leads.db");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    for args in [&["token", "list"][..], &["migrate"]] {
        let output = cli::command(&url).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(5), "{}", output_text(&output));
        let said = stderr(&output);
        assert!(
            said.contains(&format!("{}", dir.display())) && said.contains("does not exist"),
            "{args:?}: {said}"
        );
    }
    assert!(!dir.exists(), "nothing was created");
}

/// Runs `leadpipe args` against `url` and returns what it did and how long
/// it took.
fn timed(url: &str, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let output = cli::command(url)
        .args(args)
        .env("LEADPIPE_BIND", "127.0.0.1:0")
        .env("LEADPIPE_SECRET_KEY", cli::server_key())
        .output()
        .unwrap();
    (output, started.elapsed())
}

/// The cause, the host and port tried, never the password, exit code 5,
/// well within the old ten seconds.
fn assert_unreachable(url: &str, args: &[&str], wanted: &[&str]) {
    let (output, took) = timed(url, args);
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(5), "{args:?}: {said}");
    for part in wanted {
        assert!(said.contains(part), "{args:?} should say {part:?}: {said}");
    }
    assert!(
        !said.contains("hunter2"),
        "{args:?} shows the password: {said}"
    );
    assert!(
        took < Duration::from_millis(3_500),
        "{args:?} took {took:?}: {said}"
    );
}

#[test]
fn an_unreachable_database_is_reported_at_once_with_its_cause_and_host() {
    let refused = "postgres://leadpipe:hunter2@127.0.0.1:1/leads";
    for args in [&["token", "list"][..], &["migrate"], &["serve"], &["work"]] {
        assert_unreachable(
            refused,
            args,
            &["127.0.0.1:1", "connection refused", "DATABASE_URL"],
        );
    }
    assert_unreachable(
        "postgres://leadpipe:hunter2@no-such-host.invalid:5432/leads",
        &["source", "list"],
        &["no-such-host.invalid:5432", "unknown host"],
    );
}

/// The test cluster's `host:port`.
fn test_cluster() -> String {
    let admin = std::env::var("LEADPIPE_TEST_PG_URL").unwrap();
    let rest = admin.split_once('@').unwrap().1;
    rest.split_once('/').unwrap().0.to_owned()
}

#[test]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
fn a_refused_login_is_said_as_such() {
    let host = test_cluster();
    assert_unreachable(
        &format!("postgres://nobody_here:hunter2@{host}/postgres"),
        &["token", "list"],
        &[&host, "authentication failed", "nobody_here"],
    );
}

/// A TCP forwarder to the test cluster that can be cut: the database as
/// the service sees it goes away (connections reset, the port refuses).
struct Cuttable {
    port: u16,
    tasks: tokio::task::JoinSet<()>,
}

impl Cuttable {
    async fn start(target: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut tasks = tokio::task::JoinSet::new();
        let (conns_tx, mut conns_rx) = tokio::sync::mpsc::unbounded_channel();
        tasks.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let _ = conns_tx.send(client);
            }
        });
        tasks.spawn(async move {
            let mut pipes = tokio::task::JoinSet::new();
            while let Some(mut client) = conns_rx.recv().await {
                let target = target.clone();
                pipes.spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
            // Cut: dropping `pipes` aborts every forwarded connection.
        });
        Self { port, tasks }
    }

    fn cut(&mut self) {
        self.tasks.abort_all();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    postgres_tests_skipped,
    ignore = "LEADPIPE_TEST_BACKENDS excludes postgres"
)]
async fn readyz_says_why_the_database_is_unreachable_within_two_seconds() {
    let direct = leadpipe_tests::fresh_postgres_database().await;
    let mut proxy = Cuttable::start(test_cluster()).await;
    let via_proxy = direct.replacen(&test_cluster(), &format!("127.0.0.1:{}", proxy.port), 1);
    let app = TestApp::spawn_on_postgres(via_proxy, api::config::HttpSettings::for_tests()).await;
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    proxy.cut();
    let started = Instant::now();
    let answer = app.client.get(app.url("/readyz")).send().await.unwrap();
    let took = started.elapsed();
    let problem = assert_problem(answer, 503, "/problems/unavailable").await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("127.0.0.1:{}", proxy.port))
            && detail.contains("connection refused"),
        "{problem}"
    );
    assert!(took < Duration::from_millis(2_500), "took {took:?}");
}

/// The keys of each JSON line `leadpipe args -o json` prints.
fn cli_keys(app: &TestApp, args: &[&str]) -> Vec<BTreeSet<String>> {
    let args = [args, &["-o", "json"]].concat();
    let output = exits(app, &args, 0);
    stdout(&output)
        .lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            row.as_object().unwrap().keys().cloned().collect()
        })
        .collect()
}

/// The keys of the objects an API listing answers (`data` of a page, or
/// the array itself).
async fn api_keys(app: &TestApp, token: &str, path: &str) -> Vec<BTreeSet<String>> {
    let answer = app.get(token, path).await;
    assert_eq!(answer.status(), 200, "{path}");
    let body: Value = answer.json().await.unwrap();
    let rows = body
        .get("data")
        .unwrap_or(&body)
        .as_array()
        .unwrap()
        .clone();
    rows.iter()
        .map(|row| row.as_object().unwrap().keys().cloned().collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_listings_carry_every_field_the_api_shows() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let admin = app.admin_token().await;
    let _intake = app.token(Role::Intake, Some("webform")).await;
    let key = app.standard_source("webform").await;
    app.post_numbered_lead_event(&key, 1).await;
    let created = app
        .api(&admin)
        .create_subscription(&json!({"url": "http://127.0.0.1:9/hook", "description": "crm"}))
        .await;
    assert_eq!(created.status(), 201);
    exits(
        &app,
        &["team", "set", "inside", "--target-minutes", "15"],
        0,
    );
    let lead = app
        .api(&admin)
        .new_lead(&json!({"source": "webform", "source_ref": "json-1", "name": "Ada"}))
        .await;
    // A sales caller owns the task it writes.
    let task = app
        .api_as(Role::Sales, None)
        .await
        .create_crm(
            "tasks",
            &json!({"subject_type": "lead", "subject_id": lead, "title": "Call back",
                    "due_at": "2026-12-04T16:00:00Z"}),
        )
        .key("json-task-1")
        .await;
    assert_eq!(task.status(), 201, "{}", task.text().await.unwrap());
    // The lead's event goes to the subscription, whose receiver is not there.
    let publisher = app.publisher(leadpipe_tests::publishing::settings());
    leadpipe_tests::publishing::publish_until(
        &publisher,
        "a delivery",
        Duration::from_secs(10),
        async || app.count(domain::entities::outbox_delivery::Entity).await > 0,
    )
    .await;

    for (args, path) in [
        (&["token", "list"][..], "/api/principals"),
        (&["source", "list"], "/api/sources"),
        (&["subscription", "list"], "/api/subscriptions"),
        (&["inbox", "list"], "/api/ops/inbox"),
        (&["team", "list"], "/api/teams"),
        (&["task", "list"], "/api/tasks"),
        (&["delivery", "list"], "/api/ops/deliveries"),
    ] {
        let from_cli = cli_keys(&app, args);
        let from_api = api_keys(&app, &admin, path).await;
        assert_eq!(
            from_cli.len(),
            from_api.len(),
            "{args:?} lists what {path} lists"
        );
        assert!(!from_cli.is_empty(), "{args:?}: something to compare");
        let cli_all: BTreeSet<&String> = from_cli.iter().flatten().collect();
        let missing: Vec<&String> = from_api
            .iter()
            .flatten()
            .filter(|k| !cli_all.contains(k))
            .collect();
        assert!(
            missing.is_empty(),
            "{args:?} -o json lacks {missing:?} of {path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_add_prints_the_source_on_stdout() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let added = app
        .cli_with_server_key()
        .args([
            "source",
            "add",
            "--name",
            "partner",
            "--scheme",
            "github",
            "--secret-env",
            "S",
        ])
        .env("S", "a-github-secret-of-some-length")
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", output_text(&added));
    let printed: Value = serde_json::from_str(stdout(&added).trim()).unwrap();
    assert_eq!(printed["name"], "partner");
    assert_eq!(printed["scheme"], "github");
    assert!(!stdout(&added).contains("a-github-secret"), "no secret");

    let generated = exits(
        &app,
        &[
            "source",
            "add",
            "--name",
            "form",
            "--scheme",
            "standard-webhooks",
            "--generate-secret",
        ],
        0,
    );
    assert!(
        stdout(&generated).trim().starts_with("whsec_") && stdout(&generated).lines().count() == 1,
        "the generated secret alone, for SECRET=$(…): {}",
        stdout(&generated)
    );
}

/// Every flag of every command says what it is for, and a command's own
/// flags are listed apart from the global ones.
#[test]
fn help_describes_every_flag_and_sets_global_ones_apart() {
    use clap::CommandFactory;

    fn walk(command: &clap::Command, path: &str, bare: &mut Vec<String>) {
        for arg in command.get_arguments() {
            if arg.is_hide_set() || ["help", "version"].contains(&arg.get_id().as_str()) {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                bare.push(format!("{path} {}", arg.get_id()));
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), bare);
        }
    }
    let mut bare = Vec::new();
    walk(&api::cli::Cli::command(), "leadpipe", &mut bare);
    assert!(bare.is_empty(), "flags without a description: {bare:#?}");

    let help = cli::command("sqlite::memory:")
        .args(["delivery", "list", "--help"])
        .output()
        .unwrap();
    let text = stdout(&help);
    let (own, global) = text
        .split_once("Global options:")
        .unwrap_or_else(|| panic!("no global section: {text}"));
    assert!(own.contains("--state") && own.contains("--limit"), "{text}");
    assert!(!own.contains("--database-url"), "{text}");
    assert!(
        global.contains("--database-url") && !global.contains("--limit"),
        "{text}"
    );
}

/// A free port on 127.0.0.1 (free when asked).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The settings the environment template shows empty (`KEY=`), uncommented
/// as they are, leave `serve` starting on their defaults.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_left_empty_in_the_environment_file_are_defaults() {
    let dir = std::env::temp_dir().join(format!("leadpipe-empty-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("leads.db").display());
    let port = free_port();
    let mut serve = cli::command(&url)
        .args(["serve", "--no-workers"])
        .env("LEADPIPE_BIND", format!("127.0.0.1:{port}"))
        .env("LEADPIPE_SECRET_KEY", cli::server_key())
        .envs(
            [
                "LEADPIPE_SPOOL_DIR",
                "LEADPIPE_METRICS_BIND",
                "DATABASE_READ_URL",
                "LEADPIPE_SECRET_KEY_FILE",
                "LEADPIPE_OUTBOUND_ALLOW",
            ]
            .map(|key| (key, "")),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let ready = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            let output = serve.wait_with_output().unwrap();
            panic!("serve stopped ({status}): {}", stderr(&output));
        }
        let answer = client
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await;
        if let Ok(answer) = answer {
            break answer.status();
        }
        assert!(Instant::now() < deadline, "serve never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    serve.kill().unwrap();
    let _ = serve.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(ready, 200);
}

/// `leadpipe serve` on `url` at `port`, answering `/readyz`.
async fn serve_until_ready(url: &str, port: u16) -> std::process::Child {
    let mut serve = cli::command(url)
        .arg("serve")
        .env("LEADPIPE_BIND", format!("127.0.0.1:{port}"))
        .env("LEADPIPE_SECRET_KEY", cli::server_key())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = serve.try_wait().unwrap() {
            let output = serve.wait_with_output().unwrap();
            panic!("serve stopped ({status}): {}", stderr(&output));
        }
        let answer = client
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await;
        if answer.is_ok_and(|a| a.status() == 200) {
            return serve;
        }
        assert!(Instant::now() < deadline, "serve never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// On SQLite one long-running process writes: a second `serve`, or a `work`
/// beside it, refuses to start naming the file and the process that writes
/// it; a one-off command still writes; once the first is gone, even
/// killed, another starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_of_one_sqlite_file_refuses_to_start_naming_the_first() {
    let dir = std::env::temp_dir().join(format!("leadpipe-writer-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("leads.db");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let mut first = serve_until_ready(&url, free_port()).await;

    for args in [
        &["serve", "--bind", &format!("127.0.0.1:{}", free_port())][..],
        &["work"],
    ] {
        let mut second = cli::command(&url)
            .args(args)
            .env("LEADPIPE_SECRET_KEY", cli::server_key())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while second.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                second.kill().unwrap();
                first.kill().unwrap();
                panic!("{args:?} started beside a running serve on one SQLite file");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let refused = second.wait_with_output().unwrap();
        let said = stderr(&refused);
        assert_eq!(refused.status.code(), Some(4), "{args:?}: {said}");
        assert!(
            said.contains(&file.display().to_string())
                && said.contains(&format!("process {} (`leadpipe serve`", first.id()))
                && said.contains("move to PostgreSQL"),
            "{args:?}: {said}"
        );
    }
    // A one-off command takes its turn through SQLite's own lock.
    let created = cli::command(&url)
        .args(["token", "create", "--name", "ops-1", "--role", "ops"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", stderr(&created));

    // Killed without a chance to clean up: the lock goes with the process.
    first.kill().unwrap();
    let _ = first.wait();
    let mut second = serve_until_ready(&url, free_port()).await;
    second.kill().unwrap();
    let _ = second.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
