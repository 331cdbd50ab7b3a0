//! Opening the database: SQLite file by default, PostgreSQL in production.
//! Schema changes run on a dedicated one-connection pool before the app pool
//! opens, so no pooled SQLite connection caches a half-built schema.

mod pooling;

pub use pooling::{Pooler, Pooling};

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use domain::sealed::Keyring;
use domain::store::signals::signal_sqlite_commits;
use domain::store::{Signals, Store, WakeUps};
use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::pool::PoolOptions;
use sea_orm::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sea_orm::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sea_orm::{ConnectionTrait, DatabaseConnection, SqlxPostgresConnector, SqlxSqliteConnector};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else {
            anyhow::bail!("DATABASE_URL must start with sqlite: or postgres://")
        }
    }
}

fn sqlite_options(url: &str) -> anyhow::Result<SqliteConnectOptions> {
    Ok(SqliteConnectOptions::from_str(url)?
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true)
        // Erasure: a deleted or overwritten row is zeroed in its page, and a
        // freed page is zeroed, instead of staying readable in free space
        // until reused. The WAL still holds older page images until a
        // checkpoint: `Store::scrub_after_erasure` truncates it.
        .pragma("secure_delete", "on")
        // Memory, not speed: each pooled connection keeps its own page cache
        // and prepared statements (group commit prepares one per batch
        // size), and SQLite's defaults (2 MiB, 100) multiplied by the pool
        // were most of the server's resident memory. The OS caches the file.
        .pragma("cache_size", "-1024")
        .statement_cache_capacity(32))
}

/// The SQLite database file, if `url` names one on disk.
fn sqlite_file(url: &str) -> anyhow::Result<Option<std::path::PathBuf>> {
    if Backend::of(url)? != Backend::Sqlite || url.contains("mode=memory") {
        return Ok(None);
    }
    let path = SqliteConnectOptions::from_str(url)?
        .get_filename()
        .to_owned();
    Ok((path.as_os_str() != ":memory:" && !path.as_os_str().is_empty()).then_some(path))
}

/// The database holds sealed secrets, tokens' hashes and every lead: only
/// its owner may read it. A new file is created 0600 before SQLite opens it
/// (SQLite gives its `-wal` and `-shm` files the database's mode); an
/// existing one, and its companions, are set to 0600.
#[cfg(unix)]
fn restrict_sqlite_files(url: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let Some(path) = sqlite_file(url)? else {
        return Ok(());
    };
    if !path.exists() && url.contains("mode=rwc") {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(_) => {}
            // Another process created it meanwhile: fixed up below.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => anyhow::bail!("creating {}: {e}", path.display()),
        }
    }
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut file = path.clone().into_os_string();
        file.push(suffix);
        let file = std::path::PathBuf::from(file);
        if let Ok(meta) = std::fs::metadata(&file)
            && meta.permissions().mode() & 0o077 != 0
        {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| anyhow::anyhow!("restricting {}: {e}", file.display()))?;
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn restrict_sqlite_files(_url: &str) -> anyhow::Result<()> {
    Ok(())
}

/// Applies every pending migration on a one-connection pool, holding the
/// migration lock.
pub async fn migrate(url: &str) -> anyhow::Result<()> {
    migrate_behind(url, &Pooling::default()).await
}

/// [`migrate`] for a database reached as `pooling` says: behind a
/// transaction-mode pooler over its direct URL.
pub async fn migrate_behind(url: &str, pooling: &Pooling) -> anyhow::Result<()> {
    if Backend::of(url)? == Backend::Postgres && pooling.behind_transaction_pooler() {
        return match &pooling.direct_url {
            Some(direct) => migrate_here(direct).await,
            None => refuse_pending_migrations(url, pooling).await,
        };
    }
    migrate_here(url).await
}

/// Behind a transaction-mode pooler with no direct URL: the lock cannot be
/// held across the migrations' transactions, so nothing is applied; a
/// database already up to date is fine.
async fn refuse_pending_migrations(url: &str, pooling: &Pooling) -> anyhow::Result<()> {
    let db = open_pool(url, pooling, 1, None).await?;
    let pending = Migrator::get_pending_migrations(&db).await;
    db.close().await?;
    let pending = pending?.len();
    if pending > 0 {
        anyhow::bail!(
            "{pending} migration(s) pending, and behind a transaction-mode pooler (LEADPIPE_DB_POOLER=transaction) leadpipe migrates only over DATABASE_DIRECT_URL: set it to PostgreSQL itself, or run `leadpipe migrate` with DATABASE_URL pointing there"
        );
    }
    Ok(())
}

async fn migrate_here(url: &str) -> anyhow::Result<()> {
    // SQLite's lock is taken before the first connection: that connection
    // switches a fresh file to WAL, which needs the file to itself and fails
    // at once with "database is locked" when another process is connecting.
    refuse_missing_sqlite_directory(url)?;
    let file_lock = sqlite_migration_lock(url).await?;
    let db = open_pool(url, &Pooling::default(), 1, None).await?;
    let pg_lock = Backend::of(url)? == Backend::Postgres;
    if pg_lock {
        db.execute_unprepared(&format!("SELECT pg_advisory_lock({PG_MIGRATION_LOCK})"))
            .await?;
    }
    let applied = async {
        Migrator::up(&db, None).await?;
        anyhow::Ok(())
    }
    .await;
    if pg_lock {
        // Closing the pool ends the session, which releases it too.
        let _ = db
            .execute_unprepared(&format!("SELECT pg_advisory_unlock({PG_MIGRATION_LOCK})"))
            .await;
    }
    db.close().await?;
    drop(file_lock);
    applied
}

/// `pg_advisory_lock` key: "leadpipe" in ASCII, so it does not collide with
/// locks other applications may take on a shared server. One migrating
/// process at a time per database: processes that start together on a fresh
/// database (`serve` beside `token create`, several nodes after a release)
/// would otherwise all apply the same pending migration, and all but one
/// fail half-way ("duplicate column").
const PG_MIGRATION_LOCK: i64 = 0x6c65_6164_7069_7065;

/// The same turn-taking for a SQLite file: an exclusive lock on a file
/// beside it, released when the returned file is closed. `None` for
/// PostgreSQL and for an in-memory database (it belongs to one process).
async fn sqlite_migration_lock(url: &str) -> anyhow::Result<Option<std::fs::File>> {
    if Backend::of(url)? != Backend::Sqlite {
        return Ok(None);
    }
    let Some(path) = sqlite_file(url)? else {
        return Ok(None);
    };
    let mut lock_path = path.into_os_string();
    lock_path.push(".migrate-lock");
    let file = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&lock_path)?;
        // Blocks until the process migrating now is done.
        file.lock()?;
        Ok(file)
    })
    .await??;
    Ok(Some(file))
}

/// On SQLite one long-running process writes: `serve` (with its workers)
/// or `work` takes this for its life, and a second one refuses to start.
/// The in-process write turn ([`Store::begin_write`]) cannot reach another
/// process, so two would contend for the file's lock and answer "database
/// is locked". One-off commands (`token create`, `import`, …) do not take
/// it: SQLite's own lock and busy timeout take their writes in turn.
pub struct SqliteWriter {
    _file: std::fs::File,
}

/// Another process holds the SQLite writer lock; the command line exits
/// with code 4 (a conflict) for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the SQLite database {file} is already written by {holder}: on SQLite one `leadpipe serve` (its workers in it) or one `leadpipe work` writes. Stop that one first, or move to PostgreSQL to run several"
)]
pub struct WriterTaken {
    pub file: String,
    /// `process 1234 (`leadpipe serve`, since …)`, as the holder wrote it.
    pub holder: String,
}

/// Takes the writer lock of `url`'s SQLite file for `command`: an exclusive
/// lock on a file beside it, which names the holder and is released when
/// the process ends, however it ends. `None` for PostgreSQL and an
/// in-memory database.
pub fn sqlite_writer(url: &str, command: &str) -> anyhow::Result<Option<SqliteWriter>> {
    use std::io::{Read, Seek, Write};
    if Backend::of(url)? != Backend::Sqlite {
        return Ok(None);
    }
    let Some(path) = sqlite_file(url)? else {
        return Ok(None);
    };
    refuse_missing_sqlite_directory(url)?;
    let mut lock_path = path.clone().into_os_string();
    lock_path.push(".writer-lock");
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).read(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&lock_path).map_err(|e| {
        anyhow::anyhow!(
            "opening {}: {e}",
            std::path::Path::new(&lock_path).display()
        )
    })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let holder = if holder.is_empty() {
                "another leadpipe process".to_owned()
            } else {
                holder.to_owned()
            };
            return Err(WriterTaken {
                file: path.display().to_string(),
                holder,
            }
            .into());
        }
        Err(std::fs::TryLockError::Error(e)) => {
            anyhow::bail!(
                "locking {}: {e}",
                std::path::Path::new(&lock_path).display()
            )
        }
    }
    // Who holds it, for the next one's message.
    file.set_len(0)?;
    file.rewind()?;
    writeln!(
        file,
        "process {} (`leadpipe {command}`, since {})",
        std::process::id(),
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )?;
    Ok(Some(SqliteWriter { _file: file }))
}

/// The options every pool opens with. No idle reaper: in sqlx 0.9.0 a race
/// can wrap its idle count to `usize::MAX`, and the reaper then spins a
/// runtime thread at 100% CPU for good (transact-rs/sqlx#3645; a test
/// process hung on it). With no idle timeout and no lifetime it never
/// starts: connections stay open once opened, up to the pool's size, and a
/// broken one is found by the ping before each acquire.
fn pool_options<DB: sea_orm::sqlx::Database>(options: PoolOptions<DB>) -> PoolOptions<DB> {
    options.idle_timeout(None).max_lifetime(None)
}

/// A pool used from one thread only (a group committer's): a ping before a
/// connection is handed out only when it sat idle for a second or more.
/// sqlx's default pings before every acquire, a round trip per transaction
/// (PostgreSQL intake gained about a tenth without it); a busy connection
/// was proven alive by the ping sqlx sends on its release, and one that
/// broke while idle (a database restart) is still found and replaced. Not
/// for the shared pools: a connection another runtime opened dies with that
/// runtime (the demo's workers stop while its reconciles run), and only the
/// ping on every acquire catches that at once.
fn ping_when_idle<DB: sea_orm::sqlx::Database>(options: PoolOptions<DB>) -> PoolOptions<DB> {
    options
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_WHEN_IDLE_FOR {
                    sea_orm::sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// How long a committer's connection may sit idle and still be handed out
/// without a ping.
const PING_WHEN_IDLE_FOR: Duration = Duration::from_secs(1);

/// Opens the application's store, migrating first when asked: its pool,
/// with tombstone keys hashed under `keyring`.
pub async fn open(
    url: &str,
    max_connections: u32,
    run_migrations: bool,
    keyring: &Keyring,
) -> anyhow::Result<Store> {
    open_behind(
        url,
        &Pooling::default(),
        max_connections,
        run_migrations,
        keyring,
    )
    .await
}

/// [`open`] for a database reached as `pooling` says.
pub async fn open_behind(
    url: &str,
    pooling: &Pooling,
    max_connections: u32,
    run_migrations: bool,
    keyring: &Keyring,
) -> anyhow::Result<Store> {
    if run_migrations {
        migrate_behind(url, pooling).await?;
    }
    let signals = Signals::new();
    let db = open_pool(url, pooling, max_connections, Some(signals.clone())).await?;
    let store = Store::new(db, keyring, signals);
    if Backend::of(url)? != Backend::Postgres || !pooling.behind_transaction_pooler() {
        return Ok(store);
    }
    Ok(store.behind_transaction_pooler(wake_ups_past_the_pooler(pooling)?))
}

/// Behind a transaction-mode pooler the workers listen for wake-ups on one
/// lazily opened connection to PostgreSQL itself, or nowhere without one.
fn wake_ups_past_the_pooler(pooling: &Pooling) -> anyhow::Result<WakeUps> {
    let Some(direct) = &pooling.direct_url else {
        return Ok(WakeUps::Polling);
    };
    let pool = pool_options(PgPoolOptions::new())
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(PgConnectOptions::from_str(direct)?);
    Ok(WakeUps::Direct(pool))
}

/// `store` on a pool of its own of `max_connections` on `url` (the
/// database `store` opened): the same write turn, signals and keys, and on
/// PostgreSQL the same connect options (a pooler's among them).
pub async fn another_pool(store: &Store, url: &str, max_connections: u32) -> anyhow::Result<Store> {
    if let Some(pool) = store.postgres_pool() {
        let pool = pool_options(PgPoolOptions::new())
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with((*pool.connect_options()).clone())
            .await?;
        return Ok(store.with_pool(SqlxPostgresConnector::from_sqlx_postgres_pool(pool)));
    }
    let signals = Some(store.signals().clone());
    Ok(store.with_pool(open_pool(url, &Pooling::default(), max_connections, signals).await?))
}

/// `store` on a PostgreSQL pool of its own of `max_connections`, opened
/// lazily: each connection is opened by the first task that needs it and
/// belongs to that task's runtime. Work that outlives the HTTP workers (an
/// import draining after the server stopped) uses one made on the main
/// runtime: a connection an HTTP worker opened fails once that worker's
/// runtime shuts down. SQLite's connections run on threads of their own and
/// belong to no runtime, so there it is `store` itself.
pub fn lazy_pool_of_its_own(store: &Store, max_connections: u32) -> Store {
    let Some(pool) = store.postgres_pool() else {
        return store.clone();
    };
    let options = (*pool.connect_options()).clone();
    let pool = pool_options(PgPoolOptions::new())
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(options);
    store.with_pool(SqlxPostgresConnector::from_sqlx_postgres_pool(pool))
}

/// A pool on `url`; on SQLite, a commit of each of its connections that
/// stored work bumps `signals`.
async fn open_pool(
    url: &str,
    pooling: &Pooling,
    max_connections: u32,
    signals: Option<Arc<Signals>>,
) -> anyhow::Result<DatabaseConnection> {
    let acquire = Duration::from_secs(10);
    Ok(match Backend::of(url)? {
        Backend::Sqlite => {
            refuse_missing_sqlite_directory(url)?;
            restrict_sqlite_files(url)?;
            let options = sqlite_options(url)?;
            let mut pool = pool_options(SqlitePoolOptions::new())
                .max_connections(max_connections)
                .acquire_timeout(acquire);
            if let Some(signals) = signals {
                // A commit that stored work wakes this process's workers.
                pool = pool.after_connect(move |conn, _| {
                    let signals = signals.clone();
                    Box::pin(async move { signal_sqlite_commits(conn, signals).await })
                });
            }
            let target =
                sqlite_file(url)?.map_or_else(|| url.to_owned(), |path| path.display().to_string());
            let pool = pool
                .connect_with(options)
                .await
                .map_err(|err| Unreachable::new(target, err.to_string()))?;
            // Companion files that existed before with a wider mode.
            restrict_sqlite_files(url)?;
            SqlxSqliteConnector::from_sqlx_sqlite_pool(pool)
        }
        Backend::Postgres => {
            let options = postgres_options(url, pooling)?;
            // One connection first, to say at once why none opens: the
            // pool retries a refused connection until its acquire timeout
            // and then reports only that it timed out.
            check_postgres(&options, FIRST_CONNECTION_WITHIN).await?;
            let pool = pool_options(PgPoolOptions::new())
                .max_connections(max_connections)
                .acquire_timeout(acquire)
                .connect_with(options)
                .await?;
            SqlxPostgresConnector::from_sqlx_postgres_pool(pool)
        }
    })
}

/// `url`'s options; behind a transaction-mode pooler with the statement
/// cache off, so every statement is prepared unnamed (sqlx ≥ 0.9.1) and
/// none outlives its transaction.
fn postgres_options(url: &str, pooling: &Pooling) -> anyhow::Result<PgConnectOptions> {
    let options = PgConnectOptions::from_str(url)?;
    Ok(if pooling.behind_transaction_pooler() {
        options.statement_cache_capacity(0)
    } else {
        options
    })
}

/// How long opening a store waits for its first PostgreSQL connection
/// before it reports the database unreachable.
const FIRST_CONNECTION_WITHIN: Duration = Duration::from_secs(2);

/// The database could not be reached: where it was tried (never with the
/// password) and why. The command line exits with code 5 for it; `/readyz`
/// answers 503 with it.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach the database {target} (DATABASE_URL): {cause}")]
pub struct Unreachable {
    /// `user@host:port/database`, or the SQLite file.
    pub target: String,
    /// Connection refused, unknown host, authentication failed, …
    pub cause: String,
}

impl Unreachable {
    fn new(target: impl Into<String>, cause: impl Into<String>) -> Self {
        Self {
            target: target.into(),
            cause: cause.into(),
        }
    }
}

/// `user@host:port/database`: what a PostgreSQL URL names, without its
/// password.
fn postgres_target(options: &PgConnectOptions) -> String {
    format!(
        "{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or(options.get_username())
    )
}

/// Opens one connection with `options` within `within`, and closes it; else
/// says why none opened: the host does not resolve, the connection is
/// refused, the login is refused, or no answer came in time.
pub async fn check_postgres(
    options: &PgConnectOptions,
    within: Duration,
) -> Result<(), Unreachable> {
    let target = postgres_target(options);
    let deadline = tokio::time::Instant::now() + within;
    let host = options.get_host();
    // A host that is a socket directory is not looked up.
    if !host.starts_with('/') {
        match tokio::time::timeout_at(
            deadline,
            tokio::net::lookup_host((host, options.get_port())),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => {
                return Err(Unreachable::new(
                    target,
                    format!("unknown host {host} ({err})"),
                ));
            }
            Err(_) => return Err(Unreachable::new(target, no_answer(within))),
        }
    }
    let connected =
        tokio::time::timeout_at(deadline, sea_orm::sqlx::ConnectOptions::connect(options)).await;
    match connected {
        Ok(Ok(conn)) => {
            let _ = sea_orm::sqlx::Connection::close(conn).await;
            Ok(())
        }
        Ok(Err(err)) => Err(Unreachable::new(target, connect_cause(&err))),
        Err(_) => Err(Unreachable::new(target, no_answer(within))),
    }
}

fn no_answer(within: Duration) -> String {
    format!("no answer within {} s", within.as_secs_f64())
}

/// Why a connection did not open, in words an operator acts on.
fn connect_cause(err: &sea_orm::sqlx::Error) -> String {
    use sea_orm::sqlx::Error;
    use std::io::ErrorKind;
    match err {
        Error::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused => "connection refused (is PostgreSQL running and \
                                             listening on that address?)"
                .to_owned(),
            ErrorKind::TimedOut => "the connection timed out".to_owned(),
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
                "the server closed the connection".to_owned()
            }
            ErrorKind::NotFound => format!("no such socket ({io})"),
            _ => io.to_string(),
        },
        Error::Database(db) => match db.code().as_deref() {
            // invalid_password, invalid_authorization_specification
            Some("28P01" | "28000") => format!("authentication failed: {}", db.message()),
            _ => db.message().to_owned(),
        },
        Error::Tls(tls) => format!("TLS failed: {tls}"),
        other => other.to_string(),
    }
}

/// Whether the store's database answers now, within two seconds: a ping
/// on the pool, and when that fails, one fresh connection to say why.
pub async fn check_reachable(store: &Store) -> Result<(), Unreachable> {
    let half = FIRST_CONNECTION_WITHIN / 2;
    let pinged = tokio::time::timeout(half, store.ping()).await;
    let failure = match pinged {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(err)) => err.to_string(),
        Err(_) => no_answer(half),
    };
    match store.postgres_pool() {
        Some(pool) => {
            check_postgres(&pool.connect_options(), half).await?;
            // The server answers a new connection: it is up, and the pool
            // is busy (every connection in use) rather than cut off.
            tracing::warn!(
                cause = %failure,
                "readiness: the pool gave no connection in time, but the database answers"
            );
            Ok(())
        }
        None => Err(Unreachable::new("(SQLite)", failure)),
    }
}

/// A SQLite file whose directory does not exist, named with its path
/// (SQLite itself says only "unable to open database file").
fn refuse_missing_sqlite_directory(url: &str) -> anyhow::Result<()> {
    let Some(path) = sqlite_file(url)? else {
        return Ok(());
    };
    let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) else {
        return Ok(());
    };
    if !dir.is_dir() {
        return Err(Unreachable::new(
            path.display().to_string(),
            format!("its directory {} does not exist", dir.display()),
        )
        .into());
    }
    Ok(())
}

/// Copies the SQLite database at `url` to a new file `target` (0600) while
/// the service keeps writing: `VACUUM INTO` reads one consistent snapshot
/// (WAL readers do not block writers) and writes a compact database that
/// opens on its own, without a `-wal` file. Refuses PostgreSQL, whose tool
/// is `pg_dump`. Returns the copy's size in bytes.
pub async fn backup(url: &str, target: &std::path::Path) -> anyhow::Result<u64> {
    if Backend::of(url)? == Backend::Postgres {
        anyhow::bail!(
            "leadpipe backup copies SQLite databases; back PostgreSQL up with pg_dump, e.g. \
             pg_dump --format=custom --file=leadpipe.dump \"$DATABASE_URL\" \
             (restore with pg_restore --clean --dbname=…)"
        );
    }
    let Some(source) = sqlite_file(url)? else {
        anyhow::bail!("leadpipe backup needs a database file, not an in-memory database");
    };
    if !source.exists() {
        anyhow::bail!("no database at {}", source.display());
    }
    let target = target.to_path_buf();
    // Created here, empty and 0600, so the copy of every lead and secret is
    // never readable by others, not even for a moment; VACUUM INTO accepts
    // an empty file. `create_new` refuses to overwrite an earlier backup.
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(&target)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", target.display()))?;
    let copied = async {
        let db = open_pool(url, &Pooling::default(), 1, None).await?;
        let path = target
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("the backup path must be valid UTF-8"))?;
        domain::store::sqlite::vacuum_into(&db, path).await?;
        db.close().await?;
        anyhow::Ok(std::fs::metadata(&target)?.len())
    }
    .await;
    if copied.is_err() {
        let _ = std::fs::remove_file(&target);
    }
    copied
}

/// The store on a second pool on the same PostgreSQL database (None on
/// SQLite), of `max_connections`, connecting lazily: each connection opens
/// in the task that first needs it, so its socket belongs to that thread's
/// runtime and its replies wake no other thread.
pub fn thread_local_pool(store: &Store, max_connections: u32) -> Option<Store> {
    let options = store.postgres_pool()?.connect_options();
    let pool = ping_when_idle(pool_options(PgPoolOptions::new()))
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(PgConnectOptions::clone(&options));
    Some(store.with_pool(SqlxPostgresConnector::from_sqlx_postgres_pool(pool)))
}

/// A pool on a PostgreSQL read replica. It connects lazily, so a replica
/// that is down at start does not keep the service from starting, and waits
/// at most two seconds for a connection, so a stopped one fails fast.
pub fn open_read_replica(url: &str, max_connections: u32) -> anyhow::Result<DatabaseConnection> {
    if Backend::of(url)? != Backend::Postgres {
        anyhow::bail!(
            "DATABASE_READ_URL must be a postgres:// URL: read replicas are a PostgreSQL feature"
        );
    }
    let options = PgConnectOptions::from_str(url)?
        // A write sent here by mistake fails loudly instead of silently
        // going to a server that would refuse it anyway.
        .options([("default_transaction_read_only", "on")]);
    let pool = pool_options(PgPoolOptions::new())
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options);
    Ok(SqlxPostgresConnector::from_sqlx_postgres_pool(pool))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pools the service opens never start sqlx's idle reaper (see
    /// `pool_options`): no idle timeout, no lifetime.
    #[tokio::test]
    async fn pools_open_without_the_idle_reaper() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let db = open_pool(&url, &Pooling::default(), 2, None)
            .await
            .expect("sqlite pool");
        let options = db.get_sqlite_connection_pool().options();
        assert_eq!(
            (
                options.get_idle_timeout(),
                options.get_max_lifetime(),
                options.get_test_before_acquire()
            ),
            (None, None, true)
        );
        let replica = open_read_replica("postgres://u@127.0.0.1:1/db", 2).expect("lazy pool");
        let options = replica.get_postgres_connection_pool().options();
        assert_eq!(
            (options.get_idle_timeout(), options.get_max_lifetime()),
            (None, None)
        );
    }
}
