//! State queues: `/queues/{state}` whose children sort in processing order.

use znode_schema::paths;
use znode_schema::queue_key::QueueEntry;
use znode_schema::JobState;

use crate::error::Result;
use crate::session::Session;
use crate::store;

/// The queue's entries in processing order. Names that do not decode are returned
/// separately so `fsck` can report them; consumers skip them.
pub async fn list(session: &Session, state: JobState) -> Result<(Vec<QueueEntry>, Vec<String>)> {
    let names = store::children(session, &paths::queue(state)).await?;
    let mut entries = Vec::with_capacity(names.len());
    let mut bad = Vec::new();
    for name in names {
        match QueueEntry::parse(&name) {
            Ok(entry) => entries.push(entry),
            Err(_) => bad.push(name),
        }
    }
    Ok((entries, bad))
}

/// Number of entries in a queue.
pub async fn len(session: &Session, state: JobState) -> Result<usize> {
    let stat = store::exists(session, &paths::queue(state)).await?;
    Ok(stat.map(|s| s.num_children.max(0) as usize).unwrap_or(0))
}
