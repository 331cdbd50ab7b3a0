//! A transaction-mode pooler between leadpipe and PostgreSQL (PgBouncer,
//! RDS Proxy, Supavisor) hands each transaction to any of its server
//! connections. What outlives a transaction breaks there: named prepared
//! statements (another client's "sqlx_s_1" already exists), session
//! advisory locks (unlocked on another server connection, or never) and
//! `LISTEN` (its notifications go to whichever client holds the server
//! connection next). So behind one, statements are unnamed, and the
//! migration lock and `LISTEN` use `DATABASE_DIRECT_URL`.

/// What sits between leadpipe and PostgreSQL (`LEADPIPE_DB_POOLER`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Pooler {
    /// PostgreSQL itself, or a session-mode pooler.
    #[default]
    None,
    /// A transaction-mode pooler.
    Transaction,
}

/// How this process reaches PostgreSQL.
#[derive(Debug, Clone, Default)]
pub struct Pooling {
    pub pooler: Pooler,
    /// PostgreSQL past the pooler (`DATABASE_DIRECT_URL`), for sessions.
    pub direct_url: Option<String>,
}

impl Pooling {
    pub fn behind_transaction_pooler(&self) -> bool {
        self.pooler == Pooler::Transaction
    }
}
