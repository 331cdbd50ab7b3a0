//! The `leadpipe` command, built inside this package so end-to-end tests can
//! run the real command line (`CARGO_BIN_EXE_leadpipe-cli`): `--help`,
//! secrets from files and standard input, `secrets rotate`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    match api::cli::run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            // The exit codes of the real binary, which tests check.
            ExitCode::from(api::cli::exit_code(&err))
        }
    }
}
