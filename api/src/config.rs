//! Configuration by flags and `LEADPIPE_*` environment variables.

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct DbSettings {
    /// Where leads live: `sqlite://FILE?mode=rwc` or `postgres://…`.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://leadpipe.db?mode=rwc",
        global = true
    )]
    pub database_url: String,
    /// Size of the connection pool.
    #[arg(
        long,
        env = "LEADPIPE_DB_MAX_CONNECTIONS",
        default_value_t = 16,
        global = true
    )]
    pub db_max_connections: u32,
}

#[derive(Debug, Clone, Args)]
pub struct HttpSettings {
    /// Address the HTTP server listens on.
    #[arg(long, env = "LEADPIPE_BIND", default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// Largest request body accepted, in bytes (larger: 413).
    #[arg(long, env = "LEADPIPE_MAX_BODY_BYTES", default_value_t = 256 * 1024)]
    pub max_body_bytes: usize,
}

impl HttpSettings {
    pub fn for_tests() -> Self {
        Self {
            bind: "127.0.0.1:0".into(),
            max_body_bytes: 256 * 1024,
        }
    }
}
