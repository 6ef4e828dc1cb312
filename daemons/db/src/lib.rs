//! Archivist's database: the catalog and the research archive, in SQLite (an embedded
//! file, the default) or PostgreSQL (deployments across machines). ZooKeeper keeps only
//! coordination (docs/architecture.md, "ZooKeeper and the database"): its guide says it
//! is not a general database, and a catalog of 100k episodes outgrew it.
//!
//! This crate is the only one that writes SQL; the others call its functions with
//! `znode_schema::records` types or the small row types it defines.
//!
//! Why sqlx: it is async on tokio like the rest of Archivist, one API and one migration
//! system serve SQLite and PostgreSQL, and it is well kept. Queries are bound at run time
//! (`sqlx::query`), never the compile-time checked macros, which need a live database to
//! build. One [`sqlx::AnyPool`] serves both backends, so each query is written once in
//! the SQL both understand (`$1` parameters, `ON CONFLICT`); the few differences
//! (locking, how a write transaction starts) live in [`Database::begin_write`], whose
//! [`WriteTx`] never returns a connection with a transaction in an unknown state to the pool. SQLite
//! is bundled (compiled into the binary), so a fresh machine needs nothing.
//!
//! The schema is `migrations/NNNN_name.sql`, the same files for both backends, applied
//! by [`Database::connect`]; a database with a migration this build does not know is
//! refused ([`DbError::TooNew`]).
#![deny(missing_docs)]

use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::AnyConnection;
use sqlx::{AnyPool, Connection, Executor};

pub mod catalog;
pub mod deployment;
pub mod error;
mod file_identity;
pub mod migrate;
pub mod provision;
pub mod renditions;
pub mod research;
#[doc(hidden)]
pub mod testing;
pub mod url;
mod write_tx;

pub use error::DbError;
pub use url::{redact, Backend};
pub(crate) use write_tx::WriteTx;

use error::Context;

/// The schema: `migrations/*.sql`, embedded at build time.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// How long SQLite waits for another process's write lock before giving up. Several
/// daemons on one machine share the file; a write transaction is short (one job's
/// reports), so a long wait means something is stuck.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`Database::connect`] (and every query, for a connection) waits for the
/// server: one that answers slowly is waited for; one that refuses the connection (down,
/// or restarting) is reported at once by the first, probing connection, and an open
/// pool waits this long for a restarting server before a query fails.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections per process: SQLite has one writer at a time anyway; PostgreSQL serves
/// many, but Archivist's daemons each run a few queries at once.
const MAX_CONNECTIONS: u32 = 8;

/// Attempts at bringing a fresh SQLite file's schema up to date: daemons started at
/// once race to create it (SQLite has no migration lock), and the loser retries and
/// finds it done.
const MIGRATE_ATTEMPTS: u32 = 5;

/// The counters whose next value stamps the rows a transaction changes (`seq`), so
/// readers can ask for what changed since their watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Episodes, clips and aliases.
    Catalog,
    /// The research archive.
    Research,
}

impl Counter {
    fn name(self) -> &'static str {
        match self {
            Counter::Catalog => "catalog",
            Counter::Research => "research",
        }
    }
}

/// An open database: a connection pool, the backend it talks to and its URL for
/// messages (password redacted). Cheap to clone (the pool is shared).
#[derive(Debug, Clone)]
pub struct Database {
    pool: AnyPool,
    backend: Backend,
    shown: String,
    /// The SQLite file opened (none for PostgreSQL or an in-memory database).
    file: Option<std::sync::Arc<file_identity::FileIdentity>>,
}

impl Database {
    /// Opens the database at `url` (`sqlite://PATH` or `postgres://...`) and brings its
    /// schema up to date. A SQLite file (and its directory) is created if missing, and
    /// runs in WAL mode with a busy timeout so several processes share it.
    pub async fn connect(url: &str) -> Result<Database, DbError> {
        Database::connect_within(url, CONNECT_TIMEOUT).await
    }

    /// [`Database::connect`], giving up on a server that does not answer (or a pool
    /// that has no free connection) within `timeout`.
    pub async fn connect_within(url: &str, timeout: Duration) -> Result<Database, DbError> {
        Database::open(url, timeout, Access::ReadWrite).await
    }

    /// Opens the database for reading only (`status`, `results`, `export`, `tree`, `fsck`
    /// without `--repair`): a SQLite file is opened `mode=ro` and never created, put in
    /// WAL mode or migrated, so a file the operator may only read, or a backup on a
    /// read-only mount, serves (outside 22 finding 10). Its schema must be the one this
    /// build knows: an older one is refused with [`DbError::TooOld`] (a command that
    /// writes migrates it), a newer one with [`DbError::TooNew`].
    pub async fn connect_read_only(url: &str) -> Result<Database, DbError> {
        Database::open(url, CONNECT_TIMEOUT, Access::ReadOnly).await
    }

    async fn open(url: &str, timeout: Duration, access: Access) -> Result<Database, DbError> {
        let shown = redact(url);
        let backend = Backend::of(url).ok_or_else(|| DbError::BadUrl {
            url: shown.clone(),
            reason: "expected sqlite://PATH or postgres://USER@HOST:PORT/DATABASE".into(),
        })?;
        sqlx::any::install_default_drivers();
        let url = match backend {
            Backend::Sqlite => sqlite_url(url, &shown, access)?,
            Backend::Postgres => url.to_string(),
        };
        // One connection first, set up as the pool's will be: its error names the cause
        // at once (a refused connection, a bad password, a file that is no database),
        // where the pool would retry it until its timeout and say "pool timed out"
        // (outside 22 findings 12 and 15).
        if !url.contains(":memory:") {
            match tokio::time::timeout(timeout, probe(&url, backend, access)).await {
                Ok(Ok(())) => {}
                Ok(Err(source)) => return Err(DbError::Connect { url: shown, source }),
                Err(_) => {
                    return Err(DbError::Connect {
                        url: shown,
                        source: sqlx::Error::PoolTimedOut,
                    })
                }
            }
        }
        // An in-memory SQLite database is one per connection: one connection, so the
        // schema and the queries meet.
        let in_memory = backend == Backend::Sqlite && url.contains(":memory:");
        let pool = AnyPoolOptions::new()
            .max_connections(if in_memory { 1 } else { MAX_CONNECTIONS })
            .acquire_timeout(timeout)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        sqlite_session(conn, access).await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await;
        let pool = match pool {
            Ok(pool) => pool,
            Err(sqlx::Error::PoolTimedOut) => {
                // The pool retries a failing connect until its timeout and then says only
                // "pool timed out": one direct attempt names the cause (connection
                // refused, bad password, disk full, read-only file).
                let source = match tokio::time::timeout(timeout, AnyConnection::connect(&url)).await
                {
                    Ok(Err(cause)) => cause,
                    _ => sqlx::Error::PoolTimedOut,
                };
                return Err(DbError::Connect { url: shown, source });
            }
            Err(source) => return Err(DbError::Connect { url: shown, source }),
        };
        let file = match sqlite_file(&url) {
            Some(path) if backend == Backend::Sqlite => Some(std::sync::Arc::new(
                file_identity::FileIdentity::of(std::path::Path::new(path)).map_err(|e| {
                    DbError::BadUrl {
                        url: shown.clone(),
                        reason: format!("the database file cannot be read: {e}"),
                    }
                })?,
            )),
            _ => None,
        };
        let db = Database {
            pool,
            backend,
            shown,
            file,
        };
        match access {
            Access::ReadWrite => {
                if backend == Backend::Sqlite {
                    db.sqlite_wal().await?;
                }
                db.migrate().await?;
            }
            Access::ReadOnly => db.check_version().await?,
        }
        Ok(db)
    }

    /// Refuses a schema other than the one this build knows, changing nothing (the
    /// read-only open). A database that is no database at all is named as such here.
    async fn check_version(&self) -> Result<(), DbError> {
        let known = Database::known_schema_version();
        let found = match applied_version(&self.pool).await {
            Ok(found) => found,
            // No migration table: nothing was ever migrated (an empty file), or the
            // table was dropped; a read-only open cannot create it.
            Err(sqlx::Error::Database(e)) if is_missing_table(e.message()) => 0,
            Err(source) => {
                return Err(DbError::query(
                    format!("reading the schema version of the database {}", self.shown),
                    source,
                ))
            }
        };
        if found > known {
            return Err(DbError::TooNew {
                url: self.shown.clone(),
                found,
                known,
            });
        }
        if found < known {
            return Err(DbError::TooOld {
                url: self.shown.clone(),
                found,
                known,
            });
        }
        Ok(())
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL, password redacted: for messages.
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    /// Fails with [`DbError::FileGone`] once the SQLite file this process opened was
    /// deleted or replaced at its path (nothing written to it after that could be read
    /// by anyone); always `Ok` for PostgreSQL. Checked before every write transaction and
    /// after its commit; daemons also call it from a watchdog, and stop.
    pub fn check_file(&self) -> Result<(), DbError> {
        match self.file.as_ref().and_then(|f| f.changed()) {
            None => Ok(()),
            Some(what) => Err(DbError::FileGone {
                url: self.shown.clone(),
                what,
            }),
        }
    }

    /// The connection pool, for this crate's modules.
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The highest schema version (migration) this build knows.
    pub fn known_schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// The highest schema version applied to the database (0: none).
    pub async fn schema_version(&self) -> Result<i64, DbError> {
        applied_version(&self.pool)
            .await
            .context(|| format!("reading the schema version of the database {}", self.shown))
    }

    /// Can the database's tables be read now? Reads the first row of each table the
    /// pages and daemons read (their b-tree roots and first leaves), not only the
    /// schema version: a file whose pages after the first were damaged answered the
    /// version from a cached page while every real read failed "malformed", so a
    /// health check built on it said ok (outside try 24c M2). Cheap at any size.
    ///
    /// # Errors
    /// The first table that cannot be read, with the database's error.
    pub async fn probe(&self) -> Result<(), DbError> {
        for table in [
            "counters",
            "episodes",
            "clips",
            "aliases",
            "research",
            "research_runs",
            "found",
            "clip_errors",
            "renditions",
            "rendition_pins",
            "run_renditions",
        ] {
            sqlx::query(&format!("SELECT 1 FROM {table} LIMIT 1"))
                .fetch_optional(&self.pool)
                .await
                .context(|| format!("reading table {table} of the database {}", self.shown))?;
        }
        Ok(())
    }

    /// The last value `counter` handed out: a watermark, for readers that then ask for
    /// the rows changed after it.
    pub async fn current_seq(&self, counter: Counter) -> Result<i64, DbError> {
        let (value,): (i64,) = sqlx::query_as("SELECT value FROM counters WHERE name = $1")
            .bind(counter.name())
            .fetch_one(&self.pool)
            .await
            .context(|| format!("reading the {} sequence number", counter.name()))?;
        Ok(value)
    }

    /// Closes the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Starts a transaction that will write. SQLite: `BEGIN IMMEDIATE`, which takes the
    /// write lock at once (waiting up to the busy timeout) instead of failing when a
    /// read transaction later tries to write; PostgreSQL: a plain transaction (rows are
    /// locked as they are written, or with `FOR UPDATE`).
    pub(crate) async fn begin_write(&self, what: impl Fn() -> String) -> Result<WriteTx, DbError> {
        self.check_file()?;
        let begin = match self.backend {
            Backend::Sqlite => "BEGIN IMMEDIATE",
            Backend::Postgres => "BEGIN",
        };
        WriteTx::begin(&self.pool, begin, self.file.clone())
            .await
            .context(|| format!("{}: starting a transaction", what()))
    }

    /// Refuses a newer schema, then applies the migrations this database lacks.
    async fn migrate(&self) -> Result<(), DbError> {
        let known = Database::known_schema_version();
        let mut attempt = 0;
        loop {
            attempt += 1;
            // Absent table (a new database): version 0.
            let found = applied_version(&self.pool).await.unwrap_or(0);
            if found > known {
                return Err(DbError::TooNew {
                    url: self.shown.clone(),
                    found,
                    known,
                });
            }
            match MIGRATOR.run(&self.pool).await {
                Ok(()) => return Ok(()),
                Err(e) if self.backend == Backend::Sqlite && attempt < MIGRATE_ATTEMPTS => {
                    tracing::debug!(url = %self.shown, error = %e, attempt, "migrating again (another process may be creating the schema)");
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
                Err(source) => {
                    return Err(DbError::Migrate {
                        url: self.shown.clone(),
                        source,
                    })
                }
            }
        }
    }

    /// Puts a SQLite file in WAL mode (readers never block the writer; it persists in
    /// the file). Changing the mode needs the file to itself, which a busy timeout does
    /// not wait for, so this retries while another process holds it.
    async fn sqlite_wal(&self) -> Result<(), DbError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.pool.execute("PRAGMA journal_mode = WAL").await {
                Ok(_) => return Ok(()),
                Err(e) if attempt < MIGRATE_ATTEMPTS * 4 => {
                    tracing::debug!(url = %self.shown, error = %e, "WAL mode: retrying");
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                }
                Err(source) => {
                    return Err(DbError::query(
                        format!("putting the database {} in WAL mode", self.shown),
                        source,
                    ))
                }
            }
        }
    }
}

/// Takes the next value of `counter`, for the rows this transaction writes. The counter
/// row stays locked until the transaction ends, so values are handed out in commit order.
pub(crate) async fn next_seq(conn: &mut AnyConnection, counter: Counter) -> Result<i64, DbError> {
    let (value,): (i64,) =
        sqlx::query_as("UPDATE counters SET value = value + 1 WHERE name = $1 RETURNING value")
            .bind(counter.name())
            .fetch_one(&mut *conn)
            .await
            .context(|| format!("taking the next {} sequence number", counter.name()))?;
    Ok(value)
}

/// The highest migration applied, 0 for none.
async fn applied_version(pool: &AnyPool) -> Result<i64, sqlx::Error> {
    let (version,): (Option<i64>,) = sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations")
        .fetch_one(pool)
        .await?;
    Ok(version.unwrap_or(0))
}

/// Opens one connection as the pool would (SQLite's session settings included) and
/// reads from it, then closes it.
async fn probe(url: &str, backend: Backend, access: Access) -> Result<(), sqlx::Error> {
    let mut conn = AnyConnection::connect(url).await?;
    if backend == Backend::Sqlite {
        sqlite_session(&mut conn, access).await?;
        // A file that is no database passes the settings on some versions: its header
        // is read here.
        conn.execute("SELECT COUNT(*) FROM sqlite_master").await?;
    }
    conn.close().await
}

/// How a database is opened: by the commands that write (migrated, SQLite in WAL mode)
/// or by the read-only ones (nothing written, not even the schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    ReadWrite,
    ReadOnly,
}

/// Whether a driver message says a table does not exist (SQLite: "no such table",
/// PostgreSQL: "relation ... does not exist").
fn is_missing_table(message: &str) -> bool {
    message.contains("no such table") || message.contains("does not exist")
}

/// Per-connection SQLite settings: wait for the write lock instead of failing at once,
/// and a commit is on disk before it returns (`FULL`): the recorder deletes reports from
/// ZooKeeper once the commit returns, so a commit lost in a power cut would lose results.
/// A read-only connection also refuses writes at the SQL level (`query_only`).
async fn sqlite_session(conn: &mut AnyConnection, access: Access) -> Result<(), sqlx::Error> {
    conn.execute(format!("PRAGMA busy_timeout = {}", SQLITE_BUSY_TIMEOUT.as_millis()).as_str())
        .await?;
    match access {
        Access::ReadWrite => conn.execute("PRAGMA synchronous = FULL").await?,
        Access::ReadOnly => conn.execute("PRAGMA query_only = ON").await?,
    };
    Ok(())
}

/// A statement that binds an `Option<f64>` (a duration), made uncached. sqlx 0.8's
/// `Any` driver declares a bound `None::<f64>` to PostgreSQL as `float4`; a cached
/// statement keeps that type, and its next use with a value (8 bytes) failed with
/// "incorrect binary data format in bind parameter N": a catalog record or an episode's
/// research first stored without a duration could not be stored with one on that
/// connection. Uncached, each use is prepared with its own arguments' types. The one
/// place for the rule: every statement binding a nullable float goes through here.
pub(crate) fn binds_nullable_float<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    query.persistent(false)
}

/// A SQLite URL that creates the file (and its directory) when missing, or, read-only,
/// opens an existing file `mode=ro` (a missing one is an error, never created).
/// The file path of a `sqlite:` URL as [`sqlite_url`] made it (`None`: in memory).
fn sqlite_file(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split_once('?').map_or(rest, |(p, _)| p);
    (!path.is_empty() && path != ":memory:").then_some(path)
}

fn sqlite_url(url: &str, shown: &str, access: Access) -> Result<String, DbError> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if path.is_empty() || path == ":memory:" {
        return Ok(url.to_string());
    }
    if access == Access::ReadOnly {
        if !std::path::Path::new(path).is_file() {
            return Err(DbError::Missing {
                url: shown.to_string(),
            });
        }
        return Ok(match query {
            Some(q) if q.contains("mode=") => url.to_string(),
            Some(q) => format!("sqlite://{path}?{q}&mode=ro"),
            None => format!("sqlite://{path}?mode=ro"),
        });
    }
    if let Some(dir) = std::path::Path::new(path).parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(|e| DbError::BadUrl {
                url: shown.to_string(),
                reason: format!("creating the directory {}: {e}", dir.display()),
            })?;
        }
    }
    Ok(match query {
        Some(q) if q.contains("mode=") => url.to_string(),
        Some(q) => format!("sqlite://{path}?{q}&mode=rwc"),
        None => format!("sqlite://{path}?mode=rwc"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_create_the_file() {
        let dir = std::env::temp_dir().join(format!("archivist-db-url-{}", std::process::id()));
        let path = dir.join("sub/a.db");
        let url = format!("sqlite://{}", path.display());
        assert_eq!(
            sqlite_url(&url, &url, Access::ReadWrite).unwrap(),
            format!("sqlite://{}?mode=rwc", path.display())
        );
        assert!(path.parent().unwrap().is_dir());
        let ro = format!("sqlite://{}?mode=ro", path.display());
        assert_eq!(sqlite_url(&ro, &ro, Access::ReadWrite).unwrap(), ro);
        std::fs::write(&path, b"").unwrap();
        assert_eq!(
            sqlite_url(&url, &url, Access::ReadOnly).unwrap(),
            format!("sqlite://{}?mode=ro", path.display())
        );
        let missing = format!("sqlite://{}", dir.join("none.db").display());
        assert!(sqlite_url(&missing, &missing, Access::ReadOnly).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }
}
