//! Id counters: `/counters/{jobs,batches,episodes,clips}`.
//!
//! The one rule for numbered ids: the next id is its counter's data version plus one,
//! taken by a multi that writes the counter at that version and creates the node the id
//! names, so two writers never take the same id. A counter can fall behind the ids in
//! use (deleted by hand, or re-created at version 0 by an `init` that saw it missing);
//! then the node the next id names already exists and the same multi would fail the same
//! way forever. This module owns the way out: [`catch_up`] moves a counter past every id
//! in use in a few multis (each a chain of version-checked writes), `init` calls it for
//! every counter so it never leaves one behind, allocators call it when the id they took
//! is in use, and `fsck` uses [`behind`] to report a counter behind its ids.
//!
//! "In use" is the tree's ids and the ids the research archive (the database) holds
//! ([`Archived`]): the reaper deletes recorded jobs after its retention while the archive
//! names their job ids for ever, so a job counter moved back past them would re-issue an
//! archived id with no node in the tree to collide with (outside 17g finding 3). Callers
//! with a database read [`Archived`] from it; the rule that adds it is [`in_use`].

use znode_schema::paths;

use crate::error::{EngineError, Result};
use crate::ops::{self, Op};
use crate::session::Session;
use crate::store;

/// Version-checked counter writes per multi when a counter is moved forward (each is a
/// few dozen bytes; ZooKeeper's request limit is a megabyte).
const CHAIN: usize = 500;

/// A counter and where the ids it numbers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// The counter node.
    pub path: &'static str,
    /// Directories whose children are named by the ids (or start with them, as
    /// `/leases/{job}`), all of which count as "in use".
    pub dirs: &'static [&'static str],
    /// The id's letter (`j10...`: `j`).
    pub prefix: char,
}

impl Counter {
    /// The directory of the records the counter numbers (`/jobs`, ...): a counter behind
    /// one of those is what `fsck` reports. The other directories only keep allocation
    /// from reusing a stale lease's or report's id.
    pub fn records_dir(&self) -> &'static str {
        self.dirs[0]
    }

    /// The id number a child name carries (`j0000000042` and `j0000000042-c000001`: 42).
    pub fn number_of(&self, name: &str) -> Option<u64> {
        let digits: String = name
            .strip_prefix(self.prefix)?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
}

/// Jobs: `/jobs/{job}`, and the leases and reports named after them (a stale lease or
/// report of a deleted job must not be mistaken for a new job's).
pub const JOBS: Counter = Counter {
    path: paths::JOB_COUNTER,
    dirs: &[paths::JOBS, paths::LEASES, paths::REPORTS],
    prefix: 'j',
};
/// Batches: `/batches/{batch}`.
pub const BATCHES: Counter = Counter {
    path: paths::BATCH_COUNTER,
    dirs: &[paths::BATCHES],
    prefix: 'b',
};
/// Episodes: `/catalog/episodes/{episode}`.
pub const EPISODES: Counter = Counter {
    path: paths::EPISODE_COUNTER,
    dirs: &[paths::EPISODES],
    prefix: 'e',
};
/// Clips: `/catalog/clips/{clip}`.
pub const CLIPS: Counter = Counter {
    path: paths::CLIP_COUNTER,
    dirs: &[paths::CLIPS],
    prefix: 'c',
};
/// Every counter of the tree.
pub const ALL: [Counter; 4] = [JOBS, BATCHES, EPISODES, CLIPS];

/// The highest id numbers held outside the tree, per counter: the research archive's
/// highest job id (`archivist_db::research::highest_job`). The engine has no database;
/// the planner, `init` and `fsck` read it and pass it in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Archived {
    /// The highest job number the research archive names (0: none).
    pub jobs: u64,
}

impl Archived {
    /// Nothing archived (no database at hand, or an empty one).
    pub const NONE: Archived = Archived { jobs: 0 };

    /// From the archive's highest job id (`None`: no runs).
    pub fn from_highest_job(job: Option<&str>) -> Self {
        Archived {
            jobs: job.and_then(|j| JOBS.number_of(j)).unwrap_or(0),
        }
    }

    /// The highest id number archived for `counter` (0 for counters the archive does
    /// not number).
    pub fn of(&self, counter: &Counter) -> u64 {
        if counter.path == JOBS.path {
            self.jobs
        } else {
            0
        }
    }
}

/// The one rule for "ids in use": the highest of the tree's (`in_tree`) and the
/// archive's.
pub fn in_use(counter: &Counter, in_tree: u64, archived: &Archived) -> u64 {
    in_tree.max(archived.of(counter))
}

/// The highest id number in use among children names (0 when none).
pub fn max_number<'a>(counter: &Counter, names: impl IntoIterator<Item = &'a str>) -> u64 {
    names
        .into_iter()
        .filter_map(|n| counter.number_of(n))
        .max()
        .unwrap_or(0)
}

/// The highest id number in use under the counter's directories and in the archive
/// (0 when none).
pub async fn max_in_use(session: &Session, counter: &Counter, archived: &Archived) -> Result<u64> {
    let mut max = 0;
    for dir in counter.dirs {
        let names = store::children(session, dir).await?;
        max = max.max(max_number(counter, names.iter().map(String::as_str)));
    }
    Ok(in_use(counter, max, archived))
}

/// A counter behind its ids: its version, and the highest id number in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Behind {
    /// The counter's data version (the next id is this plus one).
    pub version: i32,
    /// The highest id number in use.
    pub max_in_use: u64,
}

/// Is the counter at `version` behind ids in use up to `max_in_use` (the next id it
/// gives would be one already taken, or older than one taken)?
pub fn behind(version: i32, max_in_use: u64) -> Option<Behind> {
    (u64::try_from(version).unwrap_or(0) < max_in_use).then_some(Behind {
        version,
        max_in_use,
    })
}

/// Moves the counter forward until its next id is past every id in use; returns how far
/// it moved (`None`: it was not behind). Each step is one multi of version-checked
/// writes; a concurrent allocator moving it too is fine (the counter only goes forward).
///
/// # Errors
/// [`EngineError::NotInitialised`] when the counter does not exist; ZooKeeper failures.
pub async fn catch_up(
    session: &Session,
    counter: &Counter,
    archived: &Archived,
) -> Result<Option<(i32, i32)>> {
    let max = max_in_use(session, counter, archived).await?;
    let target = i32::try_from(max).map_err(|_| {
        EngineError::Config(format!(
            "{}: ids in use reach {max}, past what a counter version can number",
            counter.path
        ))
    })?;
    let mut first = None;
    loop {
        let version = store::exists(session, counter.path)
            .await?
            .ok_or_else(|| EngineError::NotInitialised {
                chroot: session.chroot().to_string(),
                missing: counter.path.to_string(),
            })?
            .version;
        if version >= target {
            return Ok(first.map(|from| (from, version)));
        }
        first.get_or_insert(version);
        let steps = usize::try_from(target - version).unwrap_or(0).min(CHAIN);
        let chain: Vec<Op> = (0..steps)
            .map(|i| Op::SetData {
                path: counter.path.to_string(),
                data: Vec::new(),
                version: Some(version + i as i32),
            })
            .collect();
        match ops::commit(session, &chain).await {
            Ok(_) => {}
            // Another writer took an id meanwhile: re-read and go on from there.
            Err(e) if e.is_conflict() => {}
            Err(e) => return Err(e),
        }
    }
}

/// Re-creates a missing counter and moves it past the ids in use (what `fsck --repair`
/// does for a counter deleted by hand; `init` does the same for every counter). Returns
/// whether it created the node.
///
/// # Errors
/// ZooKeeper failures (e.g. `/counters` itself missing: run `archivist init`); as
/// [`catch_up`].
pub async fn recreate(session: &Session, counter: &Counter, archived: &Archived) -> Result<bool> {
    let options = session.create_options(crate::zk::CreateMode::Persistent);
    let created = match session.client().create(counter.path, b"", &options).await {
        Ok(_) => true,
        Err(crate::zk::Error::NodeExists) => false,
        Err(e) => return Err(EngineError::zk("create", counter.path, e)),
    };
    catch_up(session, counter, archived).await?;
    Ok(created)
}

/// Is `err` the sign of a counter behind its ids: a multi that took the counter's next
/// id failed because the record that id names already exists? Returns that path.
pub fn taken_id<'e>(counter: &Counter, err: &'e EngineError) -> Option<&'e str> {
    match err {
        EngineError::Precondition {
            path,
            source: zookeeper_client::Error::NodeExists,
            ..
        } if counter.dirs.iter().any(|dir| {
            path.strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
        }) =>
        {
            Some(path)
        }
        _ => None,
    }
}

/// What every allocator does when the id it took is in use ([`taken_id`]): moves the
/// counter past the ids in use ([`catch_up`]) and says so, so the next attempt makes
/// progress instead of failing the same way forever. `what` names the allocation for
/// the log (a job's episode, a batch's name, a curated item).
///
/// # Errors
/// [`EngineError::Config`] when `taken` exists yet the counter is not behind (nothing
/// to skip: retrying would spin; `archivist fsck` names the cause); as [`catch_up`].
pub async fn skip_taken(
    session: &Session,
    counter: &Counter,
    taken: &str,
    what: &str,
    archived: &Archived,
) -> Result<(i32, i32)> {
    let moved = catch_up(session, counter, archived).await?;
    tracing::warn!(
        counter = counter.path,
        exists = %taken,
        for_ = %what,
        moved = ?moved,
        "id counter was behind the ids in use; moved it past them"
    );
    moved.ok_or_else(|| {
        EngineError::Config(format!(
            "{taken} exists but {} is not behind the ids in use; run `archivist fsck`",
            counter.path
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_from_ids_and_names_built_on_them() {
        assert_eq!(JOBS.number_of("j0000000042"), Some(42));
        assert_eq!(JOBS.number_of("j0000000042-c000001"), Some(42));
        assert_eq!(JOBS.number_of("x0000000042"), None);
        assert_eq!(EPISODES.number_of("e0000007"), Some(7));
        assert_eq!(
            max_number(&JOBS, ["j0000000003", "j0000000010", "junk"]),
            10
        );
        assert_eq!(behind(3, 10).map(|b| b.max_in_use), Some(10));
        assert_eq!(behind(10, 10), None);
        assert_eq!(behind(0, 0), None);
        let archived = Archived::from_highest_job(Some("j0000000042"));
        assert_eq!(in_use(&JOBS, 10, &archived), 42);
        assert_eq!(in_use(&JOBS, 50, &archived), 50);
        assert_eq!(in_use(&EPISODES, 10, &archived), 10);
        assert_eq!(Archived::from_highest_job(None), Archived::NONE);
    }
}
