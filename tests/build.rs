//! `LEADPIPE_TEST_BACKENDS=sqlite` (no `postgres` in it) compiles the
//! PostgreSQL variants of the end-to-end tests as ignored, so a run that
//! skips them says so (`ignored`) instead of reporting them `ok`.

fn main() {
    println!("cargo::rerun-if-env-changed=LEADPIPE_TEST_BACKENDS");
    println!("cargo::rustc-check-cfg=cfg(postgres_tests_skipped)");
    if std::env::var("LEADPIPE_TEST_BACKENDS").is_ok_and(|b| !b.contains("postgres")) {
        println!("cargo::rustc-cfg=postgres_tests_skipped");
    }
}
