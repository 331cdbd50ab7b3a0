use std::process::ExitCode;

fn main() -> ExitCode {
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
    // The demo prints a table; only warnings (such as reconcile's report of
    // missed deliveries) should join it unless RUST_LOG says otherwise.
    if std::env::args().any(|a| a == "demo") && std::env::var_os("RUST_LOG").is_none() {
        leadpipe::telemetry::init_with(
            std::io::stderr,
            tracing_subscriber::EnvFilter::new("warn,sqlx=error,sea_orm=error"),
        );
    } else {
        leadpipe::telemetry::init();
    }
    match leadpipe::cli::run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(leadpipe::cli::exit_code(&err))
        }
    }
}
