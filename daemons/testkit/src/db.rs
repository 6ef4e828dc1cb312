//! A fresh database per test and backend. SQLite always (a file in a temporary
//! directory); PostgreSQL too when `ARCHIVIST_TEST_PG` names a server (a role with
//! CREATEDB, e.g. `scripts/pg.sh url`): each test gets a database of its own there, so
//! the same tests prove both backends. `scripts/test.sh` starts `scripts/pg.sh` and sets
//! the variable, so CI runs both.

use std::path::PathBuf;
use std::time::Duration;

pub use archivist_db::{Backend, Database};

/// The variable naming the PostgreSQL server for tests.
pub const TEST_PG_VAR: &str = "ARCHIVIST_TEST_PG";

/// Test databases older than this were left by runs that died, and are dropped.
const STALE: Duration = Duration::from_secs(3600);

/// The backends tests run against: SQLite, and PostgreSQL when [`TEST_PG_VAR`] is set.
pub fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::Sqlite];
    if pg_admin_url().is_some() {
        all.push(Backend::Postgres);
    }
    all
}

fn pg_admin_url() -> Option<String> {
    std::env::var(TEST_PG_VAR)
        .ok()
        .filter(|u| !u.trim().is_empty())
}

/// The directory holding test SQLite files (pruned of old ones once per process).
fn sqlite_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("archivist-test-db");
    static PRUNED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    PRUNED.get_or_init(|| {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE);
            if old {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
    dir
}

/// The URL of a new, empty database on `backend` for the test `name`.
///
/// # Panics
/// If PostgreSQL is asked for without [`TEST_PG_VAR`], or the database cannot be made.
pub async fn fresh_database_url(backend: Backend, name: &str) -> String {
    match backend {
        Backend::Sqlite => {
            let dir = sqlite_dir().join(format!(
                "{name}-{}-{:08x}",
                std::process::id(),
                rand::random::<u32>()
            ));
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
            format!("sqlite://{}", dir.join("archivist.db").display())
        }
        Backend::Postgres => {
            let admin = pg_admin_url()
                .unwrap_or_else(|| panic!("{TEST_PG_VAR} is not set: no PostgreSQL for tests"));
            archivist_db::provision::create_test_database(&admin, STALE)
                .await
                .unwrap_or_else(|e| panic!("a test database on {TEST_PG_VAR}: {e}"))
        }
    }
}

/// A new, migrated database on `backend` for the test `name`.
///
/// # Panics
/// If it cannot be made or opened.
pub async fn fresh_database(backend: Backend, name: &str) -> Database {
    let url = fresh_database_url(backend, name).await;
    Database::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("opening the test database: {e}"))
}

/// A new, migrated database on each of [`backends`].
pub async fn fresh_databases(name: &str) -> Vec<Database> {
    let mut all = Vec::new();
    for backend in backends() {
        all.push(fresh_database(backend, name).await);
    }
    all
}

/// For each of [`backends`]: a fresh ZooKeeper chroot (as [`crate::fresh_tree`]) and a
/// fresh database, so a test of a daemon that uses both runs once per backend.
pub async fn fresh_stores(
    name: &str,
) -> Vec<(
    archivist_engine::ZkConfig,
    archivist_engine::Session,
    Database,
)> {
    let mut all = Vec::new();
    for db in fresh_databases(name).await {
        let (config, session) = crate::fresh_tree(name).await;
        all.push((config, session, db));
    }
    all
}
