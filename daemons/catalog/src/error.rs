//! Catalog errors. Each names the input it is about (feed URL, manifest entry and line,
//! file path) so an operator can fix it and re-run: curation is idempotent.

use std::fmt;

use archivist_engine::EngineError;

/// One item that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ItemProblem {
    /// Which item: `episodes[2] (line 14)`, a feed item's title and GUID, a path.
    pub item: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ItemProblem {
    /// A problem with one item.
    pub fn new(item: impl Into<String>, reason: impl Into<String>) -> ItemProblem {
        ItemProblem {
            item: item.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ItemProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.item, self.reason)
    }
}

/// Renders problems one per line, for [`CatalogError::Invalid`].
fn list(problems: &[ItemProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("  - {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a curation did not happen (or did not finish).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Talking to ZooKeeper failed (a lost session included).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Talking to the database failed (the catalog lives there).
    #[error(transparent)]
    Db(#[from] archivist_db::DbError),
    /// The input has problems; nothing was written.
    #[error("{input}: {} problem(s), nothing written:\n{}", problems.len(), list(problems))]
    Invalid {
        /// The manifest, feed or command the items came from.
        input: String,
        /// Every problem found.
        problems: Vec<ItemProblem>,
    },
    /// A URL could not be fetched (unreachable, refused, HTTP error status).
    #[error("cannot fetch {url}: {reason}")]
    Fetch {
        /// The URL.
        url: String,
        /// What happened.
        reason: String,
    },
    /// The document at a URL is not a readable RSS/Atom/JSON feed.
    #[error("{url}: not a readable feed: {reason}")]
    MalformedFeed {
        /// Feed URL.
        url: String,
        /// Parser message.
        reason: String,
    },
    /// A local file could not be used.
    #[error("{path}: {reason}")]
    File {
        /// The path as given.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A URL or path that is not usable as media.
    #[error("{input:?}: {reason}")]
    BadInput {
        /// The input as given.
        input: String,
        /// What is wrong.
        reason: String,
    },
    /// Records kept conflicting with concurrent writers past the retry limit.
    #[error("gave up after {attempts} attempts: {remaining} item(s) kept conflicting with other writers; re-run to finish (curation is idempotent)")]
    Contention {
        /// Attempts made.
        attempts: u32,
        /// Items not written.
        remaining: usize,
    },
}

impl CatalogError {
    /// Is the ZooKeeper session gone (the caller should reconnect)?
    pub fn is_session_lost(&self) -> bool {
        matches!(self, CatalogError::Engine(e) if e.is_session_lost())
    }

    /// A [`CatalogError::BadInput`].
    pub fn bad_input(input: impl Into<String>, reason: impl Into<String>) -> CatalogError {
        CatalogError::BadInput {
            input: input.into(),
            reason: reason.into(),
        }
    }
}
