//! What can stop the recorder or the reaper, with the offending node named.

use archivist_engine::EngineError;

/// Unusable settings, with where they came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {reason}")]
pub struct SettingsError {
    /// Where the settings came from (file name, or "recorder settings").
    pub source_name: String,
    /// What is wrong.
    pub reason: String,
}

/// A recorder failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecorderError {
    /// The settings are unusable (the recorder refuses to start with them).
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A report cannot be stored as it is (unreadable, or not matching its job).
    #[error("{path}: unusable report: {reason}")]
    BadReport {
        /// The report node.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Other recorders kept moving the research record or lease for every attempt; the
    /// reports are left for the next pass.
    #[error("{path}: still contended after {attempts} attempts; left for the next pass")]
    Contended {
        /// The job whose reports raced.
        path: String,
        /// Attempts made.
        attempts: u32,
    },
    /// ZooKeeper or the tree failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The database failed (the reports stay in ZooKeeper for the next pass).
    #[error(transparent)]
    Database(#[from] archivist_db::DbError),
}

impl RecorderError {
    /// Is the session gone (restart on a new session)?
    pub fn is_session_lost(&self) -> bool {
        matches!(self, RecorderError::Engine(e) if e.is_session_lost())
    }
}

/// A reaper failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReaperError {
    /// The settings are unusable (the reaper refuses to start with them).
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// ZooKeeper or the tree failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl ReaperError {
    /// Is the session gone (restart on a new session)?
    pub fn is_session_lost(&self) -> bool {
        matches!(self, ReaperError::Engine(e) if e.is_session_lost())
    }
}
