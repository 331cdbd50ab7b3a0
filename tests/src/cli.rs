//! The `leadpipe-cli` binary as the tests run it, against a test app's
//! database.

use std::path::PathBuf;
use std::process::{Command, Output};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::TestApp;

/// `Keyring::for_tests()`, the test server's keys, as the command line
/// spells them (`LEADPIPE_SECRET_KEY`).
pub fn server_key() -> String {
    format!("test:{}", STANDARD.encode([7u8; 32]))
}

/// The binary cargo builds next to the test binaries (`target/<profile>/`)
/// for an integration test of this package.
fn exe() -> PathBuf {
    let mut dir = std::env::current_exe().unwrap();
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let exe = dir.join(format!("leadpipe-cli{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.exists(),
        "{} is not built: run the tests with `cargo test -p leadpipe-tests`",
        exe.display()
    );
    exe
}

/// `leadpipe-cli` on `database_url`, logging errors only, with none of the
/// key settings of the shell that runs the tests.
pub fn command(database_url: &str) -> Command {
    let mut command = Command::new(exe());
    command
        .env("DATABASE_URL", database_url)
        .env("RUST_LOG", "error")
        .env_remove("LEADPIPE_SECRET_KEY")
        .env_remove("LEADPIPE_SECRET_KEY_FILE")
        .env_remove("LEADPIPE_INSECURE_DEV_SECRETS")
        .env_remove("LEADPIPE_PULL_AUTH_SECRET");
    command
}

/// What a command wrote, stdout then stderr.
pub fn output_text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

impl TestApp {
    /// `leadpipe-cli` on this app's database, without a key.
    pub fn cli(&self) -> Command {
        command(&self.database_url)
    }

    /// `leadpipe-cli` on this app's database with the server's keys: the
    /// same tombstone hashes, the same sealed secrets.
    pub fn cli_with_server_key(&self) -> Command {
        let mut command = self.cli();
        command.env("LEADPIPE_SECRET_KEY", server_key());
        command
    }

    /// Runs `leadpipe-cli args` with the server's keys and `env` on top;
    /// waits for it to end.
    pub fn run_cli(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.cli_with_server_key()
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }
}
