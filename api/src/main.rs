fn main() -> std::process::ExitCode {
    leadpipe::cli::main()
}
