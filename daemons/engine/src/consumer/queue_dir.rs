//! Whether the consumed queue's directory exists: a consumer whose `/queues/{state}` was
//! deleted by hand saw an empty queue and idled, "ready" and silent, while the planner
//! said "missing /queues/pending: run `archivist init`" (outside 17h F7). It is now not
//! ready while the directory is missing, says so in its log once, and says when it is
//! back.

use znode_schema::paths;
use znode_schema::JobState;

use crate::error::Result;
use crate::session::Session;
use crate::store;

/// What one consumer knows of its queue directory.
#[derive(Debug)]
pub struct QueueDir {
    state: JobState,
    role: Option<&'static str>,
    missing: bool,
}

impl QueueDir {
    /// The directory of `state`'s queue, consumed as `role` (the name `/readyz` knows the
    /// daemon by; `None`: readiness is not touched, only the log).
    pub fn new(state: JobState, role: Option<&'static str>) -> QueueDir {
        QueueDir {
            state,
            role,
            missing: false,
        }
    }

    /// Is the directory missing (as last checked)?
    pub fn is_missing(&self) -> bool {
        self.missing
    }

    /// Checks the directory (one `exists`); on a change, logs it once and marks the
    /// role not ready (missing) or ready again (back).
    ///
    /// # Errors
    /// ZooKeeper errors, a lost session among them.
    pub async fn check(&mut self, session: &Session) -> Result<()> {
        let dir = paths::queue(self.state);
        let missing = store::exists(session, &dir).await?.is_none();
        if missing == self.missing {
            return Ok(());
        }
        self.missing = missing;
        if missing {
            let why = format!(
                "missing {dir}: run `archivist init` (nothing can be claimed from it meanwhile)"
            );
            tracing::warn!(state = %self.state, path = %dir, "queue directory missing (deleted by hand?): not ready and claiming nothing until `archivist init` makes it again");
            if let Some(role) = self.role {
                crate::health::trouble(role, why);
            }
        } else {
            tracing::info!(state = %self.state, path = %dir, "queue directory back: claiming again");
            if let Some(role) = self.role {
                crate::health::recovered(role);
            }
        }
        Ok(())
    }
}
