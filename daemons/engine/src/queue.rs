//! State queues: `/queues/{state}` whose children sort in processing order.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use znode_schema::paths;
use znode_schema::queue_key::QueueEntry;
use znode_schema::records::JobRecord;
use znode_schema::JobState;
use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::ops::{Mode, Op};
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

/// How much of a queue is work (see [`count_work`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WorkCount {
    /// Entries that are work: all of them, or at least the `enough` asked for.
    pub work: usize,
    /// Entries looked at that are not work: names that do not parse as queue entries,
    /// well-formed entries whose job does not exist, and entries whose job is in another
    /// state (an entry copied by hand from another queue). `fsck --repair` removes them.
    pub strays: Vec<String>,
    /// The strays among [`WorkCount::strays`] whose name parses, with what proves them
    /// stray, for [`remove_stray`] (a daemon that may write removes them, so no pass
    /// reads them again; `status` only shows them).
    pub proven: Vec<ProvenStray>,
}

/// A well-formed queue entry found not to be work, with the proof [`remove_stray`]
/// checks in the same multi that deletes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvenStray {
    /// The queue the entry is in.
    pub state: JobState,
    /// The entry's name.
    pub name: String,
    /// The job it names.
    pub job: String,
    /// Why it is not work.
    pub proof: StrayProof,
}

/// Why an entry is not work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrayProof {
    /// Its job does not exist.
    NoJob,
    /// Its job is in another state at this data version.
    JobElsewhere {
        /// The job node's data version read.
        version: i32,
    },
    /// Its job is in this state at this data version, but its real entry has another
    /// name (a duplicate made by hand: another priority or curation time).
    Duplicate {
        /// The job node's data version read.
        version: i32,
    },
}

/// Is `name`, in `state`'s queue, the real queue entry of `job`: the job is in that
/// state and the entry is the one its record names (priority, curation, id). The one
/// rule for "this entry is that job" in every queue (`status`, the planner's index, the
/// reaper and `count_work`); any other entry naming the job is a stray. Every move of a
/// job creates its real entry and deletes the old one in the same multi, and a
/// re-prioritisation renames it in the multi that rewrites the job, so at a given
/// version of the job exactly one entry is its own (outside 17h F10: a copy in `held`
/// was counted as a held job for ever, a duplicate in `pending` as a second job).
pub fn is_its_entry(job: &JobRecord, state: JobState, name: &str) -> bool {
    job.status == state && job.queue_entry().name() == name
}

/// Removes an entry proven not to be work, in one multi that re-checks the proof: the
/// job still at the version read in another state ([`StrayProof::JobElsewhere`]) or
/// with another entry of its own ([`StrayProof::Duplicate`]), or
/// still absent ([`StrayProof::NoJob`]: [`crate::jobs::absent_ops`]). Every move of a job to a state
/// creates its entry in the same multi, so while the proof holds the entry cannot be
/// the job's real one. Without this, every planner round, reaper sweep and researcher
/// poll re-read each stray for ever (1,500 hand-made strays cost ~4,800 ZooKeeper
/// requests/s until `fsck --repair`). Returns whether it was removed (`false`: the
/// proof no longer holds or the entry is gone; nothing was written).
pub async fn remove_stray(session: &Session, stray: &ProvenStray) -> Result<bool> {
    let entry = format!("{}/{}", paths::queue(stray.state), stray.name);
    let job = paths::job(&stray.job);
    let mut ops = match stray.proof {
        StrayProof::NoJob => crate::jobs::absent_ops(&stray.job),
        StrayProof::JobElsewhere { version } | StrayProof::Duplicate { version } => {
            vec![Op::Check { path: job, version }]
        }
    };
    ops.push(Op::Delete {
        path: entry,
        version: None,
    });
    match crate::ops::commit(session, &ops).await {
        Ok(_) => {
            tracing::warn!(entry = %stray.name, job = %stray.job, state = %stray.state, proof = ?stray.proof, "stray queue entry removed (not a job of this state; made by hand or left by a repair)");
            metrics::counter!("archivist_stray_entries_removed_total", "state" => stray.state.as_str()).increment(1);
            Ok(true)
        }
        Err(e) if e.is_conflict() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Puts back the queue entry of `job` (read at `version`) when it is missing: the
/// inverse of a stray ([`remove_stray`]), a job without its entry (deleted by hand, or
/// left by a repair). Every transition deletes the current state's entry in its multi,
/// so without the entry no move of the job can commit: the reaper's expiry failed every
/// sweep, silently, for ever (outside 17g finding 1). One multi checks the job still at
/// `version` and creates the entry; call it holding the job's lock. Returns whether the
/// entry was put back (`false`: it exists, or the job moved; nothing was written).
/// Logged once per job and entry.
pub async fn restore_entry(session: &Session, job: &JobRecord, version: i32) -> Result<bool> {
    let entry = paths::queue_entry(job.status, &job.queue_entry().name());
    if store::exists(session, &entry).await?.is_some() {
        return Ok(false);
    }
    let ops = [
        Op::Check {
            path: paths::job(&job.id),
            version,
        },
        Op::Create {
            path: entry.clone(),
            data: Vec::new(),
            mode: Mode::Persistent,
        },
    ];
    match crate::ops::commit(session, &ops).await {
        Ok(_) => {
            if crate::logs::first_time(&format!("queue entry restored {entry}")) {
                tracing::warn!(job = %job.id, episode = %job.episode, state = %job.status, entry = %entry, "missing queue entry of a job put back (deleted by hand or left by a repair); its transitions can commit again");
            }
            metrics::counter!("archivist_queue_entries_restored_total", "state" => job.status.as_str()).increment(1);
            Ok(true)
        }
        Err(e) if e.is_conflict() => Ok(false),
        Err(e) => Err(e),
    }
}

/// [`remove_stray`] for each of `strays`; how many were removed. A per-entry error
/// other than a lost session is logged and left for the next pass.
pub async fn remove_strays(session: &Session, strays: &[ProvenStray]) -> Result<usize> {
    let mut removed = 0;
    for stray in strays {
        match remove_stray(session, stray).await {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(e) if e.is_session_lost() => return Err(e),
            Err(e) => {
                tracing::warn!(entry = %stray.name, job = %stray.job, error = %e, "stray queue entry not removed; the next pass retries");
            }
        }
    }
    Ok(removed)
}

/// The queues whose entries are checked one by one for strays ([`count_work`]) by the
/// planner (`pending`) and the reaper (the others, whose proven strays it removes, and
/// whose work its `archivist_jobs{state}` gauge counts): the queues of work in flight
/// and those an operator's move fills (`held`, `failed`, `cancelled`), short by nature.
/// `status` applies the same rule to every queue; the reaper's gauge counts the
/// finished queues (`recorded`, `expired`: long, read by its retention step) by length,
/// and `fsck --repair` removes their strays. Before, only `pending` was checked (outside
/// 17g finding 6), then not `held` (outside 17h F10: a stray there showed as a held job
/// for ever).
pub const STRAY_CHECKED: [JobState; 7] = [
    JobState::Pending,
    JobState::Leased,
    JobState::Researching,
    JobState::Reported,
    JobState::Held,
    JobState::Failed,
    JobState::Cancelled,
];

/// Counts a queue's waiting work. The one rule: an entry is work when its name parses as
/// a queue entry, its job exists, and it is the job's own entry in this state
/// ([`is_its_entry`]), or the job's record does not decode or names another job, so its
/// state is unknown
/// (`status` names such a job and `fsck` reports it). Anything else is a stray (made by hand, or left by a repair); counting it
/// would make the planner wait for work no researcher can take (`stop=Surplus` until
/// the stray's job is deleted, a day later for a recorded one) and `status` show
/// waiting jobs that are not waiting.
///
/// Stops looking once at least `enough` work entries are found (the planner only needs to know
/// whether more work waits than researchers can take); every unparsable name is reported
/// (they cost nothing to find). A job read as missing or in another state while its entry
/// is gone too was moved or removed with it in one multi (a claim, a delete, an expiry)
/// and is neither work nor a stray.
pub async fn count_work(session: &Session, state: JobState, enough: usize) -> Result<WorkCount> {
    const CHUNK: usize = 64;
    let (entries, mut strays) = list(session, state).await?;
    let mut work = 0;
    let mut proven = Vec::new();
    for chunk in entries.chunks(CHUNK) {
        if work >= enough {
            break;
        }
        let jobs: Vec<String> = chunk.iter().map(|e| paths::job(&e.job)).collect();
        let found = store::read_many_lenient::<JobRecord>(session, &jobs, CHUNK).await?;
        for (entry, job) in chunk.iter().zip(found) {
            let name = entry.name();
            let proof = match &job {
                // A record naming another job than its node (`id` edited by hand) is
                // damaged like one that does not decode: its entry is not judged by it
                // (outside try 17p F3: the job's only entry was removed as a duplicate,
                // leaving it pending in no queue); `fsck` reports `job_id_mismatch`.
                Some((Ok(record), _)) if record.id != entry.job => {
                    work += 1;
                    continue;
                }
                Some((Ok(record), stat)) if record.status != state => StrayProof::JobElsewhere {
                    version: stat.version,
                },
                Some((Ok(record), stat)) if !is_its_entry(record, state, &name) => {
                    StrayProof::Duplicate {
                        version: stat.version,
                    }
                }
                Some(_) => {
                    work += 1;
                    continue;
                }
                None => StrayProof::NoJob,
            };
            let path = format!("{}/{name}", paths::queue(state));
            if store::exists(session, &path).await?.is_some() {
                proven.push(ProvenStray {
                    state,
                    name: name.clone(),
                    job: entry.job.clone(),
                    proof,
                });
                strays.push(name);
            }
        }
    }
    Ok(WorkCount {
        work,
        strays,
        proven,
    })
}

/// A live copy of one state queue's entries in processing order, kept current by a
/// persistent recursive watch on the queue directory instead of listing it before every
/// claim (a listing of a long queue costs far more than the claim itself).
///
/// The watch is set before the first listing, so no change falls in between; the events
/// that arrived before the listing are applied again on top of it, which is harmless
/// (creates and deletes of one name keep their order). A persistent watch may lose events
/// while disconnected (ZOOKEEPER-4698), so a disconnection marks the view stale and the
/// next [`QueueView::sync`] lists again. The view only says where to look: a consumer still
/// takes the job's lock and re-reads the job before acting on it.
pub struct QueueView {
    state: JobState,
    dir: String,
    prefix: String,
    entries: BTreeMap<String, QueueEntry>,
    watcher: Option<zk::PersistentWatcher>,
    stale: bool,
    dead: bool,
}

impl std::fmt::Debug for QueueView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueView")
            .field("state", &self.state)
            .field("entries", &self.entries.len())
            .field("stale", &self.stale)
            .field("dead", &self.dead)
            .finish()
    }
}

/// What one watch event means for a view.
enum ViewEvent {
    Created(String),
    Deleted(String),
    Stale,
    Lost,
    Other,
}

impl QueueView {
    /// An empty view of `state`'s queue; the first [`QueueView::sync`] fills it.
    pub fn new(state: JobState) -> QueueView {
        let dir = paths::queue(state);
        QueueView {
            state,
            prefix: format!("{dir}/"),
            dir,
            entries: BTreeMap::new(),
            watcher: None,
            stale: true,
            dead: false,
        }
    }

    /// Brings the view up to date: sets the watch and lists the queue if the view is stale
    /// (new, reconnected, or [`QueueView::invalidate`]d), then applies the events that
    /// have arrived (without waiting for more).
    pub async fn sync(&mut self, session: &Session) -> Result<()> {
        self.apply_arrived();
        if !self.stale {
            return Ok(());
        }
        if self.watcher.is_none() && !self.dead {
            let watcher = session
                .client()
                .watch(&self.dir, zk::AddWatchMode::PersistentRecursive)
                .await
                .map_err(|e| EngineError::zk("watch", &self.dir, e))?;
            self.watcher = Some(watcher);
        }
        let (entries, _bad) = list(session, self.state).await?;
        self.entries = entries.into_iter().map(|e| (e.name(), e)).collect();
        self.stale = false;
        self.apply_arrived();
        Ok(())
    }

    /// Forgets the listing: the next [`QueueView::sync`] lists the queue again (the
    /// fallback for a missed event).
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    /// The entries in processing order.
    pub fn entries(&self) -> impl Iterator<Item = &QueueEntry> {
        self.entries.values()
    }

    /// Number of entries in the view.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Is the view empty?
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops an entry found to be gone or moved (its delete event may still be on the way).
    pub fn remove(&mut self, entry: &QueueEntry) {
        self.entries.remove(&entry.name());
    }

    /// Waits until the queue changes (an entry created or deleted, or the connection
    /// dropped or came back), applying what arrived. Never returns after the session ended
    /// or without a watch; callers select it with a poll timer and the session's `lost`.
    pub async fn changed(&mut self) {
        loop {
            if self.dead {
                return std::future::pending().await;
            }
            let Some(watcher) = self.watcher.as_mut() else {
                return std::future::pending().await;
            };
            let event = watcher.changed().await;
            if self.apply(event) {
                return;
            }
        }
    }

    /// Applies the events that already arrived; whether any changed the view.
    fn apply_arrived(&mut self) -> bool {
        let mut changed = false;
        loop {
            if self.dead {
                return changed;
            }
            let Some(event) = self.watcher.as_mut().and_then(arrived) else {
                return changed;
            };
            changed |= self.apply(event);
        }
    }

    /// Applies one event; whether it changed the view (or made it stale).
    fn apply(&mut self, event: zk::WatchedEvent) -> bool {
        match self.classify(event) {
            ViewEvent::Created(name) => match QueueEntry::parse(&name) {
                Ok(entry) => {
                    self.entries.insert(name, entry);
                    true
                }
                Err(_) => false,
            },
            ViewEvent::Deleted(name) => self.entries.remove(&name).is_some(),
            ViewEvent::Stale => {
                self.stale = true;
                true
            }
            ViewEvent::Lost => {
                // The client panics if a persistent watcher is polled after a terminal
                // session event: never touch it again.
                self.dead = true;
                self.stale = true;
                true
            }
            ViewEvent::Other => false,
        }
    }

    fn classify(&self, event: zk::WatchedEvent) -> ViewEvent {
        let child = || {
            event
                .path
                .strip_prefix(&self.prefix)
                .filter(|name| !name.is_empty() && !name.contains('/'))
                .map(str::to_string)
        };
        match event.event_type {
            zk::EventType::NodeCreated => child().map_or(ViewEvent::Other, ViewEvent::Created),
            zk::EventType::NodeDeleted => {
                if event.path == self.dir {
                    ViewEvent::Stale
                } else {
                    child().map_or(ViewEvent::Other, ViewEvent::Deleted)
                }
            }
            zk::EventType::NodeDataChanged | zk::EventType::NodeChildrenChanged => ViewEvent::Other,
            zk::EventType::Session => match event.session_state {
                zk::SessionState::Expired
                | zk::SessionState::Closed
                | zk::SessionState::AuthFailed => ViewEvent::Lost,
                _ => ViewEvent::Stale,
            },
        }
    }
}

/// The next event a persistent watcher already received, without waiting. Never call it
/// again on a watcher that delivered a terminal session event (the client panics).
pub(crate) fn arrived(watcher: &mut zk::PersistentWatcher) -> Option<zk::WatchedEvent> {
    let mut cx = Context::from_waker(Waker::noop());
    let next = pin!(watcher.changed());
    match next.poll(&mut cx) {
        Poll::Ready(event) => Some(event),
        Poll::Pending => None,
    }
}

/// Does this event end the session (after it, the watcher must not be polled)?
pub(crate) fn is_terminal(event: &zk::WatchedEvent) -> bool {
    event.event_type == zk::EventType::Session
        && matches!(
            event.session_state,
            zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
        )
}
