//! The consumers of one state's queue, and this consumer's share of its head.
//!
//! Consumers that all claim from the head of the same queue race for the same locks: each
//! lost race is a failed create, a logged write on the server, and a round trip. So every
//! consumer loop joins `/consumers/{state}` with an ephemeral node, keeps the member list
//! current with a persistent watch, and claims first the entries whose job id hashes to
//! its rank among the members ([`Share::owns`]). It still takes other entries when its own
//! share of the window runs out (work is never left waiting for an absent or busy owner),
//! and the lock and re-check rule is unchanged: the share only decides where to look first.

use znode_schema::paths;
use znode_schema::records::ConsumerRecord;
use znode_schema::JobState;
use znode_schema::SCHEMA_VERSION;
use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::queue;
use crate::session::Session;
use crate::store;

/// This consumer's place among a state's consumers: `rank` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Position of this consumer in the members' name order.
    pub rank: usize,
    /// Number of live consumers of the state (at least 1).
    pub count: usize,
}

impl Share {
    /// The whole queue (a lone consumer, or membership unknown).
    pub const WHOLE: Share = Share { rank: 0, count: 1 };

    /// Is `job` in this consumer's share? Every job is in exactly one share for a given
    /// member count (a stable hash of the id modulo the count).
    pub fn owns(&self, job: &str) -> bool {
        self.count <= 1 || bucket(job, self.count) == self.rank
    }
}

/// A stable bucket for a job id (the same in every process and build).
fn bucket(job: &str, count: usize) -> usize {
    (fnv1a(job.as_bytes()) % count.max(1) as u64) as usize
}

/// 64-bit FNV-1a: std's hashers are not guaranteed stable across releases, and every
/// consumer must compute the same shares.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Membership of one consumer loop in `/consumers/{state}`.
pub struct ConsumerGroup {
    dir: String,
    name: String,
    share: Share,
    watcher: Option<zk::PersistentWatcher>,
    stale: bool,
    dead: bool,
}

impl std::fmt::Debug for ConsumerGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerGroup")
            .field("dir", &self.dir)
            .field("name", &self.name)
            .field("share", &self.share)
            .finish()
    }
}

impl ConsumerGroup {
    /// Joins the consumers of `state` as `owner` (its node, `<owner>-<session>`, goes with
    /// the session). Creates `/consumers/{state}` if the tree predates it.
    pub async fn join(
        session: &Session,
        state: JobState,
        owner: &str,
        slots: usize,
    ) -> Result<ConsumerGroup> {
        let dir = paths::consumers(state);
        let name = format!("{owner}-{}", session.id());
        let path = paths::consumer(state, &name);
        let record = ConsumerRecord {
            schema: SCHEMA_VERSION,
            owner: owner.to_string(),
            session: session.id(),
            slots: u32::try_from(slots).unwrap_or(u32::MAX),
            since: crate::clock::stamp_now(),
        };
        let data = store::encode(&path, &record)?;
        let ephemeral = session.create_options(zk::CreateMode::Ephemeral);
        for attempt in 0..2 {
            match session.client().create(&path, &data, &ephemeral).await {
                Ok(_) | Err(zk::Error::NodeExists) => break,
                Err(zk::Error::NoNode) if attempt == 0 => {
                    // A tree initialised before consumer groups existed.
                    let persistent = session.create_options(zk::CreateMode::Persistent);
                    for d in [paths::CONSUMERS.to_string(), dir.clone()] {
                        match session.client().create(&d, b"", &persistent).await {
                            Ok(_) | Err(zk::Error::NodeExists) => {}
                            Err(e) => return Err(EngineError::zk("create", &d, e)),
                        }
                    }
                }
                Err(e) => return Err(EngineError::zk("create", &path, e)),
            }
        }
        let mut group = ConsumerGroup {
            dir,
            name,
            share: Share::WHOLE,
            watcher: None,
            stale: true,
            dead: false,
        };
        group.sync(session).await?;
        Ok(group)
    }

    /// This consumer's share, re-listing the members if the watch said they changed.
    /// On a listing error the last known share is kept (it only steers where to look).
    pub async fn share(&mut self, session: &Session) -> Share {
        if let Err(e) = self.sync(session).await {
            tracing::debug!(error = %e, dir = %self.dir, "consumer list not refreshed");
        }
        self.share
    }

    async fn sync(&mut self, session: &Session) -> Result<()> {
        while let Some(event) = self.watcher.as_mut().and_then(queue::arrived) {
            if queue::is_terminal(&event) {
                self.dead = true;
                self.watcher = None;
            }
            self.stale = true;
        }
        if !self.stale {
            return Ok(());
        }
        if self.watcher.is_none() && !self.dead {
            let watcher = session
                .client()
                .watch(&self.dir, zk::AddWatchMode::Persistent)
                .await
                .map_err(|e| EngineError::zk("watch", &self.dir, e))?;
            self.watcher = Some(watcher);
        }
        let mut members = store::children(session, &self.dir).await?;
        members.sort();
        self.share = match members.iter().position(|m| *m == self.name) {
            Some(rank) => Share {
                rank,
                count: members.len(),
            },
            // Not (or no longer) listed: claim from the whole queue.
            None => Share::WHOLE,
        };
        // With no watch (the session ended), list on every call.
        self.stale = self.watcher.is_none();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_is_in_exactly_one_share() {
        for count in 1..6 {
            for i in 0..200 {
                let job = format!("j{i:010}");
                let owners = (0..count)
                    .filter(|&rank| Share { rank, count }.owns(&job))
                    .count();
                assert_eq!(owners, 1, "{job} with {count} consumers");
            }
        }
    }

    #[test]
    fn shares_are_roughly_even() {
        let count = 4;
        let mut sizes = [0usize; 4];
        for i in 0..4000 {
            sizes[bucket(&format!("j{i:010}"), count)] += 1;
        }
        for size in sizes {
            assert!((800..1200).contains(&size), "{sizes:?}");
        }
    }

    #[test]
    fn the_hash_is_fnv1a() {
        // Published FNV-1a 64 test vectors: processes of different builds must agree.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
