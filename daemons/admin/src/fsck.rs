//! `fsck`: checks the tree's invariants and, with `--repair`, fixes what is safe.
//!
//! Checked: every job is in exactly one queue, the one of its status, under the entry
//! name its priority and curation give; no queue entry without its job; no lock on a
//! job that no daemon should be working on (ephemeral owners are always live sessions,
//! so a stale lock is one on a failed, held or finished job); leases reference existing
//! jobs, last a positive time and are not overdue by more than the reaper's interval; no
//! id counter is behind the ids of the records it numbers; research records match the
//! catalog; no two episodes (or clips) share a media URL and every media-URL alias points
//! at a record holding that URL; node sizes are under the limits; every node's data parses. Without `repair`
//! nothing is written (the read-only role can run it): ZooKeeper's time is then the
//! newest time seen on the tree, a lower bound.
//!
//! Repaired (each by its own compare-and-set write, re-checked first): orphan queue
//! entries and undecodable entry names are deleted; a job missing from its queue, or in
//! the wrong or several queues, keeps (or gets) the entry matching its status; leases of
//! missing jobs are deleted; a counter behind its ids is moved past them. Everything else
//! is reported for an operator.

use std::collections::{BTreeMap, BTreeSet};

use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::records::{
    self, AliasRecord, CatalogFields, ClipRecord, EpisodeRecord, JobRecord, LeaseRecord,
    LockRecord, ResearchRecord, MAX_NODE_BYTES,
};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::transition::machine;
use archivist_engine::{clock, counter, lease, store, EngineError, Session};
use serde::Serialize;

use crate::error::Result;
use crate::scan::NodeStat;
use crate::settings::{AdminSettings, Progress};
use crate::tree::{self, RawNode};

/// What kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A node's data does not parse as the record its path holds.
    Unparsable,
    /// A node's data is over ZooKeeper's limit.
    TooLarge,
    /// A research record is large (warning).
    LargeResearch,
    /// A node the schema does not know (warning).
    UnknownNode,
    /// A job's id differs from its node name.
    JobIdMismatch,
    /// A job is in no queue.
    JobNotQueued,
    /// A job is queued, but not in its status's queue under its entry name.
    JobInWrongQueue,
    /// A job is in its queue and in others too.
    JobInSeveralQueues,
    /// A queue entry whose job does not exist.
    OrphanQueueEntry,
    /// A queue entry name that does not decode.
    BadQueueEntryName,
    /// A lock on a job no daemon should be working on (failed, held or finished).
    StaleLock,
    /// A lock record naming another session than the node's owner (warning).
    LockSessionMismatch,
    /// A lease whose job does not exist.
    LeaseWithoutJob,
    /// A lease past expiry by more than the reaper's interval (is the reaper running?).
    LeaseOverdue,
    /// A lease that names another job or episode than its job.
    LeaseMismatch,
    /// A pending job without a lease: no researcher can claim it (warning).
    PendingWithoutLease,
    /// A pending job whose lock has been held for a while (warning): a claim holds it a
    /// moment only, so its holder may have lost track of it (a create whose reply was
    /// lost, docs/protocol.md "Lost replies"); the job waits until that session ends.
    PendingLocked,
    /// A research record whose content contradicts its node or the catalog.
    ResearchMismatch,
    /// A lease whose duration is not positive (expired when written).
    LeaseInvalid,
    /// An id counter behind the ids in use: the next id it gives is taken.
    CounterBehind,
    /// Two records of one kind share a media URL: one media URL must be one record.
    SharedMediaUrl,
    /// A media-URL alias points at a record whose media URL is another: curating that
    /// URL would rewrite the wrong record.
    AliasMismatch,
    /// An id counter that does not exist: every allocation of its ids fails.
    CounterMissing,
}

/// How bad a fault is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Breaks an invariant: `fsck` exits non-zero while it is there.
    Error,
    /// Worth a look.
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Plan {
    /// Delete a node, if `unless` does not exist (re-checked just before).
    Delete {
        path: String,
        version: Option<i32>,
        unless: Option<String>,
    },
    /// Move an id counter past the ids in use (`archivist_engine::counter::catch_up`).
    CatchUp { counter: &'static str },
    /// Re-create a missing id counter past the ids in use
    /// (`archivist_engine::counter::recreate`).
    Recreate { counter: &'static str },
    /// Put a job in the queue of its status only, at the job's version.
    Requeue {
        job: String,
        version: i32,
        delete: Vec<String>,
        create: Option<String>,
    },
}

/// One fault found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// What kind.
    pub kind: FaultKind,
    /// How bad.
    pub severity: Severity,
    /// The node concerned.
    pub path: String,
    /// Job concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// In words.
    pub detail: String,
    /// What `--repair` does about it (absent: left to an operator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
    /// Did this run repair it?
    pub repaired: bool,
    /// Why a repair was not done, if it was tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair_error: Option<String>,
    #[serde(skip)]
    plan: Option<Plan>,
}

impl Fault {
    fn new(
        kind: FaultKind,
        severity: Severity,
        path: impl Into<String>,
        detail: impl Into<String>,
    ) -> Fault {
        Fault {
            kind,
            severity,
            path: path.into(),
            job: None,
            detail: detail.into(),
            repair: None,
            repaired: false,
            repair_error: None,
            plan: None,
        }
    }

    fn job(mut self, job: &str) -> Fault {
        self.job = Some(job.to_string());
        self
    }

    fn plan(mut self, what: impl Into<String>, plan: Plan) -> Fault {
        self.repair = Some(what.into());
        self.plan = Some(plan);
        self
    }

    /// Is it an error still there after this run?
    pub fn is_open_error(&self) -> bool {
        self.severity == Severity::Error && !self.repaired
    }
}

/// `fsck`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FsckReport {
    /// Nodes read.
    pub nodes: usize,
    /// Faults found, by kind then path.
    pub faults: Vec<Fault>,
    /// Faults repaired by this run.
    pub repaired: usize,
    /// Errors left (the CLI exits 1 when there are any).
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
}

impl FsckReport {
    /// No error left?
    pub fn is_clean(&self) -> bool {
        self.errors == 0
    }
}

fn parts(path: &str) -> Vec<&str> {
    path.split('/').skip(1).collect()
}

struct Index<'a> {
    nodes: &'a [RawNode],
    jobs: BTreeMap<&'a str, (&'a RawNode, Option<JobRecord>)>,
    locks: Vec<(&'a str, &'a RawNode)>,
    entries: Vec<(JobState, &'a str, &'a RawNode)>,
    leases: Vec<(&'a str, &'a RawNode)>,
    research: Vec<(&'a str, &'a RawNode)>,
    episodes: BTreeSet<&'a str>,
    clips: BTreeSet<&'a str>,
}

fn index(nodes: &[RawNode]) -> Index<'_> {
    let mut ix = Index {
        nodes,
        jobs: BTreeMap::new(),
        locks: Vec::new(),
        entries: Vec::new(),
        leases: Vec::new(),
        research: Vec::new(),
        episodes: BTreeSet::new(),
        clips: BTreeSet::new(),
    };
    for node in nodes {
        match parts(&node.path).as_slice() {
            ["jobs", id] => {
                ix.jobs.insert(
                    id,
                    (
                        node,
                        records::decode::<JobRecord>(&node.path, &node.data).ok(),
                    ),
                );
            }
            ["jobs", id, "lock"] => ix.locks.push((id, node)),
            ["queues", state, name] => {
                if let Ok(state) = state.parse::<JobState>() {
                    ix.entries.push((state, name, node));
                }
            }
            ["leases", id] => ix.leases.push((id, node)),
            ["research", episode] => ix.research.push((episode, node)),
            ["catalog", "episodes", id] => {
                ix.episodes.insert(id);
            }
            ["catalog", "clips", id] => {
                ix.clips.insert(id);
            }
            _ => {}
        }
    }
    ix
}

fn check_nodes(nodes: &[RawNode], settings: &AdminSettings, faults: &mut Vec<Fault>) {
    for node in nodes {
        let size = node.data.len();
        if size > MAX_NODE_BYTES {
            faults.push(Fault::new(
                FaultKind::TooLarge,
                Severity::Error,
                &node.path,
                format!("{size} bytes, over the {MAX_NODE_BYTES}-byte limit"),
            ));
            continue;
        }
        if !tree::known_path(&node.path) {
            faults.push(Fault::new(
                FaultKind::UnknownNode,
                Severity::Warning,
                &node.path,
                "the schema has no such path",
            ));
        }
        if let Some(error) = tree::decode(&node.path, &node.data).error {
            faults.push(Fault::new(
                FaultKind::Unparsable,
                Severity::Error,
                &node.path,
                error,
            ));
        }
        if node.path.starts_with("/research/") && size > settings.research_warn_bytes {
            faults.push(Fault::new(
                FaultKind::LargeResearch,
                Severity::Warning,
                &node.path,
                format!(
                    "{size} bytes (warning threshold {} bytes)",
                    settings.research_warn_bytes
                ),
            ));
        }
    }
}

fn check_queues(ix: &Index<'_>, faults: &mut Vec<Fault>) {
    let mut by_job: BTreeMap<&str, Vec<(JobState, &str, &RawNode)>> = BTreeMap::new();
    for (state, name, node) in &ix.entries {
        let Ok(entry) = QueueEntry::parse(name) else {
            faults.push(
                Fault::new(
                    FaultKind::BadQueueEntryName,
                    Severity::Error,
                    &node.path,
                    format!("{name:?} is not <16 hex>-<13 digits>-<job>; consumers skip it"),
                )
                .plan(
                    "delete the entry",
                    Plan::Delete {
                        path: node.path.clone(),
                        version: None,
                        unless: None,
                    },
                ),
            );
            continue;
        };
        let job = name.splitn(3, '-').nth(2).unwrap_or_default();
        if !ix.jobs.contains_key(job) {
            faults.push(
                Fault::new(
                    FaultKind::OrphanQueueEntry,
                    Severity::Error,
                    &node.path,
                    format!(
                        "entry in {state} for job {} which does not exist",
                        entry.job
                    ),
                )
                .job(job)
                .plan(
                    "delete the entry",
                    Plan::Delete {
                        path: node.path.clone(),
                        version: None,
                        unless: Some(paths::job(job)),
                    },
                ),
            );
            continue;
        }
        by_job.entry(job).or_default().push((*state, name, node));
    }
    for (id, (node, record)) in &ix.jobs {
        let Some(job) = record else { continue }; // reported as unparsable
        if job.id != *id {
            faults.push(
                Fault::new(
                    FaultKind::JobIdMismatch,
                    Severity::Error,
                    &node.path,
                    format!("the record says id {}", job.id),
                )
                .job(id),
            );
            continue;
        }
        let expected = paths::queue_entry(job.status, &job.queue_entry().name());
        let found: Vec<String> = by_job
            .get(id)
            .map(|v| v.iter().map(|(_, _, n)| n.path.clone()).collect())
            .unwrap_or_default();
        let others: Vec<String> = found.iter().filter(|p| **p != expected).cloned().collect();
        let has_expected = found.contains(&expected);
        let plan = Plan::Requeue {
            job: id.to_string(),
            version: node.stat.version,
            delete: others.clone(),
            create: (!has_expected).then(|| expected.clone()),
        };
        let fault = if found.is_empty() {
            Fault::new(
                FaultKind::JobNotQueued,
                Severity::Error,
                &node.path,
                format!("{} job in no queue; expected {expected}", job.status),
            )
            .plan(format!("create {expected}"), plan)
        } else if !has_expected {
            Fault::new(
                FaultKind::JobInWrongQueue,
                Severity::Error,
                &node.path,
                format!(
                    "{} job queued as {}; expected {expected}",
                    job.status,
                    others.join(", ")
                ),
            )
            .plan(
                format!("delete {} and create {expected}", others.join(", ")),
                plan,
            )
        } else if !others.is_empty() {
            Fault::new(
                FaultKind::JobInSeveralQueues,
                Severity::Error,
                &node.path,
                format!("{} job also queued as {}", job.status, others.join(", ")),
            )
            .plan(format!("delete {}", others.join(", ")), plan)
        } else {
            continue;
        };
        faults.push(fault.job(id));
    }
}

fn check_locks(ix: &Index<'_>, settings: &AdminSettings, now_ms: i64, faults: &mut Vec<Fault>) {
    // A claim or an admin action holds a pending job's lock for a few round trips.
    let held_too_long_ms = settings.reaper_interval_ms().saturating_mul(2).max(1000);
    for (id, node) in &ix.locks {
        let owner = NodeStat::owner_hex(&node.stat)
            .unwrap_or_else(|| "no session (persistent node)".into());
        if let Some((_, Some(job))) = ix.jobs.get(id) {
            let held_ms = now_ms - node.stat.ctime_ms;
            if job.status == JobState::Pending && held_ms > held_too_long_ms {
                let who = records::decode::<LockRecord>(&node.path, &node.data)
                    .map(|l| l.owner)
                    .unwrap_or_else(|_| "?".into());
                faults.push(
                    Fault::new(FaultKind::PendingLocked, Severity::Warning, &node.path, format!("pending job locked for {} s by {who} (session {owner}); a claim holds it a moment only: if it stays, its holder lost track of it (docs/protocol.md, Lost replies) and the job waits until that session ends: restart that daemon", held_ms / 1000))
                        .job(id),
                );
            }
            let idle = machine().state(job.status).terminal
                || matches!(job.status, JobState::Failed | JobState::Held);
            if idle {
                let who = records::decode::<LockRecord>(&node.path, &node.data)
                    .map(|l| l.owner)
                    .unwrap_or_else(|_| "?".into());
                faults.push(
                    Fault::new(FaultKind::StaleLock, Severity::Error, &node.path, format!("{} job locked by {who} (session {owner}); no daemon works on {} jobs: end that session, or delete the lock after checking the owner", job.status, job.status))
                        .job(id),
                );
            }
        }
        if node.stat.ephemeral_owner == 0 {
            faults.push(
                Fault::new(
                    FaultKind::StaleLock,
                    Severity::Error,
                    &node.path,
                    "the lock is a persistent node: it never goes away by itself",
                )
                .job(id),
            );
        } else if let Ok(lock) = records::decode::<LockRecord>(&node.path, &node.data) {
            if lock.session != owner {
                faults.push(
                    Fault::new(
                        FaultKind::LockSessionMismatch,
                        Severity::Warning,
                        &node.path,
                        format!(
                            "the record names session {}, the node is owned by {owner}",
                            lock.session
                        ),
                    )
                    .job(id),
                );
            }
        }
    }
}

fn check_leases(ix: &Index<'_>, settings: &AdminSettings, now_ms: i64, faults: &mut Vec<Fault>) {
    let mut leased: BTreeSet<&str> = BTreeSet::new();
    for (id, node) in &ix.leases {
        leased.insert(id);
        let Some((_, job)) = ix.jobs.get(id) else {
            faults.push(
                Fault::new(
                    FaultKind::LeaseWithoutJob,
                    Severity::Error,
                    &node.path,
                    format!("lease for job {id}, which does not exist"),
                )
                .job(id)
                .plan(
                    "delete the lease",
                    Plan::Delete {
                        path: node.path.clone(),
                        version: Some(node.stat.version),
                        unless: Some(paths::job(id)),
                    },
                ),
            );
            continue;
        };
        let Ok(lease) = records::decode::<LeaseRecord>(&node.path, &node.data) else {
            continue;
        };
        if let Err(e) = lease::validate_duration(lease.duration_ms) {
            faults.push(
                Fault::new(
                    FaultKind::LeaseInvalid,
                    Severity::Error,
                    &node.path,
                    format!("{e}; it was expired when written (the reaper revokes it)"),
                )
                .job(id),
            );
        }
        let overdue = now_ms - lease::expires_at(node.stat.mtime_ms, lease.duration_ms);
        if overdue > settings.reaper_interval_ms() {
            faults.push(
                Fault::new(FaultKind::LeaseOverdue, Severity::Error, &node.path, format!("expired {} s ago, more than the reaper's interval of {} s: is a reaper running?", overdue / 1000, settings.reaper_interval_s))
                    .job(id),
            );
        }
        if lease.job != *id {
            faults.push(
                Fault::new(
                    FaultKind::LeaseMismatch,
                    Severity::Error,
                    &node.path,
                    format!("the lease names job {}", lease.job),
                )
                .job(id),
            );
        } else if let Some(job) = job {
            if job.episode != lease.episode {
                faults.push(
                    Fault::new(
                        FaultKind::LeaseMismatch,
                        Severity::Error,
                        &node.path,
                        format!(
                            "lease on episode {}, job is for {}",
                            lease.episode, job.episode
                        ),
                    )
                    .job(id),
                );
            }
        }
    }
    for (id, (node, job)) in &ix.jobs {
        if job.as_ref().is_some_and(|j| j.status == JobState::Pending) && !leased.contains(id) {
            faults.push(Fault::new(FaultKind::PendingWithoutLease, Severity::Warning, &node.path, "pending without a lease: no researcher can claim it; the reaper expires it after the work-item TTL").job(id));
        }
    }
}

fn check_counters(ix: &Index<'_>, faults: &mut Vec<Fault>) {
    for c in counter::ALL {
        let names = ix.nodes.iter().filter_map(|n| {
            let (dir, name) = n.path.rsplit_once('/')?;
            (dir == c.records_dir()).then_some(name)
        });
        let max = counter::max_number(&c, names);
        let Some(node) = ix.nodes.iter().find(|n| n.path == c.path) else {
            faults.push(
                Fault::new(
                    FaultKind::CounterMissing,
                    Severity::Error,
                    c.path,
                    format!(
                        "missing: no new id can be given (ids up to {max} are in use); `archivist init` or `fsck --repair` re-creates it"
                    ),
                )
                .plan(
                    format!("create it at version {max}"),
                    Plan::Recreate { counter: c.path },
                ),
            );
            continue;
        };
        if let Some(behind) = counter::behind(node.stat.version, max) {
            faults.push(
                Fault::new(
                    FaultKind::CounterBehind,
                    Severity::Error,
                    c.path,
                    format!(
                        "at version {} (next id {}), but ids up to {} are in use: new ids would collide",
                        behind.version,
                        i64::from(behind.version) + 1,
                        behind.max_in_use
                    ),
                )
                .plan(
                    format!("move it to version {}", behind.max_in_use),
                    Plan::CatchUp { counter: c.path },
                ),
            );
        }
    }
}

fn check_research(ix: &Index<'_>, faults: &mut Vec<Fault>) {
    for (episode, node) in &ix.research {
        let Ok(record) = records::decode::<ResearchRecord>(&node.path, &node.data) else {
            continue;
        };
        let mut problems = Vec::new();
        if record.episode != *episode {
            problems.push(format!("the record is for episode {}", record.episode));
        }
        if !ix.episodes.contains(episode) {
            problems.push(format!("episode {episode} is not in the catalog"));
        }
        let mut unknown: Vec<String> = record
            .researched()
            .iter()
            .map(paths::clip_id)
            .filter(|c| !ix.clips.contains(c.as_str()))
            .collect();
        unknown.extend(
            record
                .found
                .keys()
                .filter(|c| !ix.clips.contains(c.as_str()))
                .cloned(),
        );
        unknown.sort();
        unknown.dedup();
        if !unknown.is_empty() {
            let shown: Vec<&str> = unknown.iter().take(5).map(String::as_str).collect();
            problems.push(format!(
                "{} clip(s) not in the catalog: {}{}",
                unknown.len(),
                shown.join(", "),
                if unknown.len() > 5 { ", ..." } else { "" }
            ));
        }
        let not_researched: Vec<&String> = record
            .found
            .keys()
            .filter(|c| paths::clip_number(c).is_none_or(|n| !record.is_researched(n)))
            .collect();
        if !not_researched.is_empty() {
            problems.push(format!(
                "occurrences for clips no run researched: {}",
                not_researched
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !problems.is_empty() {
            faults.push(Fault::new(
                FaultKind::ResearchMismatch,
                Severity::Error,
                &node.path,
                problems.join("; "),
            ));
        }
    }
}

/// The media URL of a catalog record node, if it is one and decodes.
fn media_url_of(node: &RawNode) -> Option<(&'static str, String)> {
    let fields = |f: CatalogFields| f.media_url;
    match parts(&node.path).as_slice() {
        ["catalog", "episodes", _] => records::decode::<EpisodeRecord>(&node.path, &node.data)
            .ok()
            .map(|r| ("episode", fields(r.fields))),
        ["catalog", "clips", _] => records::decode::<ClipRecord>(&node.path, &node.data)
            .ok()
            .map(|r| ("clip", fields(r.fields))),
        _ => None,
    }
}

/// One media URL, one record: no two records of a kind share a media URL, and each
/// media-URL alias (`url-...`) points at a record whose media URL is the alias's key.
/// Reported for an operator (which record is right is a human's call).
fn check_catalog(nodes: &[RawNode], faults: &mut Vec<Fault>) {
    let mut by_url: BTreeMap<(&str, String), Vec<&str>> = BTreeMap::new();
    let mut url_of: BTreeMap<&str, String> = BTreeMap::new();
    for node in nodes {
        if let Some((kind, url)) = media_url_of(node) {
            url_of.insert(&node.path, url.clone());
            by_url.entry((kind, url)).or_default().push(&node.path);
        }
    }
    for ((kind, url), holders) in &by_url {
        if holders.len() > 1 {
            faults.push(Fault::new(
                FaultKind::SharedMediaUrl,
                Severity::Error,
                holders[0],
                format!(
                    "{} {kind}s share the media URL {url}: {}",
                    holders.len(),
                    holders.join(", ")
                ),
            ));
        }
    }
    for node in nodes {
        let segments = parts(&node.path);
        let ["catalog", "aliases", name] = segments.as_slice() else {
            continue;
        };
        if !name.starts_with("url-") {
            continue;
        }
        let Ok(alias) = records::decode::<AliasRecord>(&node.path, &node.data) else {
            continue;
        };
        let target = match alias.target {
            records::AliasTarget::Episode => paths::episode(&alias.id),
            records::AliasTarget::Clip => paths::clip(&alias.id),
        };
        let Some(url) = url_of.get(target.as_str()) else {
            continue;
        };
        if *url != alias.key {
            faults.push(Fault::new(
                FaultKind::AliasMismatch,
                Severity::Error,
                &node.path,
                format!(
                    "alias of {} points at {target}, whose media URL is {url}",
                    alias.key
                ),
            ));
        }
    }
}

/// Checks every invariant; with `repair`, fixes the safe faults and says what it did.
pub async fn fsck(
    session: &Session,
    settings: &AdminSettings,
    repair: bool,
    progress: &dyn Progress,
) -> Result<FsckReport> {
    // Without --repair fsck writes nothing, so the read-only role can run it: ZooKeeper's
    // time is then the newest of `/clock`'s stamp and every node read (a lower bound,
    // so a lease it calls overdue is overdue).
    let clock = if repair {
        Some(clock::zk_now_ms(session).await?)
    } else {
        None
    };
    let nodes = tree::walk(session, settings, "/", progress).await?;
    let now_ms = clock.unwrap_or_else(|| {
        nodes
            .iter()
            .map(|n| n.stat.mtime_ms.max(n.stat.ctime_ms))
            .max()
            .unwrap_or(0)
    });
    let mut faults = Vec::new();
    check_nodes(&nodes, settings, &mut faults);
    let ix = index(&nodes);
    check_queues(&ix, &mut faults);
    check_locks(&ix, settings, now_ms, &mut faults);
    check_leases(&ix, settings, now_ms, &mut faults);
    check_counters(&ix, &mut faults);
    check_research(&ix, &mut faults);
    check_catalog(&nodes, &mut faults);
    faults.sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
    if repair {
        for fault in faults.iter_mut() {
            let Some(plan) = fault.plan.clone() else {
                continue;
            };
            match apply(session, &plan).await {
                Ok(()) => {
                    fault.repaired = true;
                    tracing::info!(path = %fault.path, job = fault.job.as_deref().unwrap_or(""), episode = "unknown", state = "unknown", kind = ?fault.kind, repair = fault.repair.as_deref().unwrap_or(""), "fsck repaired");
                }
                Err(e) => fault.repair_error = Some(e),
            }
        }
    }
    let report = FsckReport {
        nodes: nodes.len(),
        repaired: faults.iter().filter(|f| f.repaired).count(),
        errors: faults.iter().filter(|f| f.is_open_error()).count(),
        warnings: faults
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count(),
        faults,
    };
    metrics::gauge!("archivist_fsck_errors").set(report.errors as f64);
    metrics::counter!("archivist_fsck_repairs_total").increment(report.repaired as u64);
    Ok(report)
}

async fn apply(session: &Session, plan: &Plan) -> std::result::Result<(), String> {
    match plan {
        Plan::CatchUp { counter: path } => {
            let c = counter::ALL
                .into_iter()
                .find(|c| c.path == *path)
                .ok_or_else(|| format!("{path} is not a counter"))?;
            counter::catch_up(session, &c)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Plan::Recreate { counter: path } => {
            let c = counter::ALL
                .into_iter()
                .find(|c| c.path == *path)
                .ok_or_else(|| format!("{path} is not a counter"))?;
            counter::recreate(session, &c)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Plan::Delete {
            path,
            version,
            unless,
        } => {
            if let Some(other) = unless {
                if store::exists(session, other)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_some()
                {
                    return Err(format!("{other} exists now; left alone"));
                }
            }
            match ops::commit(
                session,
                &[Op::Delete {
                    path: path.clone(),
                    version: *version,
                }],
            )
            .await
            {
                Ok(_) => Ok(()),
                Err(EngineError::Precondition {
                    source: archivist_engine::zk::Error::NoNode,
                    ..
                }) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        Plan::Requeue {
            job,
            version,
            delete,
            create,
        } => {
            let mut batch = vec![Op::Check {
                path: paths::job(job),
                version: *version,
            }];
            batch.extend(delete.iter().map(|p| Op::Delete {
                path: p.clone(),
                version: None,
            }));
            batch.extend(create.iter().map(|p| Op::Create {
                path: p.clone(),
                data: Vec::new(),
                mode: Mode::Persistent,
            }));
            ops::commit(session, &batch)
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    EngineError::Precondition { op, .. } => {
                        format!("{op} failed: the job moved meanwhile; run fsck again")
                    }
                    other => other.to_string(),
                })
        }
    }
}
