//! Test harness: the real application on a random port, against a fresh
//! SQLite file or a fresh PostgreSQL database per test.
//!
//! PostgreSQL comes from `LEADPIPE_TEST_PG_URL` (an admin URL; `scripts/test`
//! starts a throwaway cluster and sets it). `LEADPIPE_TEST_BACKENDS=sqlite`
//! compiles the PostgreSQL variants as ignored for quick local runs
//! (`tests/build.rs`); CI never sets it.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

pub mod captured;
pub mod cli;
pub mod client;
pub mod poison;
pub mod prometheus;
pub mod publishing;
pub mod raw_http;
pub mod receiver;
pub mod reconcile;
pub mod runs;
pub mod webhooks;

use std::path::PathBuf;

use api::config::HttpSettings;
use api::startup::Application;
use domain::auth::Role;
use domain::sealed::Keyring;
use domain::store::Store;
use sea_orm::{ConnectionTrait, EntityTrait, PaginatorTrait, Statement};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Generates `name::sqlite` and `name::postgres` tests from `async fn name(Backend)`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::Backend::Sqlite).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(postgres_tests_skipped, ignore = "LEADPIPE_TEST_BACKENDS excludes postgres")]
            async fn postgres() {
                super::$name($crate::Backend::Postgres).await
            }
        }
    )*};
}

/// Whether this build skips PostgreSQL (`LEADPIPE_TEST_BACKENDS` without
/// `postgres` when it was compiled, see `tests/build.rs`). Tests mark their
/// PostgreSQL variants
/// `#[cfg_attr(postgres_tests_skipped, ignore = "LEADPIPE_TEST_BACKENDS excludes postgres")]`
/// so that a skipped run is reported as ignored; this is for a test that
/// covers both backends in one function.
pub fn postgres_skipped() -> bool {
    cfg!(postgres_tests_skipped)
}

pub struct TestApp {
    pub address: String,
    /// `http://127.0.0.1:PORT` of the metrics listener, when `metrics_bind` is set.
    pub metrics_address: Option<String>,
    pub db: Store,
    pub database_url: String,
    pub client: reqwest::Client,
    pub backend: Backend,
    workers: Option<webhooks::RunningWorkers>,
    _dir: Option<TempDir>,
}

/// Removes a test's SQLite files when the test ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, HttpSettings::for_tests()).await
    }

    pub async fn spawn_with(backend: Backend, http: HttpSettings) -> Self {
        if std::env::var("TEST_LOG").is_ok() {
            api::telemetry::init(Default::default());
        }
        let (database_url, dir) = match backend {
            Backend::Sqlite => {
                let dir =
                    std::env::temp_dir().join(format!("leadpipe-test-{}", uuid::Uuid::new_v4()));
                std::fs::create_dir_all(&dir).unwrap();
                (
                    format!("sqlite://{}?mode=rwc", dir.join("test.db").display()),
                    Some(TempDir(dir)),
                )
            }
            Backend::Postgres => (fresh_postgres_database().await, None),
        };
        Self::spawn_at(backend, database_url, dir, http).await
    }

    /// Another app on an existing PostgreSQL database: several apps may
    /// share one, as several nodes do.
    pub async fn spawn_on_postgres(database_url: String, http: HttpSettings) -> Self {
        Self::spawn_at(Backend::Postgres, database_url, None, http).await
    }

    async fn spawn_at(
        backend: Backend,
        database_url: String,
        dir: Option<TempDir>,
        http: HttpSettings,
    ) -> Self {
        let db = api::storage::open(&database_url, 10, true, &http.keyring)
            .await
            .unwrap();
        let app = Application::build(db.clone(), http).unwrap();
        let address = format!("http://127.0.0.1:{}", app.port());
        let metrics_address = app
            .metrics_port()
            .map(|port| format!("http://127.0.0.1:{port}"));
        tokio::spawn(app.run_until_stopped());
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Self {
            address,
            metrics_address,
            db,
            database_url,
            client,
            backend,
            workers: None,
            _dir: dir,
        }
    }

    /// The app with the real worker runtime (its apalis workers) running
    /// in-process, with test-fast settings.
    pub async fn spawn_with_workers(backend: Backend) -> Self {
        let mut app = Self::spawn(backend).await;
        app.start_workers(workers::WorkerSettings::for_tests());
        app
    }

    /// Starts the worker runtime on this app's database; it stops when the
    /// app is dropped or on `stop_workers`.
    pub fn start_workers(&mut self, settings: workers::WorkerSettings) {
        assert!(self.workers.is_none(), "workers already running");
        self.workers = Some(webhooks::RunningWorkers::start(self.db.clone(), settings));
    }

    /// The running workers, to stop from another task.
    pub fn take_workers(&mut self) -> Option<webhooks::RunningWorkers> {
        self.workers.take()
    }

    pub async fn stop_workers(&mut self) {
        if let Some(running) = self.workers.take() {
            running.stop().await;
        }
    }

    /// A store on this app's database as another process would open it:
    /// its own pool, write turn and wake-up signals (PostgreSQL tells the
    /// app's workers only by `NOTIFY`).
    pub async fn another_process(&self) -> Store {
        let db = sea_orm::Database::connect(&self.database_url)
            .await
            .unwrap();
        Store::new(db, &Keyring::for_tests(), domain::store::Signals::new())
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// A new principal's bearer token.
    pub async fn token(&self, role: Role, source: Option<&str>) -> String {
        let name = format!("{}-{}", role, uuid::Uuid::new_v4().simple());
        domain::auth::create_principal(&self.db, &name, role, source)
            .await
            .unwrap()
            .token
    }

    pub async fn post_lead(&self, token: &str, body: &Value) -> reqwest::Response {
        self.post_json(token, "/api/leads", body).await
    }

    /// `POST path` with a JSON `body`, as `token`.
    pub async fn post_json(&self, token: &str, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn get(&self, token: &str, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    }

    /// The Prometheus text of `GET /metrics`: from the metrics listener when
    /// there is one, else from the public one with a new ops token.
    pub async fn metrics(&self) -> String {
        let response = match &self.metrics_address {
            Some(address) => self
                .client
                .get(format!("{address}/metrics"))
                .send()
                .await
                .unwrap(),
            None => {
                let ops = self.token(Role::Ops, None).await;
                self.get(&ops, "/metrics").await
            }
        };
        assert_eq!(response.status(), 200, "GET /metrics");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        response.text().await.unwrap()
    }

    pub async fn count<E: EntityTrait>(&self, _entity: E) -> u64
    where
        E::Model: Sync,
    {
        E::find().count(&self.db).await.unwrap()
    }

    /// The lead with this `source_ref` (any source); panics if none.
    pub async fn lead_by_ref(&self, source_ref: &str) -> domain::entities::lead::Model {
        self.find_lead_by_ref(source_ref)
            .await
            .unwrap_or_else(|| panic!("no lead with source_ref {source_ref}"))
    }

    /// The lead with this `source_ref` (any source), if there is one.
    pub async fn find_lead_by_ref(
        &self,
        source_ref: &str,
    ) -> Option<domain::entities::lead::Model> {
        use domain::entities::lead;
        use sea_orm::{ColumnTrait, QueryFilter};
        lead::Entity::find()
            .filter(lead::Column::SourceRef.eq(source_ref))
            .one(&self.db)
            .await
            .unwrap()
    }

    /// Posts a `webform` lead `{source_ref}@example.com` for each ref as
    /// intake; each must be `201`.
    pub async fn post_leads(&self, refs: impl IntoIterator<Item = String>) {
        let intake = self.token(Role::Intake, Some("webform")).await;
        for source_ref in refs {
            let response = self
                .post_lead(
                    &intake,
                    &serde_json::json!({"source": "webform", "source_ref": source_ref, "email": format!("{source_ref}@example.com")}),
                )
                .await;
            assert_eq!(response.status(), 201, "POST /api/leads {source_ref}");
        }
    }

    /// Starts a reconcile run of `source` (`POST /api/ops/reconcile/{source}`,
    /// must be `202`) and returns its row once it has ended (at most 30 s).
    pub async fn reconcile(
        &self,
        token: &str,
        source: &str,
        body: Value,
    ) -> domain::entities::reconcile_run::Model {
        use domain::entities::reconcile_run;
        let response = self
            .client
            .post(self.url(&format!("/api/ops/reconcile/{source}")))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
        let id = response.json::<Value>().await.unwrap()["id"]
            .as_i64()
            .unwrap();
        eventually(
            "the reconcile run to end",
            std::time::Duration::from_secs(30),
            || async {
                let run = reconcile_run::Entity::find_by_id(id)
                    .one(&self.db)
                    .await
                    .unwrap()?;
                (run.state != "running").then_some(run)
            },
        )
        .await
    }

    /// Runs raw SQL written for both backends (no placeholders).
    pub async fn exec(&self, sql: &str) {
        self.db
            .execute_raw(Statement::from_string(self.db.get_database_backend(), sql))
            .await
            .unwrap();
    }

    /// The first column of the one row raw SQL (no placeholders) returns,
    /// as an integer: a count.
    pub async fn scalar(&self, sql: &str) -> i64 {
        self.db
            .query_one_raw(Statement::from_string(self.db.get_database_backend(), sql))
            .await
            .unwrap()
            .unwrap()
            .try_get_by_index::<i64>(0)
            .unwrap()
    }
}

/// What a condition given to [`eventually`] answers: `bool` (holds or not
/// yet), `Option<T>` (`Some` with the value it waited for), or
/// `Result<T, String>` (`Err` says what it saw instead, for the failure
/// message).
pub trait Outcome {
    type Value;
    /// The value waited for, or what was seen instead (if anything).
    fn into_result(self) -> Result<Self::Value, Option<String>>;
}

impl Outcome for bool {
    type Value = ();
    fn into_result(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;
    fn into_result(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T> Outcome for Result<T, String> {
    type Value = T;
    fn into_result(self) -> Result<T, Option<String>> {
        self.map_err(Some)
    }
}

/// Polls `check` every 25 ms until it holds (`true`, `Some`, `Ok`) and
/// returns what it found; once `limit` has passed, panics naming `what` and
/// the last thing `check` saw instead. The way a test waits for something
/// to happen, rather than sleeping for a guessed time.
pub async fn eventually<C: Outcome>(
    what: &str,
    limit: std::time::Duration,
    mut check: impl AsyncFnMut() -> C,
) -> C::Value {
    let started = tokio::time::Instant::now();
    loop {
        let seen = match check().await.into_result() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if started.elapsed() >= limit {
            match seen {
                Some(seen) => {
                    panic!("timed out after {limit:?} waiting for {what}; last seen: {seen}")
                }
                None => panic!("timed out after {limit:?} waiting for {what}"),
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

pub async fn fresh_postgres_database() -> String {
    let admin = std::env::var("LEADPIPE_TEST_PG_URL").expect(
        "LEADPIPE_TEST_PG_URL is not set: run the tests with scripts/test, which starts a \
         throwaway PostgreSQL, or set LEADPIPE_TEST_BACKENDS=sqlite to skip PostgreSQL",
    );
    let name = format!("lp_{}", uuid::Uuid::new_v4().simple());
    let conn = sea_orm::Database::connect(&admin).await.unwrap();
    conn.execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    conn.close().await.unwrap();
    let base = admin
        .rsplit_once('/')
        .map(|(base, _)| base)
        .unwrap_or(&admin);
    format!("{base}/{name}")
}

/// The URL of the database `primary_url` names on the streaming standby
/// `scripts/test` starts next to the throwaway PostgreSQL.
pub fn replica_url(primary_url: &str) -> String {
    let replica = std::env::var("LEADPIPE_TEST_PG_REPLICA_URL").expect(
        "LEADPIPE_TEST_PG_REPLICA_URL is not set: run the tests with scripts/test, which starts \
         a streaming standby next to the throwaway PostgreSQL",
    );
    let (base, _) = replica.rsplit_once('/').unwrap();
    let (_, name) = primary_url.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// Asserts an RFC 9457 problem response and returns its body.
pub async fn assert_problem(response: reqwest::Response, status: u16, problem_type: &str) -> Value {
    assert_eq!(response.status().as_u16(), status, "unexpected status");
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(content_type, "application/problem+json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], problem_type, "problem type in {body}");
    assert_eq!(body["status"], status);
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    body
}
