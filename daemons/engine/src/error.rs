//! Engine errors, with questions callers ask instead of matching variants.

use znode_schema::records::RecordError;
use znode_schema::{BatchState, JobState};

/// Result with [`EngineError`].
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Did the request perhaps reach the server and get applied, with only its reply lost?
/// A connection loss, a timeout, or an I/O error of the connection (over TLS: a server
/// gone without `close_notify`, which the client reports as a custom error, not as a
/// connection loss). A caller whose write may have been applied must look before it
/// retries or gives up (a lock created unseen is still held by this session).
pub fn reply_may_be_lost(source: &zookeeper_client::Error) -> bool {
    matches!(
        source,
        zookeeper_client::Error::ConnectionLoss
            | zookeeper_client::Error::Custom(_)
            | zookeeper_client::Error::Timeout
    )
}

/// Was `err`, or any error in its chain of causes, refused by the tree's ACLs
/// (ZooKeeper's `NoAuth`)? The one rule every command uses to say who it connected as
/// ([`refusal_hint`]): `init`, `pause`, `fsck --repair` and every admin action alike. It
/// looks for the client error itself, because daemon and admin errors wrap
/// [`EngineError`] transparently, which hides it from a walk of the chain (a read-only
/// identity's refused `pause` said a bare "not authorized" while `init` named it).
pub fn refused_by_acl(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if matches!(
            e.downcast_ref::<zookeeper_client::Error>(),
            Some(zookeeper_client::Error::NoAuth)
        ) {
            return true;
        }
        cause = e.source();
    }
    false
}

/// What to add to an error [`refused_by_acl`]: who `config` connects as and what to
/// check. One sentence for every refused read or write.
pub fn refusal_hint(config: &crate::ZkConfig) -> String {
    format!(
        "connected as {}: the tree's ACLs do not let it do this (a read-only identity, such as the reader of zookeeper.reader or zookeeper.sasl.reader, can only read); run it as the daemons' identity: check zookeeper.sasl and zookeeper.auth, or --zk-sasl-user and ARCHIVIST_ZK_AUTH",
        config.identity()
    )
}

/// What went wrong talking to ZooKeeper or handling the tree.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No ZooKeeper server answered.
    #[error(
        "cannot reach ZooKeeper at {connect}: {source} (is it running? try `scripts/zk.sh start`)"
    )]
    Unreachable {
        /// Connect string used.
        connect: String,
        /// Client error.
        source: zookeeper_client::Error,
    },
    /// A server answered but refused the connection as configured (TLS or SASL);
    /// `cause` names the setting to look at.
    #[error("cannot connect to ZooKeeper at {connect}: {cause}")]
    Refused {
        /// Connect string used.
        connect: String,
        /// What is wrong, for an operator.
        cause: String,
    },
    /// The tree has not been created (`archivist init`).
    #[error("the Archivist tree is not initialised under {chroot} (missing {missing}): run `archivist init`")]
    NotInitialised {
        /// Chroot in use.
        chroot: String,
        /// First missing path.
        missing: String,
    },
    /// The session expired or was closed; everything it guarded is lost.
    #[error("ZooKeeper session lost ({0})")]
    SessionLost(String),
    /// A ZooKeeper call failed.
    #[error("{op} {path}: {source}")]
    Zk {
        /// Operation.
        op: &'static str,
        /// Node path.
        path: String,
        /// Client error.
        source: zookeeper_client::Error,
    },
    /// A multi's precondition did not hold (version moved, node gone or already there).
    #[error("precondition failed: {op} ({source}); the tree changed meanwhile")]
    Precondition {
        /// Which operation of the multi failed, described (for people).
        op: String,
        /// Its position in the multi (0-based), so callers can tell which of their
        /// operations failed without matching the description.
        index: usize,
        /// The exact path that operation touched.
        path: String,
        /// Client error (BadVersion, NoNode, NodeExists, NotEmpty).
        source: zookeeper_client::Error,
    },
    /// A multi failed for a reason other than a precondition.
    #[error("write failed: {op}: {source}")]
    WriteFailed {
        /// Which operation failed, described (or `request` if the whole request failed).
        op: String,
        /// Client error.
        source: zookeeper_client::Error,
    },
    /// The state table does not allow this transition.
    #[error("transition {from} -> {to} is not in the state table")]
    IllegalTransition {
        /// Current state.
        from: JobState,
        /// Requested state.
        to: JobState,
    },
    /// The batch state table does not allow this transition.
    #[error("batch transition {from} -> {to} is not in the batch state table")]
    IllegalBatchTransition {
        /// Current state.
        from: BatchState,
        /// Requested state.
        to: BatchState,
    },
    /// The table lists the move, but for other roles (its `by` column): this daemon or
    /// command must not make it. Nothing was written.
    #[error("{table} transition {from} -> {to} is made by {by}, not by the {role}")]
    NotAllowedBy {
        /// Which table (`job`, `batch`).
        table: &'static str,
        /// Current state.
        from: &'static str,
        /// Requested state.
        to: &'static str,
        /// The role that tried.
        role: crate::transition::Role,
        /// The table's `by` cell.
        by: String,
    },
    /// The job is not in the state the caller expected.
    #[error("job {job} is {actual}, not {expected}: it moved meanwhile")]
    WrongState {
        /// Job id.
        job: String,
        /// Expected state.
        expected: JobState,
        /// Actual state.
        actual: JobState,
    },
    /// A node does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// Node data could not be used.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The configuration is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A daemon's own error (a planner's, a recorder's, a task that panicked), kept
    /// whole on its way through [`crate::daemon::supervise`] and
    /// [`crate::consumer::Step`]: its message and sources are shown as they are, and
    /// [`EngineError::downcast_ref`] gets the typed error back. Made by
    /// [`EngineError::daemon`].
    #[error(transparent)]
    Daemon(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl EngineError {
    /// Carries a daemon's own error through the engine, keeping its type (see
    /// [`EngineError::Daemon`]).
    pub fn daemon(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        EngineError::Daemon(Box::new(err))
    }

    /// The daemon error of type `T` this carries, if it is one.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            EngineError::Daemon(inner) => inner.downcast_ref::<T>(),
            _ => None,
        }
    }

    /// Wraps a client error for one call on a path.
    pub fn zk(op: &'static str, path: impl Into<String>, source: zookeeper_client::Error) -> Self {
        match source {
            zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed => {
                EngineError::SessionLost(source.to_string())
            }
            source => EngineError::Zk {
                op,
                path: path.into(),
                source,
            },
        }
    }

    /// Is the session gone? Work guarded by its locks must stop; reconnect.
    pub fn is_session_lost(&self) -> bool {
        match self {
            EngineError::SessionLost(_) => true,
            EngineError::Zk { source, .. }
            | EngineError::WriteFailed { source, .. }
            | EngineError::Unreachable { source, .. } => matches!(
                source,
                zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed
            ),
            _ => false,
        }
    }

    /// Could the same call succeed if tried again (connection loss, timeouts, throttling,
    /// or a lost race)?
    pub fn is_retryable(&self) -> bool {
        match self {
            EngineError::Precondition { .. } => true,
            EngineError::Zk { source, .. }
            | EngineError::WriteFailed { source, .. }
            | EngineError::Unreachable { source, .. } => {
                reply_may_be_lost(source)
                    || matches!(
                        source,
                        zookeeper_client::Error::Throttled | zookeeper_client::Error::NoHosts
                    )
            }
            _ => false,
        }
    }

    /// The path of the multi operation whose precondition failed, if that is the error.
    /// Callers compare it with the paths they built, never a description.
    pub fn failed_path(&self) -> Option<&str> {
        match self {
            EngineError::Precondition { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Did a race with another writer cause it (version moved, node gone or present)?
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            EngineError::Precondition { .. } | EngineError::WrongState { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon's own error, as the planner's index load or a recorder's store failure.
    #[derive(Debug, thiserror::Error)]
    #[error("the index could not be loaded")]
    struct DaemonOwn;

    /// Issue 17: daemon errors were squeezed into `Config` ("invalid configuration:
    /// ...", untyped) on their way through `supervise` and `Step`.
    #[test]
    fn a_daemon_error_keeps_its_type_and_its_message() {
        let err = EngineError::daemon(DaemonOwn);
        assert_eq!(err.to_string(), "the index could not be loaded");
        assert!(err.downcast_ref::<DaemonOwn>().is_some());
        assert!(!err.is_session_lost() && !err.is_retryable() && !err.is_conflict());
        assert!(EngineError::Config("x".into())
            .downcast_ref::<DaemonOwn>()
            .is_none());
    }
}
