//! What can go wrong with a batch, with questions callers ask instead of matching.

use archivist_catalog::CatalogError;
use archivist_engine::schema::{paths, BatchState};
use archivist_engine::EngineError;

/// Why a batch operation did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// Talking to ZooKeeper failed (a lost session included).
    #[error(transparent)]
    Engine(EngineError),
    /// The submission has problems (every one listed, with its line), or curation failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The database (the catalog) failed.
    #[error(transparent)]
    Db(#[from] archivist_db::DbError),
    /// No such batch.
    #[error("batch {0} does not exist (see `archivist batch list`)")]
    NotFound(String),
    /// The action does not apply to the batch's state; nothing was written.
    #[error("batch {batch} is {status}: cannot {action} it (nothing written)")]
    Refused {
        /// Batch id.
        batch: String,
        /// Its state.
        status: BatchState,
        /// What was asked.
        action: &'static str,
    },
    /// A release while the collection-wide batch hold is on would be undone at once.
    #[error("batches are held (/control/hold-batches): run `archivist batch release-all` instead (nothing written)")]
    HoldInPlace,
    /// The batch changed between reading and writing; nothing was written.
    #[error("batch {batch} changed meanwhile ({detail}): nothing written; look again")]
    Moved {
        /// Batch id.
        batch: String,
        /// The failed precondition.
        detail: String,
    },
    /// The state table does not allow this change.
    #[error("batch transition {from} -> {to} is not in the batch state table")]
    IllegalTransition {
        /// Current state.
        from: BatchState,
        /// Requested state.
        to: BatchState,
    },
    /// The batch is deleted; its reports went with it.
    #[error("batch {0} is deleted: its reports were removed with it")]
    Deleted(String),
    /// The batch has no such report (yet).
    #[error("batch {batch} has no report {}", number.map(|n| n.to_string()).unwrap_or_else(|| "yet".into()))]
    NoReport {
        /// Batch id.
        batch: String,
        /// Report asked for (`None`: the latest).
        number: Option<u32>,
    },
}

impl From<EngineError> for BatchError {
    /// A failed precondition on a batch's own nodes (its record, lock or reports) means
    /// the batch changed between reading and writing ([`BatchError::Moved`]); a batch
    /// move the table does not list is [`BatchError::IllegalTransition`].
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::IllegalBatchTransition { from, to } => {
                BatchError::IllegalTransition { from, to }
            }
            EngineError::Precondition {
                op, path, source, ..
            } if batch_of(&path).is_some() => BatchError::Moved {
                batch: batch_of(&path).unwrap_or_default().to_string(),
                detail: format!("{op}: {source}"),
            },
            err => BatchError::Engine(err),
        }
    }
}

/// The batch id of a path under `/batches/{id}`.
fn batch_of(path: &str) -> Option<&str> {
    path.strip_prefix(paths::BATCHES)?
        .strip_prefix('/')?
        .split('/')
        .next()
        .filter(|id| !id.is_empty())
}

impl BatchError {
    /// Is the ZooKeeper session gone (reconnect)?
    pub fn is_session_lost(&self) -> bool {
        match self {
            BatchError::Engine(e) => e.is_session_lost(),
            BatchError::Catalog(e) => e.is_session_lost(),
            _ => false,
        }
    }

    /// Did a race with another writer cause it (the batch or a lock moved)?
    pub fn is_conflict(&self) -> bool {
        match self {
            BatchError::Engine(e) => e.is_conflict(),
            BatchError::Moved { .. } => true,
            _ => false,
        }
    }

    /// Was the action refused with nothing written (the CLI exits 3)?
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            BatchError::Refused { .. }
                | BatchError::Deleted(_)
                | BatchError::HoldInPlace
                | BatchError::Moved { .. }
                | BatchError::IllegalTransition { .. }
        )
    }
}
