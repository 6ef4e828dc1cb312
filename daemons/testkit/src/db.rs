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

/// The URL of a new, empty SQLite file for the test `name`.
pub fn fresh_sqlite_url(name: &str) -> String {
    let dir = sqlite_dir().join(format!(
        "{name}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    format!("sqlite://{}", dir.join("archivist.db").display())
}

/// The variable choosing the backend of the database a test gives the `archivist`
/// binary it runs (`postgres`: a fresh database on [`TEST_PG_VAR`]'s server; anything
/// else: SQLite), so the end-to-end tests (chaos, pipeline) run on either.
pub const BINARY_BACKEND_VAR: &str = "ARCHIVIST_TEST_DB_BACKEND";

/// The backend [`BINARY_BACKEND_VAR`] chooses.
pub fn binary_backend() -> Backend {
    match std::env::var(BINARY_BACKEND_VAR).as_deref() {
        Ok("postgres") => Backend::Postgres,
        _ => Backend::Sqlite,
    }
}

/// A fresh database URL on [`binary_backend`], from code that cannot await (made on a
/// thread with a runtime of its own, so it works inside a test's runtime too).
pub fn fresh_binary_database_url(name: &str) -> String {
    match binary_backend() {
        Backend::Sqlite => fresh_sqlite_url(name),
        Backend::Postgres => {
            let name = name.to_string();
            crate::block_on_thread(
                async move { fresh_database_url(Backend::Postgres, &name).await },
            )
        }
    }
}

/// The URL of a new, empty database on `backend` for the test `name`.
///
/// # Panics
/// If PostgreSQL is asked for without [`TEST_PG_VAR`], or the database cannot be made.
pub async fn fresh_database_url(backend: Backend, name: &str) -> String {
    match backend {
        Backend::Sqlite => fresh_sqlite_url(name),
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

/// The database URL each test tree (chroot) uses, so the daemons a test runs in-process
/// (recorder, planner, researcher...) and the test's own checks share one archive.
fn tree_urls() -> &'static std::sync::Mutex<std::collections::HashMap<String, String>> {
    static BY_TREE: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, String>>,
    > = std::sync::OnceLock::new();
    BY_TREE.get_or_init(Default::default)
}

/// The URL of the database belonging to the test tree `chroot`: the one
/// [`fresh_stores`] made for it, else a SQLite file made on first use, then the same
/// one (so a test that runs the binary gives it the database its fixtures wrote).
pub fn tree_database_url(chroot: &str) -> String {
    let known = tree_urls().lock().ok().and_then(|m| m.get(chroot).cloned());
    if let Some(url) = known {
        return url;
    }
    let name = chroot.rsplit('/').next().unwrap_or("tree").to_string();
    let url = fresh_sqlite_url(&name);
    match tree_urls().lock() {
        Ok(mut m) => m.entry(chroot.to_string()).or_insert(url).clone(),
        Err(_) => url,
    }
}

/// The database belonging to the test tree `chroot` ([`tree_database_url`]): tests that
/// run the recorder in-process store through it, and two calls in one test see one
/// archive.
pub async fn tree_database(chroot: &str) -> Database {
    Database::connect(&tree_database_url(chroot))
        .await
        .unwrap_or_else(|e| panic!("opening the test tree's database: {e}"))
}

/// For each of [`backends`]: a fresh ZooKeeper chroot (as [`crate::fresh_tree`]) and a
/// fresh database, bound to each other (so [`tree_database`] of the chroot is that
/// database), so a test of a daemon that uses both runs once per backend.
pub async fn fresh_stores(
    name: &str,
) -> Vec<(
    archivist_engine::ZkConfig,
    archivist_engine::Session,
    Database,
)> {
    let mut all = Vec::new();
    for backend in backends() {
        let url = fresh_database_url(backend, name).await;
        let (config, session) = crate::fresh_tree(name).await;
        if let Ok(mut m) = tree_urls().lock() {
            m.insert(session.chroot().to_string(), url.clone());
        }
        let db = Database::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("opening the test database: {e}"));
        all.push((config, session, db));
    }
    all
}
