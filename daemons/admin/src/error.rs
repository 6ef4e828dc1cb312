//! Admin errors. A refusal (the job moved, is in the wrong state, or is locked) is its
//! own variant so the CLI can explain it and exit with a distinct code.

use archivist_engine::schema::JobState;
use archivist_engine::EngineError;

/// What went wrong in an admin operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// ZooKeeper or the tree failed (unreachable, session lost, unreadable node...).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The database (catalog, research archive) failed.
    #[error(transparent)]
    Db(#[from] archivist_db::DbError),
    /// The node the operator named does not exist.
    #[error("{what} {id} does not exist ({path})")]
    NotFound {
        /// Kind of thing (`job`, `episode`, `clip`, `research record`).
        what: &'static str,
        /// The id given.
        id: String,
        /// The node looked up.
        path: String,
    },
    /// The action does not apply to the job as it is now; nothing was written.
    #[error("refused: job {job} is {state}: {reason}")]
    Refused {
        /// Job id.
        job: String,
        /// The state the job was seen in.
        state: JobState,
        /// Why, in words an operator can act on.
        reason: String,
    },
    /// The job (or record) changed between the read and the compare-and-set write;
    /// nothing was written.
    #[error(
        "refused: {path} changed meanwhile ({detail}); nothing was written: look again and retry"
    )]
    Moved {
        /// Node that moved.
        path: String,
        /// Which check failed.
        detail: String,
    },
    /// Another session holds the job's lock; nothing was written.
    #[error("refused: job {job} is locked by {holder}; nothing was written")]
    Locked {
        /// Job id.
        job: String,
        /// Who holds the lock, in words.
        holder: String,
    },
    /// A write's reply was lost and the job could not be read back to tell whether it
    /// applied: the action may have been done. Not "failed": `jobs show` tells (outside
    /// try 17p F6: a bulk retry that applied unseen was reported as not retried).
    #[error("job {job}: the write's reply was lost and the job could not be read back ({why}): it may have been done; `archivist jobs show {job}` tells")]
    Unconfirmed {
        /// Job id.
        job: String,
        /// Why it could not be read back.
        why: String,
    },
    /// The operator's input is unusable (the CLI exits 2, as for a usage error).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The temporary file that keeps a large answer's rows off the heap failed.
    #[error("spooling rows to a temporary file: {0}")]
    Spool(String),
    /// Writing an export's rows failed (disk full, closed pipe...).
    #[error("writing the export: {0}")]
    Write(#[source] std::io::Error),
}

impl AdminError {
    /// Was the action refused because of the job's state or a concurrent change (as
    /// opposed to a failure of ZooKeeper)? Nothing was written in that case.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            AdminError::Refused { .. } | AdminError::Moved { .. } | AdminError::Locked { .. }
        )
    }

    /// Maps a failed compare-and-set multi to [`AdminError::Moved`]; other errors pass.
    pub(crate) fn from_commit(path: &str, err: EngineError) -> AdminError {
        match err {
            EngineError::Precondition { op, .. } => AdminError::Moved {
                path: path.to_string(),
                detail: format!("{op} failed"),
            },
            other => AdminError::Engine(other),
        }
    }
}

/// Result with [`AdminError`].
pub type Result<T, E = AdminError> = std::result::Result<T, E>;
