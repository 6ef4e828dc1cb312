//! The planner's in-memory index of catalog, research state, leases and blocking jobs.
//!
//! Scanning ZooKeeper on every pick cannot choose one work item out of 20M (episode,
//! clip) pairs in 50 ms, so the planner loads the tree once into this index and keeps it
//! current from watch events ([`crate::load`]). The index itself knows nothing about
//! ZooKeeper: it is fed records and answers [`Index::pick`].
//!
//! Per episode it keeps two bitsets over clip numbers: `researched` (from the research
//! record) and `blocked` (clips under an active lease, or in a job that is `pending`,
//! `held` or `failed`). A clip can be planned for an episode when it is an active catalog
//! clip (present, not held) in neither set. Episodes are kept in selection order
//! (priority descending, initial curation descending, id), held ones left out, and clips
//! in a sorted list by the same rule. Each episode also keeps its count of free clips
//! (active, not researched, not blocked), and the episodes with a free clip are kept in a
//! second ordered set, so choosing the episode is taking the first element of that set
//! (O(log n), however many complete episodes come before it), and choosing its clips is a
//! walk of the clip list. Counts are recomputed per episode when its research, leases or
//! jobs change (a few word operations), and for every episode when the clip catalog
//! changes (about a millisecond at 10k episodes x 2k clips).

mod bits;
mod pick;

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use archivist_engine::schema::JobState;

pub use bits::Bits;
pub use pick::Pick;

/// What the planner needs from an episode record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeInfo {
    /// Higher first.
    pub priority: i64,
    /// Initial curation, unix ms (newer first within a priority).
    pub curated_ms: i64,
    /// Held by an operator: plan nothing for it.
    pub held: bool,
    /// Copied into the job so a researcher need not read the catalog.
    pub media_url: String,
}

/// What the planner needs from a clip record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClipInfo {
    /// Clip id as the catalog names it.
    pub id: String,
    /// Higher first.
    pub priority: i64,
    /// Initial curation, unix ms (newer first within a priority).
    pub curated_ms: i64,
    /// Held by an operator: plan it for no episode.
    pub held: bool,
}

/// A per-clip error in an episode's research record: open again once the clip changes
/// (`archivist_engine::schema::records::error_reopened`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorMark {
    /// Clip number.
    pub clip: u32,
    /// The clip stamp the error was made with (none for errors stored before stamps).
    pub stamp: Option<String>,
    /// When the run holding it started.
    pub run_at: Option<time::OffsetDateTime>,
}

/// Sizes of the index, for logs, metrics and the benchmark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Episodes in the catalog.
    pub episodes: usize,
    /// Episodes that can be planned (in the catalog and not held).
    pub plannable_episodes: usize,
    /// Plannable episodes with a free clip right now.
    pub open_episodes: usize,
    /// Clips that can be planned (in the catalog and not held).
    pub active_clips: usize,
    /// Leases known.
    pub leases: usize,
    /// Leases not expired at the index's clock.
    pub active_leases: usize,
    /// Jobs in `pending`, `held` or `failed` whose clips are kept out of planning.
    pub blocking_jobs: usize,
    /// (episode, clip) pairs the catalog asks for: plannable episodes x active clips.
    pub pairs: u64,
    /// Of those, pairs whose research record already covers the clip.
    pub pairs_researched: u64,
    /// Of those, pairs neither researched nor under a lease or waiting job: not planned yet.
    pub pairs_unplanned: u64,
    /// Approximate bytes the index holds on the heap.
    pub heap_bytes: usize,
}

type EpisodeKey = (Reverse<i64>, Reverse<i64>, String, usize);

#[derive(Debug, Default)]
struct EpisodeSlot {
    id: String,
    info: Option<EpisodeInfo>,
    free: u32,
    open: bool,
    researched: Bits,
    blocked: Bits,
    errors: Vec<ErrorMark>,
    leases: Vec<String>,
    jobs: Vec<String>,
    /// Its research record exists but does not decode: what was researched is unknown,
    /// so nothing is planned for it (planning would repeat work the recorder cannot
    /// store) until an operator repairs the record (`fsck` and `status` report it).
    unreadable: bool,
}

#[derive(Debug, Clone)]
struct LeaseEntry {
    episode: String,
    clips: Vec<u32>,
    expires_ms: i64,
    counted: bool,
}

#[derive(Debug, Clone)]
struct JobEntry {
    episode: String,
    clips: Vec<u32>,
    states: Vec<JobState>,
}

/// The index. See the module docs.
#[derive(Debug, Default)]
pub struct Index {
    episodes: Vec<EpisodeSlot>,
    slots: HashMap<String, usize>,
    order: BTreeSet<EpisodeKey>,
    open: BTreeSet<EpisodeKey>,
    clips: Vec<Option<ClipInfo>>,
    active: Bits,
    clip_order: Vec<u32>,
    clip_order_dirty: bool,
    leases: HashMap<String, LeaseEntry>,
    counted: BTreeSet<(i64, String)>,
    jobs: HashMap<String, JobEntry>,
    /// Per clip number: its stamp and latest curation, to re-open stale errors.
    clip_stamps: HashMap<u32, (String, time::OffsetDateTime)>,
    now_ms: i64,
}

impl Index {
    /// An empty index.
    pub fn new() -> Index {
        Index::default()
    }

    fn slot(&mut self, episode: &str) -> usize {
        if let Some(&slot) = self.slots.get(episode) {
            return slot;
        }
        let slot = self.episodes.len();
        self.episodes.push(EpisodeSlot {
            id: episode.to_string(),
            ..EpisodeSlot::default()
        });
        self.slots.insert(episode.to_string(), slot);
        slot
    }

    fn key(slot: usize, id: &str, info: &EpisodeInfo) -> EpisodeKey {
        (
            Reverse(info.priority),
            Reverse(info.curated_ms),
            id.to_string(),
            slot,
        )
    }

    /// Adds or updates a catalog episode.
    pub fn upsert_episode(&mut self, episode: &str, info: EpisodeInfo) {
        let slot = self.slot(episode);
        let entry = &mut self.episodes[slot];
        if let Some(old) = entry.info.take() {
            let key = Index::key(slot, episode, &old);
            self.order.remove(&key);
            self.open.remove(&key);
            self.episodes[slot].open = false;
        }
        if !info.held {
            self.order.insert(Index::key(slot, episode, &info));
        }
        self.episodes[slot].info = Some(info);
        self.count(slot);
    }

    /// A catalog episode as the index holds it.
    pub fn episode_info(&self, episode: &str) -> Option<&EpisodeInfo> {
        let &slot = self.slots.get(episode)?;
        self.episodes[slot].info.as_ref()
    }

    /// A catalog clip as the index holds it.
    pub fn clip_info(&self, number: u32) -> Option<&ClipInfo> {
        self.clips.get(number as usize)?.as_ref()
    }

    /// Removes a catalog episode (its research and leases stay known).
    pub fn remove_episode(&mut self, episode: &str) {
        let Some(&slot) = self.slots.get(episode) else {
            return;
        };
        if let Some(old) = self.episodes[slot].info.take() {
            let key = Index::key(slot, episode, &old);
            self.order.remove(&key);
            self.open.remove(&key);
            self.episodes[slot].open = false;
        }
    }

    /// Adds or updates a catalog clip by its number.
    pub fn upsert_clip(&mut self, number: u32, info: ClipInfo) {
        let n = number as usize;
        if self.clips.len() <= n {
            self.clips.resize(n + 1, None);
        }
        if info.held {
            self.active.clear(number);
        } else {
            self.active.set(number);
        }
        self.clips[n] = Some(info);
        self.clip_order_dirty = true;
    }

    /// Removes a catalog clip.
    pub fn remove_clip(&mut self, number: u32) {
        if let Some(c) = self.clips.get_mut(number as usize) {
            *c = None;
        }
        self.active.clear(number);
        self.clip_order_dirty = true;
    }

    /// Replaces the researched clip numbers of an episode.
    pub fn set_research(&mut self, episode: &str, researched: impl IntoIterator<Item = u32>) {
        self.set_research_with_errors(episode, researched, Vec::new());
    }

    /// Replaces the researched clip numbers of an episode and its per-clip errors; an
    /// error made with an older version of its clip does not count as researched.
    pub fn set_research_with_errors(
        &mut self,
        episode: &str,
        researched: impl IntoIterator<Item = u32>,
        errors: Vec<ErrorMark>,
    ) {
        let slot = self.slot(episode);
        self.episodes[slot].unreadable = false;
        let bits = &mut self.episodes[slot].researched;
        bits.clear_all();
        for n in researched {
            bits.set(n);
        }
        bits.shrink();
        for e in &errors {
            if self.is_stale(e) {
                self.episodes[slot].researched.clear(e.clip);
            }
        }
        self.episodes[slot].errors = errors;
        self.count(slot);
    }

    fn is_stale(&self, e: &ErrorMark) -> bool {
        self.clip_stamps
            .get(&e.clip)
            .is_some_and(|(stamp, curated)| {
                archivist_engine::schema::records::error_reopened(
                    e.stamp.as_deref(),
                    e.run_at,
                    stamp,
                    *curated,
                )
            })
    }

    /// Records a clip's stamp and latest curation; when they change, its errored pairs
    /// made with the older version become plannable again.
    pub fn set_clip_stamp(&mut self, number: u32, stamp: String, curated: time::OffsetDateTime) {
        let changed = self
            .clip_stamps
            .get(&number)
            .is_none_or(|(s, c)| *s != stamp || *c != curated);
        self.clip_stamps.insert(number, (stamp, curated));
        if !changed {
            return;
        }
        for slot in 0..self.episodes.len() {
            let stale = self.episodes[slot]
                .errors
                .iter()
                .any(|e| e.clip == number && self.is_stale(e));
            if stale {
                self.episodes[slot].researched.clear(number);
                self.count(slot);
            }
        }
    }

    /// Forgets an episode's research (its record was deleted).
    pub fn remove_research(&mut self, episode: &str) {
        if let Some(&slot) = self.slots.get(episode) {
            self.episodes[slot].researched = Bits::new();
            self.episodes[slot].unreadable = false;
            self.count(slot);
        }
    }

    /// Notes that an episode's research record exists but does not decode: nothing is
    /// planned for the episode until it is readable again (or deleted).
    pub fn set_research_unreadable(&mut self, episode: &str) {
        let slot = self.slot(episode);
        self.episodes[slot].unreadable = true;
        self.count(slot);
    }

    /// Episodes whose research record does not decode (left out of planning).
    pub fn unreadable_research(&self) -> Vec<&str> {
        self.episodes
            .iter()
            .filter(|e| e.unreadable)
            .map(|e| e.id.as_str())
            .collect()
    }

    /// Adds or updates a lease on `episode`'s `clips`, expiring at `expires_ms`
    /// (ZooKeeper's clock: the lease node's mtime plus its duration).
    pub fn upsert_lease(&mut self, job: &str, episode: &str, clips: Vec<u32>, expires_ms: i64) {
        self.remove_lease(job);
        let counted = expires_ms > self.now_ms;
        if counted {
            self.counted.insert((expires_ms, job.to_string()));
        }
        let slot = self.slot(episode);
        self.episodes[slot].leases.push(job.to_string());
        self.leases.insert(
            job.to_string(),
            LeaseEntry {
                episode: episode.to_string(),
                clips,
                expires_ms,
                counted,
            },
        );
        self.recompute(slot);
    }

    /// When the lease of `job` the index holds expires (`None`: it holds none).
    pub fn lease_expires(&self, job: &str) -> Option<i64> {
        self.leases.get(job).map(|l| l.expires_ms)
    }

    /// Forgets a lease (its node was deleted).
    pub fn remove_lease(&mut self, job: &str) {
        let Some(old) = self.leases.remove(job) else {
            return;
        };
        if old.counted {
            self.counted.remove(&(old.expires_ms, job.to_string()));
        }
        if let Some(&slot) = self.slots.get(&old.episode) {
            self.episodes[slot].leases.retain(|l| l != job);
            self.recompute(slot);
        }
    }

    /// Notes a queue entry of a job in a blocking state (`pending`, `held`, `failed`):
    /// its clips are not planned again while it is there. Idempotent per state, so
    /// replayed watch events cannot leave a job blocking forever.
    pub fn add_job(&mut self, job: &str, state: JobState, episode: &str, clips: Vec<u32>) {
        if let Some(entry) = self.jobs.get_mut(job) {
            if !entry.states.contains(&state) {
                entry.states.push(state);
            }
            return;
        }
        let slot = self.slot(episode);
        self.episodes[slot].jobs.push(job.to_string());
        self.jobs.insert(
            job.to_string(),
            JobEntry {
                episode: episode.to_string(),
                clips,
                states: vec![state],
            },
        );
        self.recompute(slot);
    }

    /// Is this job known as blocking?
    pub fn has_job(&self, job: &str) -> bool {
        self.jobs.contains_key(job)
    }

    /// Notes that a job's queue entry in `state` went away; the job stops blocking when
    /// it has no blocking entry left.
    pub fn remove_job(&mut self, job: &str, state: JobState) {
        let Some(entry) = self.jobs.get_mut(job) else {
            return;
        };
        entry.states.retain(|s| *s != state);
        if !entry.states.is_empty() {
            return;
        }
        let episode = entry.episode.clone();
        self.jobs.remove(job);
        if let Some(&slot) = self.slots.get(&episode) {
            self.episodes[slot].jobs.retain(|j| j != job);
            self.recompute(slot);
        }
    }

    /// Moves the index's clock (ZooKeeper's) forward: leases that expired by `now_ms`
    /// stop blocking their clips. An expired lease counts as no lease.
    pub fn advance(&mut self, now_ms: i64) {
        if now_ms <= self.now_ms {
            return;
        }
        self.now_ms = now_ms;
        let mut touched = Vec::new();
        while let Some(first) = self.counted.first() {
            if first.0 > now_ms {
                break;
            }
            let Some((_, job)) = self.counted.pop_first() else {
                break;
            };
            if let Some(lease) = self.leases.get_mut(&job) {
                lease.counted = false;
                if let Some(&slot) = self.slots.get(&lease.episode) {
                    touched.push(slot);
                }
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for slot in touched {
            self.recompute(slot);
        }
    }

    /// The index's clock (ZooKeeper's time of the last [`Index::advance`]).
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    fn recompute(&mut self, slot: usize) {
        let entry = &mut self.episodes[slot];
        entry.blocked.clear_all();
        for job in &entry.leases {
            if let Some(lease) = self.leases.get(job) {
                if lease.counted {
                    lease.clips.iter().for_each(|n| entry.blocked.set(*n));
                }
            }
        }
        for job in &entry.jobs {
            if let Some(j) = self.jobs.get(job) {
                j.clips.iter().for_each(|n| entry.blocked.set(*n));
            }
        }
        entry.blocked.shrink();
        self.count(slot);
    }

    /// Recounts an episode's free clips and keeps the open set in step. Deferred while
    /// the clip catalog changed (the next pick recounts every episode).
    fn count(&mut self, slot: usize) {
        if self.clip_order_dirty {
            return;
        }
        let entry = &mut self.episodes[slot];
        entry.free = if entry.unreadable {
            0
        } else {
            self.active.count_outside(&entry.researched, &entry.blocked)
        };
        let Some(info) = entry.info.as_ref() else {
            return;
        };
        let open = !info.held && entry.free > 0;
        if open == entry.open {
            return;
        }
        let key = Index::key(slot, &entry.id, info);
        entry.open = open;
        if open {
            self.open.insert(key);
        } else {
            self.open.remove(&key);
        }
    }

    /// Recounts every episode (after the clip catalog changed).
    fn count_all(&mut self) {
        for slot in 0..self.episodes.len() {
            self.count(slot);
        }
    }

    /// Was this clip researched for this episode?
    pub fn is_researched(&self, episode: &str, clip: u32) -> bool {
        self.slots
            .get(episode)
            .is_some_and(|s| self.episodes[*s].researched.get(clip))
    }

    /// Is this clip under an active lease or a blocking job for this episode?
    pub fn is_blocked(&self, episode: &str, clip: u32) -> bool {
        self.slots
            .get(episode)
            .is_some_and(|s| self.episodes[*s].blocked.get(clip))
    }

    /// Sizes, for logs, metrics and the benchmark.
    pub fn stats(&self) -> IndexStats {
        let episode_bytes: usize = self
            .episodes
            .iter()
            .map(|e| {
                std::mem::size_of::<EpisodeSlot>()
                    + e.id.capacity()
                    + e.researched.heap_bytes()
                    + e.blocked.heap_bytes()
                    + e.info.as_ref().map_or(0, |i| i.media_url.capacity())
                    + e.leases
                        .iter()
                        .chain(&e.jobs)
                        .map(|s| 24 + s.len())
                        .sum::<usize>()
            })
            .sum();
        let order_bytes =
            (self.order.len() + self.open.len()) * (std::mem::size_of::<EpisodeKey>() + 16 + 12);
        let slot_bytes = self.slots.capacity() * (24 + 8 + 16);
        let clip_bytes = self.clips.capacity() * std::mem::size_of::<Option<ClipInfo>>()
            + self.clip_order.capacity() * 4
            + self.active.heap_bytes();
        let lease_bytes: usize = self
            .leases
            .values()
            .map(|l| 96 + l.clips.capacity() * 4)
            .sum();
        let job_bytes: usize = self
            .jobs
            .values()
            .map(|j| 96 + j.clips.capacity() * 4)
            .sum();
        let active_clips = self.active.count();
        let plannable = || {
            self.episodes
                .iter()
                .filter(|e| e.info.as_ref().is_some_and(|i| !i.held))
        };
        let pairs_researched = plannable()
            .map(|e| u64::from(self.active.count_both(&e.researched)))
            .sum();
        let pairs_unplanned = plannable()
            .map(|e| u64::from(self.active.count_outside(&e.researched, &e.blocked)))
            .sum();
        IndexStats {
            episodes: self.episodes.iter().filter(|e| e.info.is_some()).count(),
            pairs: self.order.len() as u64 * active_clips as u64,
            pairs_researched,
            pairs_unplanned,
            plannable_episodes: self.order.len(),
            open_episodes: self.open.len(),
            active_clips,
            leases: self.leases.len(),
            active_leases: self.counted.len(),
            blocking_jobs: self.jobs.len(),
            heap_bytes: episode_bytes
                + order_bytes
                + slot_bytes
                + clip_bytes
                + lease_bytes
                + job_bytes,
        }
    }
}

#[cfg(test)]
mod tests;
