//! What can stop the planner, with the offending input named.

use archivist_engine::EngineError;

/// A planner failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlannerError {
    /// The settings are unusable (the planner refuses to start with them).
    #[error("{source_name}: {reason}")]
    Settings {
        /// Where the settings came from (file name, or "planner settings").
        source_name: String,
        /// What is wrong.
        reason: String,
    },
    /// ZooKeeper or the tree failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The database (the catalog) failed.
    #[error(transparent)]
    Db(#[from] archivist_db::DbError),
}

impl PlannerError {
    /// Is the session gone (restart on a new session)?
    pub fn is_session_lost(&self) -> bool {
        matches!(self, PlannerError::Engine(e) if e.is_session_lost())
    }
}
