//! Owned multi operations and their commit as one ZooKeeper `multi`.
//!
//! Building a transition as a list of [`Op`]s lets callers add their own operations
//! (a lease write, a report delete) to the same atomic write, and lets a failure say
//! which operation failed and whether it was a precondition (the tree changed) or a
//! write error (zookeeper-client's `CheckWriter` makes the same distinction).

use std::future::Future;
use std::pin::Pin;

use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::session::Session;

/// Node kind for [`Op::Create`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Stays until deleted.
    Persistent,
    /// Goes with the session.
    Ephemeral,
    /// Persistent, and readable only by the identities this process authenticates as:
    /// the configured reader roles get no READ (a secret, such as a webhook URL; see
    /// [`Session::secret_create_options`]).
    Secret,
}

/// One operation of a multi.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Create a node (fails if it exists).
    Create {
        /// Path.
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Kind.
        mode: Mode,
    },
    /// Set data, optionally only at an expected version.
    SetData {
        /// Path.
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Expected version (`None`: any).
        version: Option<i32>,
    },
    /// Delete, optionally only at an expected version.
    Delete {
        /// Path.
        path: String,
        /// Expected version (`None`: any).
        version: Option<i32>,
    },
    /// Require a node to exist at a version.
    Check {
        /// Path.
        path: String,
        /// Expected version.
        version: i32,
    },
}

impl Op {
    /// The node this operation touches.
    pub fn path(&self) -> &str {
        match self {
            Op::Create { path, .. }
            | Op::SetData { path, .. }
            | Op::Delete { path, .. }
            | Op::Check { path, .. } => path,
        }
    }

    /// A short human description for errors.
    pub fn describe(&self) -> String {
        match self {
            Op::Create { path, .. } => format!("create {path}"),
            Op::SetData { path, version, .. } => match version {
                Some(v) => format!("set {path} at version {v}"),
                None => format!("set {path}"),
            },
            Op::Delete { path, version } => match version {
                Some(v) => format!("delete {path} at version {v}"),
                None => format!("delete {path}"),
            },
            Op::Check { path, version } => format!("check {path} is at version {version}"),
        }
    }
}

fn is_precondition(err: &zk::Error) -> bool {
    matches!(
        err,
        zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists | zk::Error::NotEmpty
    )
}

/// Runs the operations as one `multi`: all apply or none do.
///
/// # Errors
/// - [`EngineError::Precondition`] naming the operation whose version/existence check
///   failed: nothing was written.
/// - [`EngineError::SessionLost`] if the session is gone: nothing was written.
/// - [`EngineError::WriteFailed`] otherwise. On connection loss the outcome is unknown;
///   callers re-read before retrying.
pub async fn commit(session: &Session, ops: &[Op]) -> Result<Vec<zk::MultiWriteResult>> {
    send(session, ops).await
}

/// Sends the operations as one `multi` now (zookeeper-client sends on call) and returns
/// a future of its outcome, so many multis can be in flight at once (pipelining).
/// Errors as [`commit`].
pub fn send<'a>(
    session: &'a Session,
    ops: &[Op],
) -> Pin<Box<dyn Future<Output = Result<Vec<zk::MultiWriteResult>>> + Send + 'a>> {
    if let Err(e) = session.ensure_alive() {
        return Box::pin(std::future::ready(Err(e)));
    }
    if ops.is_empty() {
        return Box::pin(std::future::ready(Ok(Vec::new())));
    }
    let client = session.client();
    let mut multi = client.new_multi_writer();
    let persistent = session.create_options(zk::CreateMode::Persistent);
    let ephemeral = session.create_options(zk::CreateMode::Ephemeral);
    let secret = session.secret_create_options(zk::CreateMode::Persistent);
    for op in ops {
        let added = match op {
            Op::Create { path, data, mode } => {
                let options = match mode {
                    Mode::Persistent => &persistent,
                    Mode::Ephemeral => &ephemeral,
                    Mode::Secret => &secret,
                };
                multi.add_create(path, data, options)
            }
            Op::SetData {
                path,
                data,
                version,
            } => multi.add_set_data(path, data, *version),
            Op::Delete { path, version } => multi.add_delete(path, *version),
            Op::Check { path, version } => multi.add_check_version(path, *version),
        };
        if let Err(source) = added {
            return Box::pin(std::future::ready(Err(EngineError::WriteFailed {
                op: op.describe(),
                source,
            })));
        }
    }
    let described: Vec<(String, String)> = ops
        .iter()
        .map(|op| (op.describe(), op.path().to_string()))
        .collect();
    let sent = multi.commit();
    Box::pin(async move { sent.await.map_err(|err| classify(err, &described)) })
}

fn is_lost(err: &zk::Error) -> bool {
    matches!(err, zk::Error::SessionExpired | zk::Error::ClientClosed)
}

fn classify(err: zk::MultiWriteError, described: &[(String, String)]) -> EngineError {
    match err {
        zk::MultiWriteError::OperationFailed { index, source } => {
            let (op, path) = described
                .get(index)
                .cloned()
                .unwrap_or_else(|| (format!("operation {index}"), String::new()));
            if is_precondition(&source) {
                EngineError::Precondition {
                    op,
                    index,
                    path,
                    source,
                }
            } else if is_lost(&source) {
                EngineError::SessionLost(source.to_string())
            } else {
                EngineError::WriteFailed { op, source }
            }
        }
        zk::MultiWriteError::RequestFailed { source } => {
            if is_lost(&source) {
                EngineError::SessionLost(source.to_string())
            } else {
                EngineError::WriteFailed {
                    op: format!("multi of {} operations", described.len()),
                    source,
                }
            }
        }
    }
}

/// Awaits requests that were all sent when their futures were made (zookeeper-client
/// sends on call), so N requests cost about one round trip: ZooKeeper pipelining.
pub async fn await_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        out.push(f.await);
    }
    out
}
