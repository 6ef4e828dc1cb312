//! The database's errors: each names what was being done and the database (its URL with
//! any password redacted), so an operator can tell which database and which step failed.

/// What went wrong talking to the database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL names no backend this build supports.
    #[error("database URL {url}: {reason}")]
    BadUrl {
        /// The URL, password redacted.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// Opening the database (file, server, credentials) failed.
    #[error("connecting to the database {url}: {source}")]
    Connect {
        /// The URL, password redacted.
        url: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// The database was written by a newer Archivist: its schema has migrations this
    /// build does not know, and using it could misread or damage it.
    #[error(
        "the database {url} has schema version {found}, newer than this archivist knows \
         ({known}): upgrade archivist (never point an old version at a newer database)"
    )]
    TooNew {
        /// The URL, password redacted.
        url: String,
        /// The highest migration applied to the database.
        found: i64,
        /// The highest migration this build carries.
        known: i64,
    },
    /// The SQLite file this process opened was deleted or replaced at its path while it
    /// ran: nothing more is written to it (see `file_identity`).
    #[error("the database {url}: {what}; nothing more is written to it. Restore the file (or point at the right one) and restart every daemon of this deployment (docs/operations.md, \"Backup and restore\")")]
    FileGone {
        /// The URL, password redacted.
        url: String,
        /// What happened to the file.
        what: String,
    },
    /// A read-only command was pointed at a SQLite file that does not exist (it creates
    /// none).
    #[error("the database {url} does not exist (a read-only command creates no database)")]
    Missing {
        /// The URL, password redacted.
        url: String,
    },
    /// A read-only command met a database whose schema is older than this build's: it
    /// may not migrate it (it writes nothing), and reading an old schema could misread.
    #[error(
        "the database {url} has schema version {found}, older than this archivist's \
         ({known}): a read-only command does not migrate it; run `archivist init` (or any \
         daemon) with write access to bring it up to date, or use the archivist that wrote it"
    )]
    TooOld {
        /// The URL, password redacted.
        url: String,
        /// The highest migration applied to the database (0: none, not an Archivist
        /// database yet).
        found: i64,
        /// The highest migration this build carries.
        known: i64,
    },
    /// Bringing the schema up to date failed.
    #[error("migrating the database {url}: {source}")]
    Migrate {
        /// The URL, password redacted.
        url: String,
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// A query failed.
    #[error("{what}: {source}")]
    Query {
        /// What was being done (e.g. "storing research of episode e0000001").
        what: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A stored value does not parse: the row was not written by Archivist, or by a
    /// version that wrote it differently.
    #[error("{what}: stored value is unreadable: {reason}")]
    Corrupt {
        /// Which row and column.
        what: String,
        /// Why it does not parse.
        reason: String,
    },
    /// Another writer got there first (a catalog record written since it was read, an
    /// alias created meanwhile): nothing of the transaction was stored; read again and
    /// retry.
    #[error("conflict with another writer: {what}; nothing was written")]
    Conflict {
        /// What moved.
        what: String,
    },
    /// An id range is used up (clip ids are 6 digits past which the format still works,
    /// but not past `u32`).
    #[error("no more {what}")]
    Exhausted {
        /// Which ids.
        what: String,
    },
}

impl DbError {
    /// A query error with its context.
    pub fn query(what: impl Into<String>, source: sqlx::Error) -> DbError {
        DbError::Query {
            what: what.into(),
            source,
        }
    }
}

/// Adds context to a driver result.
pub(crate) trait Context<T> {
    /// Names what was being done when the query failed.
    fn context(self, what: impl FnOnce() -> String) -> Result<T, DbError>;
}

impl<T> Context<T> for Result<T, sqlx::Error> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, DbError> {
        self.map_err(|source| DbError::query(what(), source))
    }
}
