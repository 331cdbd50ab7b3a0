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
    let cli = <leadpipe::cli::Cli as clap::Parser>::parse();
    let format = cli.logs.log_format;
    // The demo prints a table; only warnings (such as reconcile's report of
    // missed deliveries) should join it unless RUST_LOG says otherwise.
    if matches!(cli.command, leadpipe::cli::Command::Demo(_))
        && std::env::var_os("RUST_LOG").is_none()
    {
        leadpipe::telemetry::install(
            std::io::stderr,
            tracing_subscriber::EnvFilter::new("warn,sqlx=error,sea_orm=error"),
            format,
        );
    } else {
        leadpipe::telemetry::init(format);
    }
    match leadpipe::cli::run_with(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(leadpipe::cli::exit_code(&err))
        }
    }
}
