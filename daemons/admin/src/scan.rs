//! Reading many nodes at once. Requests are pipelined in batches (every request of a
//! batch is sent before the first answer is awaited), so a scan of thousands of nodes
//! costs a few round trips, and a [`Progress`] is told how far it got.

use archivist_engine::schema::records::{self, Record, RecordError};
use archivist_engine::{store, zk, EngineError, Session};
use serde::Serialize;

use crate::error::Result;
use crate::settings::{AdminSettings, Progress};

/// The parts of a node's stat that admin reports show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeStat {
    /// Data version (number of writes).
    pub version: i32,
    /// Creation time, ZooKeeper's clock, unix ms.
    pub ctime_ms: i64,
    /// Last write time, ZooKeeper's clock, unix ms.
    pub mtime_ms: i64,
    /// Number of children.
    pub children: i32,
    /// Data size in bytes.
    pub bytes: i32,
    /// Session owning the node if it is ephemeral (0 otherwise).
    pub ephemeral_owner: i64,
}

impl From<&zk::Stat> for NodeStat {
    fn from(stat: &zk::Stat) -> Self {
        NodeStat {
            version: stat.version,
            ctime_ms: stat.ctime,
            mtime_ms: stat.mtime,
            children: stat.num_children,
            bytes: stat.data_length,
            ephemeral_owner: stat.ephemeral_owner,
        }
    }
}

impl NodeStat {
    /// The owning session as ZooKeeper prints it (`0x...`), if ephemeral.
    pub fn owner_hex(&self) -> Option<String> {
        (self.ephemeral_owner != 0).then(|| format!("{:#x}", self.ephemeral_owner))
    }
}

/// A node read during a scan: its name, stat and decoded record (or why it does not
/// decode, so `fsck` can report it instead of the scan failing).
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// Last path segment.
    pub name: String,
    /// Full path (relative to the chroot).
    pub path: String,
    /// Its stat.
    pub stat: NodeStat,
    /// The record, or the decode error.
    pub record: Result<T, RecordError>,
}

impl<T> Loaded<T> {
    /// The record if it decoded.
    pub fn ok(&self) -> Option<&T> {
        self.record.as_ref().ok()
    }
}

/// Raw data and stat of many nodes, in the order given; `None` for nodes that vanished.
pub async fn read_raw_many(
    session: &Session,
    paths: &[String],
    settings: &AdminSettings,
    progress: &dyn Progress,
    what: &str,
) -> Result<Vec<Option<(Vec<u8>, zk::Stat)>>> {
    progress.begin(what, paths.len() as u64);
    let mut out = Vec::with_capacity(paths.len());
    for chunk in paths.chunks(settings.batch_size.max(1)) {
        let futures: Vec<_> = chunk.iter().map(|p| session.client().get_data(p)).collect();
        for (path, result) in chunk
            .iter()
            .zip(archivist_engine::ops::await_all(futures).await)
        {
            match result {
                Ok(found) => out.push(Some(found)),
                Err(zk::Error::NoNode) => out.push(None),
                Err(e) => {
                    progress.end();
                    return Err(EngineError::zk("get", path.as_str(), e).into());
                }
            }
        }
        progress.advance(chunk.len() as u64);
    }
    progress.end();
    Ok(out)
}

/// Stats of many nodes, in the order given; `None` for nodes that do not exist.
pub async fn stat_many(
    session: &Session,
    paths: &[String],
    settings: &AdminSettings,
) -> Result<Vec<Option<zk::Stat>>> {
    let mut out = Vec::with_capacity(paths.len());
    for chunk in paths.chunks(settings.batch_size.max(1)) {
        let futures: Vec<_> = chunk
            .iter()
            .map(|p| session.client().check_stat(p))
            .collect();
        for (path, result) in chunk
            .iter()
            .zip(archivist_engine::ops::await_all(futures).await)
        {
            out.push(result.map_err(|e| EngineError::zk("stat", path.as_str(), e))?);
        }
    }
    Ok(out)
}

/// Reads and decodes the records at `paths`; vanished nodes are left out.
pub async fn load<T: Record>(
    session: &Session,
    paths: Vec<String>,
    settings: &AdminSettings,
    progress: &dyn Progress,
    what: &str,
) -> Result<Vec<Loaded<T>>> {
    let raw = read_raw_many(session, &paths, settings, progress, what).await?;
    Ok(paths
        .into_iter()
        .zip(raw)
        .filter_map(|(path, found)| {
            let (bytes, stat) = found?;
            let name = path.rsplit('/').next().unwrap_or_default().to_string();
            let record = records::decode::<T>(&path, &bytes);
            Some(Loaded {
                name,
                path,
                stat: NodeStat::from(&stat),
                record,
            })
        })
        .collect())
}

/// Reads and decodes every child of `dir`.
pub async fn load_dir<T: Record>(
    session: &Session,
    dir: &str,
    settings: &AdminSettings,
    progress: &dyn Progress,
) -> Result<Vec<Loaded<T>>> {
    let paths = store::children(session, dir)
        .await?
        .into_iter()
        .map(|name| format!("{dir}/{name}"))
        .collect();
    load(session, paths, settings, progress, dir).await
}

/// Number of children of a node (0 if it does not exist), without listing them.
pub async fn count_children(session: &Session, path: &str) -> Result<usize> {
    Ok(store::exists(session, path)
        .await?
        .map(|s| usize::try_from(s.num_children).unwrap_or(0))
        .unwrap_or(0))
}
