//! The `leadpipe` binary as an operator uses it, on a fresh SQLite file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

/// A sealing key for this test's secrets (32 bytes of 7, base64).
const TEST_KEY: &str = "cli:BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

struct Cli {
    dir: std::path::PathBuf,
}

impl Cli {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("leadpipe-cli-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[("LEADPIPE_SECRET_KEY", TEST_KEY)])
    }

    /// Without a sealing key unless `env` gives one.
    fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let url = format!("sqlite://{}?mode=rwc", self.dir.join("cli.db").display());
        Command::new(env!("CARGO_BIN_EXE_leadpipe"))
            .args(args)
            .env("DATABASE_URL", url)
            .env("RUST_LOG", "error")
            .env("LEADPIPE_OUTBOUND_ALLOW", "127.0.0.1")
            .env_remove("LEADPIPE_SECRET_KEY")
            .env_remove("LEADPIPE_SECRET_KEY_FILE")
            .env_remove("LEADPIPE_INSECURE_DEV_SECRETS")
            .envs(env.iter().copied())
            .output()
            .expect("run leadpipe")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn tokens_subscriptions_and_deliveries_from_the_command_line() {
    let cli = Cli::new();
    assert!(cli.ok(&["migrate"]).contains("migrations applied"));
    let token = cli.ok(&[
        "token", "create", "--name", "web", "--role", "intake", "--source", "webform",
    ]);
    assert!(token.trim().starts_with("lp_") && token.trim().len() > 40);
    let refused = cli.run(&["token", "create", "--name", "x", "--role", "intake"]);
    assert!(!refused.status.success());
    let listed = cli.ok(&["token", "list"]);
    let web = listed.lines().find(|l| l.contains(" web ")).expect(&listed);
    assert!(
        web.contains("intake") && web.contains("webform") && web.contains("active"),
        "{web}"
    );
    assert!(
        !listed.contains(token.trim()),
        "a listing never shows tokens"
    );
    let id = web.split_whitespace().next().unwrap();
    assert!(
        cli.ok(&["token", "revoke", "--id", id])
            .contains("revoked principal")
    );
    let listed = cli.ok(&["token", "list"]);
    assert!(
        listed
            .lines()
            .any(|l| l.contains(" web ") && l.contains("revoked")),
        "{listed}"
    );
    assert!(
        !cli.run(&["token", "revoke", "--id", "999"])
            .status
            .success()
    );

    let secret = cli.ok(&[
        "subscription",
        "add",
        "--url",
        "http://127.0.0.1:9/hook",
        "--event-type",
        "lead.created",
    ]);
    assert!(secret.trim().starts_with("whsec_"));
    let listed = cli.ok(&["subscription", "list", "--output", "json"]);
    assert!(
        listed.contains("\"url\":\"http://127.0.0.1:9/hook\"") && !listed.contains(secret.trim())
    );
    let internal = cli.run(&["subscription", "add", "--url", "http://10.1.2.3/hook"]);
    assert!(!internal.status.success());
    assert!(String::from_utf8_lossy(&internal.stderr).contains("internal address"));

    assert_eq!(cli.ok(&["delivery", "list", "--state", "dead"]), "");
    assert_eq!(
        cli.ok(&["delivery", "retry", "--dry-run"]).trim(),
        "0 dead deliveries would be put back in line"
    );
    assert!(cli.ok(&["subscription", "remove", "1"]).contains("removed"));
    assert!(!cli.run(&["subscription", "remove", "1"]).status.success());
    assert!(cli.ok(&["prune"]).contains("expired idempotency keys"));
}

#[test]
fn help_never_prints_secret_environment_values() {
    let env = [
        (
            "LEADPIPE_SECRET_KEY",
            "help:c2VjcmV0LWtleS1tYXRlcmlhbC1oZWxwLWhlbHAtaGVscA==",
        ),
        ("LEADPIPE_PULL_AUTH_SECRET", "Bearer pull-secret-in-env"),
    ];
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["source", "add", "--help"],
        &["secrets", "rotate", "--help"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_leadpipe"))
            .args(args)
            .env(
                "DATABASE_URL",
                "postgres://leadpipe:hunter2@db.internal/leads",
            )
            .envs(env)
            .output()
            .expect("run leadpipe");
        let help = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{args:?}: {help}");
        for secret in ["hunter2", "c2VjcmV0", "pull-secret-in-env"] {
            assert!(!help.contains(secret), "{args:?} shows {secret}:\n{help}");
        }
    }
}

#[test]
fn without_a_key_secrets_are_refused_unless_in_development_mode() {
    let cli = Cli::new();
    let add = [
        "source",
        "add",
        "--name",
        "dev",
        "--scheme",
        "github",
        "--secret",
        "a-development-secret",
    ];
    let refused = cli.run_with(&add, &[]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("LEADPIPE_SECRET_KEY") && said.contains("LEADPIPE_INSECURE_DEV_SECRETS"),
        "{said}"
    );

    let dev = cli.run_with(&add, &[("LEADPIPE_INSECURE_DEV_SECRETS", "1")]);
    assert!(
        dev.status.success(),
        "{}",
        String::from_utf8_lossy(&dev.stderr)
    );
    // Once a real key is set, rotate moves the development value under it.
    let rotated = cli.run_with(&["secrets", "rotate"], &[("LEADPIPE_SECRET_KEY", TEST_KEY)]);
    let out = String::from_utf8_lossy(&rotated.stdout);
    assert!(
        out.contains("re-sealed under key 'cli': 1 source secrets"),
        "{out}"
    );
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

#[test]
fn listings_print_a_table_or_one_json_object_per_line() {
    let cli = Cli::new();
    cli.ok(&["token", "create", "--name", "ann", "--role", "sales"]);
    cli.ok(&["token", "create", "--name", "bob", "--role", "ops"]);
    cli.ok(&[
        "subscription",
        "add",
        "--url",
        "http://127.0.0.1:9/a",
        "--event-type",
        "deal.stage_changed",
    ]);

    let table = cli.ok(&["token", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "a header and one line per principal: {table}"
    );
    assert!(
        lines[0].starts_with("id") && lines[0].contains("role"),
        "{table}"
    );
    assert!(
        lines[2].contains("bob") && lines[2].contains("ops"),
        "{table}"
    );

    for args in [
        &["token", "list", "--output", "json"][..],
        &["subscription", "list", "-o", "json"],
    ] {
        let json = cli.ok(args);
        assert!(!json.is_empty(), "{args:?}");
        for line in json.lines() {
            let row: serde_json::Value = serde_json::from_str(line).expect(line);
            assert!(
                row.is_object() && row.get("id").is_some(),
                "{args:?}: {line}"
            );
        }
    }
    let subs = cli.ok(&["subscription", "list"]);
    assert!(subs.lines().next().unwrap().contains("url"), "{subs}");
    assert!(subs.contains("deal.stage_changed"), "{subs}");

    // Every listing takes --output; an empty one prints nothing in either form.
    for listing in [
        &["source", "list"][..],
        &["delivery", "list"],
        &["inbox", "list"],
    ] {
        for format in ["table", "json"] {
            let args = [listing, &["--output", format]].concat();
            assert_eq!(cli.ok(&args), "", "{args:?}");
        }
    }
    let bad = cli.run(&["token", "list", "--output", "yaml"]);
    assert_eq!(code(&bad), 2);
}

#[test]
fn typed_values_are_refused_before_anything_runs() {
    let cli = Cli::new();
    for (args, listed) in [
        (
            &["token", "create", "--name", "x", "--role", "boss"][..],
            "intake, sales, ops, admin",
        ),
        (
            &["delivery", "list", "--state", "gone"],
            "pending, delivering, failed, delivered, dead",
        ),
        (
            &["inbox", "list", "--state", "lost"],
            "received, processing",
        ),
        (
            &["source", "add", "--name", "s", "--scheme", "md5"],
            "standard-webhooks",
        ),
    ] {
        let out = cli.run(args);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{args:?}: {said}");
        assert!(said.contains(listed), "{args:?} names the choices: {said}");
    }
    assert!(
        !cli.dir.join("cli.db").exists(),
        "refused before touching the database"
    );
}

#[test]
fn completions_and_the_manual_page() {
    let cli = Cli::new();
    for (shell, marker) in [
        ("bash", "_leadpipe()"),
        ("zsh", "#compdef leadpipe"),
        ("fish", "complete -c leadpipe"),
    ] {
        let script = cli.ok(&["completions", shell]);
        assert!(script.contains(marker), "{shell}");
        assert!(
            script.contains("subscription") && script.contains("output"),
            "{shell}"
        );
    }
    let man = cli.ok(&["man"]);
    assert!(man.contains(".TH leadpipe 1"), "roff with a title header");
    assert!(man.contains("completions"), "lists the subcommands");
    assert_eq!(code(&cli.run(&["completions", "cmd.exe"])), 2);
}

#[test]
fn exit_codes_say_what_went_wrong() {
    let cli = Cli::new();
    cli.ok(&["migrate"]);
    assert_eq!(
        code(&cli.run(&["subscription", "remove", "41"])),
        3,
        "not found"
    );
    assert_eq!(
        code(&cli.run(&["token", "revoke", "--id", "41"])),
        3,
        "not found"
    );
    assert_eq!(code(&cli.run(&["frobnicate"])), 2, "usage");
    let internal = cli.run(&["subscription", "add", "--url", "http://10.1.2.3/hook"]);
    assert_eq!(code(&internal), 2, "a value the command refuses");
    let unreachable = cli.run_with(
        &[
            "token",
            "list",
            "--database-url",
            "postgres://leadpipe:x@127.0.0.1:1/leads",
        ],
        &[],
    );
    assert_eq!(
        code(&unreachable),
        5,
        "database unreachable: {}",
        String::from_utf8_lossy(&unreachable.stderr)
    );
}

/// A batch past what one statement can bind would fail whole every time and
/// take the slow one-event-at-a-time path, silently: refused at start.
#[test]
fn an_inbox_batch_too_large_for_one_statement_is_refused_at_start() {
    let cli = Cli::new();
    for command in ["serve", "work"] {
        let url = format!("sqlite://{}?mode=rwc", cli.dir.join("cli.db").display());
        let mut child = Command::new(env!("CARGO_BIN_EXE_leadpipe"))
            .args([command, "--inbox-batch", "5000"])
            .env("DATABASE_URL", url)
            .env("LEADPIPE_BIND", "127.0.0.1:0")
            .env("LEADPIPE_SECRET_KEY", TEST_KEY)
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run leadpipe");
        // Started means it would run until stopped: give it 30 s to refuse.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("{command} started with a batch of 5000");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let refused = child.wait_with_output().unwrap();
        assert!(!refused.status.success(), "{command} exited 0");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.contains("the inbox batch size must be between 1 and 1000"),
            "{command}: {stderr}"
        );
    }
}
