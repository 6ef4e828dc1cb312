//! Typed reads and writes of YAML records, with the path in every error.

use znode_schema::records::{self, Record, RecordError};
use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::session::Session;

/// Reads and decodes a record; `None` if the node does not exist.
pub async fn read<T: Record>(session: &Session, path: &str) -> Result<Option<(T, zk::Stat)>> {
    match session.client().get_data(path).await {
        Ok((bytes, stat)) => Ok(Some((records::decode(path, &bytes)?, stat))),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(EngineError::zk("get", path, e)),
    }
}

/// [`read`], sent again while its reply is lost (for at most the session timeout plus
/// the connect timeout, [`crate::lock::while_reply_lost`]): for the reads a process
/// starts with, which a connection reset must not turn into an exit (outside 17n M3:
/// every daemon exited 1 "get /meta: Connection reset by peer" when the reply to its
/// first read was lost). A read is safe to send again.
pub async fn read_patiently<T: Record>(
    session: &Session,
    path: &str,
) -> Result<Option<(T, zk::Stat)>> {
    crate::lock::while_reply_lost(session, || read(session, path)).await
}

/// Reads and decodes a record that must exist.
pub async fn read_required<T: Record>(session: &Session, path: &str) -> Result<(T, zk::Stat)> {
    read(session, path)
        .await?
        .ok_or_else(|| EngineError::NotFound(path.to_string()))
}

/// Raw data of a node; `None` if it does not exist.
pub async fn read_raw(session: &Session, path: &str) -> Result<Option<(Vec<u8>, zk::Stat)>> {
    match session.client().get_data(path).await {
        Ok(found) => Ok(Some(found)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(EngineError::zk("get", path, e)),
    }
}

/// Encodes a record for writing at `path`.
pub fn encode<T: Record>(path: &str, record: &T) -> Result<Vec<u8>> {
    Ok(records::encode(path, record)?)
}

/// Children names, sorted; empty if the node does not exist.
pub async fn children(session: &Session, path: &str) -> Result<Vec<String>> {
    match session.client().list_children(path).await {
        Ok(mut names) => {
            names.sort_unstable();
            Ok(names)
        }
        Err(zk::Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(EngineError::zk("list", path, e)),
    }
}

/// The node's stat, if it exists.
pub async fn exists(session: &Session, path: &str) -> Result<Option<zk::Stat>> {
    session
        .client()
        .check_stat(path)
        .await
        .map_err(|e| EngineError::zk("stat", path, e))
}

/// Creates a persistent node with a record; `false` if it already existed.
pub async fn create_if_absent<T: Record>(
    session: &Session,
    path: &str,
    record: &T,
) -> Result<bool> {
    let data = encode(path, record)?;
    let options = session.create_options(zk::CreateMode::Persistent);
    match session.client().create(path, &data, &options).await {
        Ok(_) => Ok(true),
        Err(zk::Error::NodeExists) => Ok(false),
        Err(e) => Err(EngineError::zk("create", path, e)),
    }
}

/// Deletes a node if present (any version); `false` if it was not there.
///
/// A delete whose reply was lost is sent again ([`crate::lock::while_reply_lost`]); if
/// the node is gone then, the lost one deleted it: true (outside 17m L1: `resume` and
/// `release --episode` exited 1 "connection reset" after doing what they were asked).
pub async fn delete_if_present(session: &Session, path: &str) -> Result<bool> {
    let lost = std::sync::atomic::AtomicBool::new(false);
    crate::lock::while_reply_lost(session, || async {
        match session.client().delete(path, None).await {
            Ok(()) => Ok(true),
            Err(zk::Error::NoNode) => Ok(lost.load(std::sync::atomic::Ordering::SeqCst)),
            Err(e) => {
                if crate::error::reply_may_be_lost(&e) {
                    lost.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                Err(EngineError::zk("delete", path, e))
            }
        }
    })
    .await
}

/// Reads and decodes many records with every request in flight at once (ZooKeeper
/// pipelining: a few round trips for thousands of nodes), `chunk` requests at a time.
/// Missing nodes give `None`; an undecodable record is an error naming its path.
pub async fn read_many<T: Record>(
    session: &Session,
    paths: &[String],
    chunk: usize,
) -> Result<Vec<Option<(T, zk::Stat)>>> {
    read_many_lenient(session, paths, chunk)
        .await?
        .into_iter()
        .map(|found| match found {
            Some((Ok(record), stat)) => Ok(Some((record, stat))),
            Some((Err(e), _)) => Err(e.into()),
            None => Ok(None),
        })
        .collect()
}

/// [`read_many`] for callers that can go on without a bad record (a daemon scanning
/// many nodes must not stop because one was hand-edited): the records that decode, in
/// order; each undecodable one is logged with its path and left out (`archivist fsck`
/// reports it), and missing nodes are left out too.
///
/// # Errors
/// ZooKeeper failures only.
pub async fn read_many_readable<T: Record>(
    session: &Session,
    paths: &[String],
    chunk: usize,
) -> Result<Vec<T>> {
    Ok(read_many_lenient(session, paths, chunk)
        .await?
        .into_iter()
        .flatten()
        .filter_map(|(record, _)| match record {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(error = %e, "unreadable record left out (run `archivist fsck`)");
                None
            }
        })
        .collect())
}

/// [`read_many`] for callers that can go on without a bad record (a daemon scanning
/// many nodes must not stop because one was hand-edited): each record's decode result
/// is given as it is.
///
/// # Errors
/// ZooKeeper failures only.
pub async fn read_many_lenient<T: Record>(
    session: &Session,
    paths: &[String],
    chunk: usize,
) -> Result<Vec<Option<(std::result::Result<T, RecordError>, zk::Stat)>>> {
    let mut out = Vec::with_capacity(paths.len());
    for part in paths.chunks(chunk.max(1)) {
        let futures: Vec<_> = part.iter().map(|p| session.client().get_data(p)).collect();
        for (path, result) in part.iter().zip(crate::ops::await_all(futures).await) {
            match result {
                Ok((bytes, stat)) => out.push(Some((records::decode(path, &bytes), stat))),
                Err(zk::Error::NoNode) => out.push(None),
                Err(e) => return Err(EngineError::zk("get", path.as_str(), e)),
            }
        }
    }
    Ok(out)
}
