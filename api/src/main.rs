use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    leadpipe::telemetry::init();
    match leadpipe::cli::run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
