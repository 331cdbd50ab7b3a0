//! Two processes that start on one fresh database at once (`leadpipe serve`
//! beside a `leadpipe token create`, or several nodes after a release) both
//! find every migration pending. They must take turns: each one succeeds and
//! every migration is applied exactly once.

#![allow(clippy::unwrap_used)]

use leadpipe_tests::{Backend, fresh_postgres_database, on_both_backends};
use migration::MigratorTrait;
use sea_orm::{ConnectionTrait, Statement};

on_both_backends!(concurrent_migrations_on_a_fresh_database_both_succeed);

async fn concurrent_migrations_on_a_fresh_database_both_succeed(backend: Backend) {
    let dir = std::env::temp_dir().join(format!("leadpipe-migrate-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    // Several rounds: a round that happens not to interleave proves little.
    for round in 0..4 {
        let url = match backend {
            Backend::Sqlite => format!(
                "sqlite://{}?mode=rwc",
                dir.join(format!("{round}.db")).display()
            ),
            Backend::Postgres => fresh_postgres_database().await,
        };
        let (a, b, c) = tokio::join!(
            api::storage::migrate(&url),
            api::storage::migrate(&url),
            api::storage::migrate(&url)
        );
        for (name, result) in [("first", a), ("second", b), ("third", c)] {
            assert!(
                result.is_ok(),
                "round {round}: the {name} migration failed: {result:?}"
            );
        }
        let db = api::storage::open(&url, 1, false, &domain::sealed::Keyring::for_tests())
            .await
            .unwrap();
        let applied = db
            .query_one_raw(Statement::from_string(
                db.get_database_backend(),
                "SELECT COUNT(*) AS n, COUNT(DISTINCT version) AS d FROM seaql_migrations",
            ))
            .await
            .unwrap()
            .unwrap();
        let n: i64 = applied.try_get("", "n").unwrap();
        let distinct: i64 = applied.try_get("", "d").unwrap();
        assert_eq!(n, distinct, "a migration was recorded twice");
        assert_eq!(n as usize, migration::Migrator::migrations().len());
        db.close().await.unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
