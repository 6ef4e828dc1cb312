//! Many ZooKeeper requests in flight at once.
//!
//! zookeeper-client sends a request when its future is created, and one session's
//! requests are applied in the order they were sent. So building N futures first and
//! awaiting them afterwards costs about one round trip instead of N
//! (`archivist_engine::ops::await_all`). The multis here are built directly on the client
//! (instead of through the `async fn` `ops::commit`, which sends only when polled) so the
//! send order is exactly the order of the calls: creating multis rely on it, each one
//! expecting the counter version the previous one leaves.

use std::future::Future;
use std::pin::Pin;

use archivist_engine::ops::{Mode, Op};
use archivist_engine::zk;
use archivist_engine::{EngineError, Session};

/// A multi already sent, waiting for its answer.
pub(crate) type SentMulti<'a> = Pin<Box<dyn Future<Output = Result<(), EngineError>> + Send + 'a>>;

fn is_precondition(err: &zk::Error) -> bool {
    matches!(
        err,
        zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists | zk::Error::NotEmpty
    )
}

fn is_lost(err: &zk::Error) -> bool {
    matches!(err, zk::Error::SessionExpired | zk::Error::ClientClosed)
}

fn map_error(err: zk::MultiWriteError, described: &[String]) -> EngineError {
    match err {
        zk::MultiWriteError::OperationFailed { index, source } => {
            let op = described
                .get(index)
                .cloned()
                .unwrap_or_else(|| format!("operation {index}"));
            if is_precondition(&source) {
                EngineError::Precondition { op, source }
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

/// Sends `ops` as one multi now; the returned future yields its outcome. Errors are
/// classified like `archivist_engine::ops::commit` (a failed check is
/// [`EngineError::Precondition`] naming the operation).
pub(crate) fn send_multi<'a>(session: &'a Session, ops: &[Op]) -> SentMulti<'a> {
    if let Err(e) = session.ensure_alive() {
        return Box::pin(std::future::ready(Err(e)));
    }
    let client = session.client();
    let mut multi = client.new_multi_writer();
    let persistent = session.create_options(zk::CreateMode::Persistent);
    let ephemeral = session.create_options(zk::CreateMode::Ephemeral);
    for op in ops {
        let added = match op {
            Op::Create { path, data, mode } => {
                let options = match mode {
                    Mode::Persistent => &persistent,
                    Mode::Ephemeral => &ephemeral,
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
    let described: Vec<String> = ops.iter().map(Op::describe).collect();
    let sent = multi.commit();
    Box::pin(async move { sent.await.map(|_| ()).map_err(|e| map_error(e, &described)) })
}

/// A node's data and stat, `None` when it does not exist.
pub(crate) type Read = Option<(Vec<u8>, zk::Stat)>;

/// Reads many nodes, `window` requests in flight at a time; results in input order.
pub(crate) async fn read_many(
    session: &Session,
    paths: &[String],
    window: usize,
) -> Result<Vec<Read>, EngineError> {
    session.ensure_alive()?;
    let mut out = Vec::with_capacity(paths.len());
    for group in paths.chunks(window.max(1)) {
        let sent: Vec<_> = group
            .iter()
            .map(|path| session.client().get_data(path))
            .collect();
        for (path, result) in group
            .iter()
            .zip(archivist_engine::ops::await_all(sent).await)
        {
            match result {
                Ok(found) => out.push(Some(found)),
                Err(zk::Error::NoNode) => out.push(None),
                Err(e) => return Err(EngineError::zk("get", path.as_str(), e)),
            }
        }
    }
    Ok(out)
}
