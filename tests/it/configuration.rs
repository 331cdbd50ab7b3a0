//! The settings: `docs/guide/configuration.md`'s table is generated from the
//! command line's definition, `deploy/leadpipe.env.example` lists every
//! setting of the service with its default, and settings parse from the
//! environment and from flags as they always did.
//!
//! After changing a setting, regenerate the table with
//! `LEADPIPE_UPDATE_DOCS=1 cargo test -p leadpipe-tests --test it configuration::`.

#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use api::cli::settings_doc;
use api::cli::{Cli, Command as Subcommand};
use api::telemetry::LogFormat;
use clap::Parser;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const BEGIN: &str = "<!-- settings:begin -->\n";
const END: &str = "<!-- settings:end -->";

#[test]
fn the_configuration_guide_table_is_the_command_lines_settings() {
    let path = format!("{ROOT}/docs/guide/configuration.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("docs/guide/configuration.md: no `{BEGIN}` marker"))
        + BEGIN.len();
    let end = text
        .find(END)
        .unwrap_or_else(|| panic!("docs/guide/configuration.md: no `{END}` marker"));
    let table = settings_doc::markdown_table();
    if text[start..end] == table {
        return;
    }
    if std::env::var("LEADPIPE_UPDATE_DOCS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, format!("{}{table}{}", &text[..start], &text[end..])).unwrap();
        eprintln!("rewrote the settings table in docs/guide/configuration.md");
        return;
    }
    let first_difference = table
        .lines()
        .zip(text[start..end].lines())
        .find(|(generated, committed)| generated != committed)
        .map(|(generated, committed)| {
            format!("\n  generated: {generated}\n  committed: {committed}")
        })
        .unwrap_or_default();
    panic!(
        "the settings table in docs/guide/configuration.md differs from the command line's \
         settings{first_difference}\nRegenerate it with `LEADPIPE_UPDATE_DOCS=1 cargo test -p \
         leadpipe-tests --test it configuration::`, review the diff and commit it."
    );
}

#[test]
fn the_table_says_what_every_setting_is() {
    let settings = settings_doc::settings();
    for must in [
        "DATABASE_URL",
        "LEADPIPE_INBOX_BATCH",
        "LEADPIPE_RETRY_CAP",
        "LEADPIPE_DELIVERY_MAX_ATTEMPTS",
        "LEADPIPE_LOG_FORMAT",
        "LEADPIPE_SWEEP_GRACE",
        "RUST_LOG",
        "MALLOC_ARENA_MAX",
    ] {
        assert!(
            settings.iter().any(|s| s.env == must),
            "{must} is not in the table"
        );
    }
    for setting in &settings {
        for (_, meaning) in &setting.meanings {
            assert!(
                meaning.len() > 10,
                "{} has no meaning worth the name: {meaning:?}",
                setting.env
            );
        }
    }
}

/// Every setting `serve` and `work` take is in the units' environment file,
/// and a line shown commented out shows the default (as its header says).
#[test]
fn the_environment_example_lists_every_service_setting_with_its_default() {
    let example = std::fs::read_to_string(format!("{ROOT}/deploy/leadpipe.env.example")).unwrap();
    let mut wrong = Vec::new();
    for setting in settings_doc::settings() {
        if !setting.is_service_setting() {
            continue;
        }
        let assigned = format!("{}=", setting.env);
        if !example.contains(&setting.env) {
            wrong.push(format!("{} is missing", setting.env));
            continue;
        }
        let Some(default) = &setting.default else {
            continue;
        };
        for line in example.lines() {
            let Some(value) = line
                .strip_prefix('#')
                .and_then(|rest| rest.strip_prefix(&assigned))
            else {
                continue;
            };
            if value != default {
                wrong.push(format!(
                    "#{}{value} shows {value:?}, the default is {default:?}",
                    assigned
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "deploy/leadpipe.env.example: {}",
        wrong.join("; ")
    );
}

/// The case a child process runs (see [`in_child`]), if this is one.
fn child_case() -> Option<String> {
    std::env::var("LEADPIPE_SETTINGS_TEST_CHILD").ok()
}

/// Runs `test` again in a child process whose environment is only `env`:
/// the environment is global to the process (and setting it needs
/// `unsafe`), and a developer's own variables must not leak in.
fn in_child(test: &str, env: &[(&str, &str)]) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("configuration::{test}"), "--nocapture"])
        .env_clear()
        .env("LEADPIPE_SETTINGS_TEST_CHILD", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the child test failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test: {stdout}"
    );
}

fn serve(args: &[&str]) -> (api::config::HttpSettings, workers::WorkerSettings, Cli) {
    let cli = Cli::try_parse_from(["leadpipe", "serve"].iter().chain(args).copied()).unwrap();
    match &cli.command {
        Subcommand::Serve { http, workers, .. } => (http.clone(), workers.clone(), cli),
        other => panic!("parsed as {other:?}"),
    }
}

#[test]
fn without_flags_or_environment_every_setting_has_its_default() {
    if child_case().is_none() {
        return in_child(
            "without_flags_or_environment_every_setting_has_its_default",
            &[],
        );
    }
    let (http, workers, cli) = serve(&[]);
    assert_eq!(cli.db.database_url, "sqlite://leadpipe.db?mode=rwc");
    assert_eq!(cli.db.max_connections().unwrap(), 8);
    assert_eq!(cli.logs.log_format, LogFormat::Text);
    assert_eq!(http.bind, "127.0.0.1:8080");
    assert_eq!(http.max_body_bytes, 256 * 1024);
    assert!(http.group_commit);
    assert_eq!(workers.batch_size, 100);
    assert_eq!(workers.poll_interval, Duration::from_millis(500));
    assert_eq!(workers.retry.base, Duration::from_secs(1));
    assert_eq!(workers.retry.cap, Duration::from_secs(300));
    assert_eq!(workers.retry.max_attempts, 8);
    assert_eq!(workers.publisher.retry.max_attempts, 8);
    assert_eq!(workers.reconcile.retry.max_attempts, 6);
    assert_eq!(
        workers.retention.rules().inbox_event,
        Duration::from_secs(90 * 86_400)
    );
    assert_eq!(workers.publisher.batch, 256, "not a flag: its own default");
    workers.validate().unwrap();

    let work = Cli::try_parse_from(["leadpipe", "work"]).unwrap();
    match work.command {
        Subcommand::Work {
            workers: work_workers,
            metrics,
            ..
        } => {
            // (Debug: the resolver and keyring compare by identity.)
            assert_eq!(
                format!("{work_workers:?}"),
                format!("{workers:?}"),
                "serve and work read the same tree"
            );
            assert_eq!(metrics.refresh_secs, 5.0);
        }
        other => panic!("parsed as {other:?}"),
    }
}

#[test]
fn settings_come_from_the_environment_and_a_flag_wins_over_it() {
    if child_case().is_none() {
        return in_child(
            "settings_come_from_the_environment_and_a_flag_wins_over_it",
            &[
                ("DATABASE_URL", "postgres://leadpipe@db.example/leads"),
                ("LEADPIPE_INBOX_BATCH", "7"),
                ("LEADPIPE_RETRY_CAP", "90s"),
                ("LEADPIPE_DELIVERY_MAX_ATTEMPTS", "3"),
                ("LEADPIPE_GROUP_COMMIT", "false"),
                ("LEADPIPE_LOG_FORMAT", "JSON"),
                ("LEADPIPE_OUTBOUND_ALLOW", "127.0.0.1"),
            ],
        );
    }
    let (http, workers, cli) = serve(&[]);
    assert_eq!(cli.db.database_url, "postgres://leadpipe@db.example/leads");
    assert_eq!(
        cli.db.max_connections().unwrap(),
        16,
        "PostgreSQL's default"
    );
    assert_eq!(cli.logs.log_format, LogFormat::Json);
    assert_eq!(cli.outbound.outbound_allow, "127.0.0.1");
    assert!(!http.group_commit);
    assert_eq!(workers.batch_size, 7);
    // One backoff for every queue, each with its own attempts.
    for cap in [
        workers.retry.cap,
        workers.publisher.retry.cap,
        workers.reconcile.retry.cap,
    ] {
        assert_eq!(cap, Duration::from_secs(90));
    }
    assert_eq!(workers.publisher.retry.max_attempts, 3);
    assert_eq!(workers.retry.max_attempts, 8);

    let (_, workers, cli) = serve(&[
        "--inbox-batch",
        "9",
        "--retry-cap",
        "2m",
        "--database-url",
        "sqlite://flag.db",
    ]);
    assert_eq!(workers.batch_size, 9);
    assert_eq!(workers.reconcile.retry.cap, Duration::from_secs(120));
    assert_eq!(cli.db.database_url, "sqlite://flag.db");

    // A value that does not parse is refused, naming the flag.
    let refused = Cli::try_parse_from(["leadpipe", "serve", "--retry-cap", "5w"]).unwrap_err();
    assert_eq!(refused.kind(), clap::error::ErrorKind::ValueValidation);
    assert!(refused.to_string().contains("--retry-cap"), "{refused}");
}
