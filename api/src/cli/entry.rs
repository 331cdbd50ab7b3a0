//! The `leadpipe` process from its first line: the allocator's arenas, the
//! runtime, the logs, then the command. It lives in the library, not in
//! `main.rs`, so the generic code it instantiates (the runtime's `block_on`,
//! the log layers, clap's parser) is compiled once, with the library, and
//! the binary is only linked.

use std::process::ExitCode;

pub fn main() -> ExitCode {
    // Before any thread starts: threads created later share the capped arenas.
    malloc::limit_arenas();
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run()),
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> ExitCode {
    let cli = <super::Cli as clap::Parser>::parse();
    let format = cli.logs.log_format;
    // The demo prints a table; only warnings (such as reconcile's report of
    // missed deliveries) should join it unless RUST_LOG says otherwise.
    if matches!(cli.command, super::Command::Demo(_)) && std::env::var_os("RUST_LOG").is_none() {
        crate::telemetry::install(
            std::io::stderr,
            tracing_subscriber::EnvFilter::new("warn,sqlx=error,sea_orm=error"),
            format,
        );
    } else {
        crate::telemetry::init(format);
    }
    match super::run_with(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(super::exit_code(&err))
        }
    }
}
