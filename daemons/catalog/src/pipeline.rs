//! Many ZooKeeper reads in flight at once (re-ordering pending jobs).
//!
//! zookeeper-client sends a request when its future is created, and one session's
//! requests are applied in the order they were sent. So building N futures first and
//! awaiting them afterwards costs about one round trip instead of N
//! (`archivist_engine::ops::await_all`).

use archivist_engine::zk;
use archivist_engine::{EngineError, Session};

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
