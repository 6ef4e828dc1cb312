//! `fsck`: checks the tree's invariants and, with `--repair`, fixes what is safe.
//!
//! Checked: every job is in exactly one queue, the one of its status, under the entry
//! name its priority and curation give; no queue entry without its job; no lock on a
//! job that no daemon should be working on (ephemeral owners are always live sessions,
//! so a stale lock is one on a failed, held or finished job); leases reference existing
//! jobs, last a positive time and are not overdue by more than the reaper's interval;
//! reports belong to existing jobs; no
//! id counter is behind the ids of the records it numbers; the research archive (in the
//! database) parses and matches the catalog; no two episodes (or clips) share a media URL and every media-URL alias points
//! at a record holding that URL; node sizes are under the limits; every node's data parses. Without `repair`
//! nothing is written (the read-only role can run it): ZooKeeper's time is then the
//! newest time seen on the tree, a lower bound.
//!
//! Repaired (each by its own compare-and-set write, re-checked first): orphan queue
//! entries and undecodable entry names are deleted; a job missing from its queue, or in
//! the wrong or several queues, keeps (or gets) the entry matching its status; leases of
//! missing jobs are deleted; reports of missing jobs are deleted; a counter behind its
//! ids is moved past them. Everything else
//! is reported for an operator.

//!
//! A walk is not atomic, so a job that moves while it is read can look inconsistent; the
//! findings a move can fake are confirmed by a second walk (same finding, job at the same
//! version) before they are reported.
//!
//! Parts: `index` (the tree read once, by kind), `jobs` (queues, locks and leases),
//! `records` (node sizes and parsing, counters, research, the catalog), `repair` (the
//! plans `--repair` carries out).

mod index;
mod jobs;
mod records;
mod repair;

use archivist_db::Database;
use archivist_engine::{clock, store, Session};
use serde::Serialize;

use crate::error::Result;
use crate::settings::{AdminSettings, Progress};
use crate::tree;

use index::index;
use jobs::{check_job_clips, check_leases, check_locks, check_queues, check_reports};
use records::{
    check_catalog, check_counters, check_directories, check_members, check_nodes, check_pauses,
    check_research,
};
use repair::{apply, Plan};

/// What kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A node's data does not parse as the record its path holds.
    Unparsable,
    /// A node's data is over ZooKeeper's limit.
    TooLarge,
    /// A catalog or research record left in ZooKeeper by a tree from before the
    /// database (warning): `archivist migrate`, then delete it.
    OldTreeRecord,
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
    /// A running job (`leased`/`researching`, locked by its researcher) without a lease
    /// (deleted by hand, warning): the planner counts its pairs as leased while the lock
    /// is held (outside 17g finding 7); `fsck` names it and what to do.
    RunningWithoutLease,
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
    /// A node under `/control/pause` that pauses nothing (not a state daemons claim
    /// from: `researching`, `bogus`), made by hand (warning).
    PauseIgnored,
    /// A directory `archivist init` creates is missing (deleted by hand): writes under it
    /// fail (`pause` without `/control/pause`); `archivist init` re-creates it.
    DirectoryMissing,
    /// A report whose job does not exist (or whose name names no job): nothing will ever
    /// record or remove it.
    ReportWithoutJob,
    /// A node under `/researchers`, `/daemons`, `/consumers/{state}` or `/election/{role}`
    /// that is not ephemeral (made by hand): no daemon's session owns it, so it is not
    /// counted as live nor as an election candidate (warning).
    MemberNotEphemeral,
    /// A job still to be researched (pending, leased, researching, held) that names a
    /// clip twice, a clip the catalog does not hold, or a pair another such job names
    /// too (warning: a record edited by hand; the pairs are researched as named, the
    /// unknown clip stored as an error, outside 17m L7).
    JobClips,
}

impl FaultKind {
    /// Can a consistent tree show this fault to a walk that is not atomic, because a job
    /// moved (or went) between the reads of its record, its queue entries, its lease
    /// and its reports? Such a finding is confirmed by a second read before it is
    /// reported.
    fn may_be_in_flight(self) -> bool {
        matches!(
            self,
            FaultKind::JobNotQueued
                | FaultKind::JobInWrongQueue
                | FaultKind::JobInSeveralQueues
                | FaultKind::OrphanQueueEntry
                | FaultKind::LeaseWithoutJob
                | FaultKind::LeaseMismatch
                | FaultKind::PendingWithoutLease
                | FaultKind::RunningWithoutLease
                | FaultKind::ReportWithoutJob
                | FaultKind::StaleLock
                | FaultKind::JobClips
        )
    }
}

/// What the database holds that the tree is checked against: the ids of the catalog's
/// episodes and clips (the database's, since issue 22), which research records are
/// checked against, and the research archive's highest job id, which the job counter
/// must be past (outside 17g finding 3).
#[derive(Debug, Default)]
pub(super) struct CatalogIds {
    pub(super) episodes: std::collections::BTreeSet<String>,
    pub(super) clips: std::collections::BTreeSet<String>,
    /// The catalog's clip numbers, as ranges: researched numbers are checked against
    /// them range by range.
    pub(super) clip_numbers: archivist_engine::schema::clipset::ClipSet,
    pub(super) archived: archivist_engine::counter::Archived,
}

impl CatalogIds {
    async fn read(db: &Database) -> Result<CatalogIds> {
        use archivist_engine::schema::records::AliasTarget;
        let clips: std::collections::BTreeSet<String> =
            archivist_db::catalog::ids(db, AliasTarget::Clip)
                .await?
                .into_iter()
                .collect();
        Ok(CatalogIds {
            episodes: archivist_db::catalog::ids(db, AliasTarget::Episode)
                .await?
                .into_iter()
                .collect(),
            clip_numbers: clips
                .iter()
                .filter_map(|c| archivist_engine::schema::paths::clip_number(c))
                .collect(),
            clips,
            archived: archivist_engine::counter::Archived::from_highest_job(
                archivist_db::research::highest_job(db).await?.as_deref(),
            ),
        })
    }
}

/// Every fault one read of the tree shows, by kind then path (the research archive,
/// in the database, is checked apart: [`check_research`]).
fn findings(
    nodes: &[tree::RawNode],
    catalog: &CatalogIds,
    settings: &AdminSettings,
    now_ms: i64,
) -> Vec<Fault> {
    let mut faults = Vec::new();
    check_nodes(nodes, &mut faults);
    let ix = index(nodes);
    check_queues(&ix, &mut faults);
    check_locks(&ix, settings, now_ms, &mut faults);
    check_job_clips(&ix, &catalog.clips, &mut faults);
    check_leases(&ix, settings, now_ms, &mut faults);
    check_reports(&ix, &mut faults);
    check_pauses(nodes, &mut faults);
    check_members(nodes, &mut faults);
    check_directories(nodes, &mut faults);
    check_counters(&ix, &catalog.archived, &mut faults);
    check_catalog(nodes, &mut faults);
    faults.sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
    faults
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

/// Settles the other findings on a node a repair deleted (an undecodable report of no
/// job is both `unparsable` and `report_without_job`): the node is gone, so they are not
/// "left" (counted so, `fsck --repair` exited 1 on a tree a plain `fsck` then called
/// clean, and told an operator to fix a node that no longer existed).
async fn settle_gone(session: &Session, faults: &mut [Fault]) -> Result<()> {
    let repaired: std::collections::BTreeSet<String> = faults
        .iter()
        .filter(|f| f.repaired)
        .map(|f| f.path.clone())
        .collect();
    for fault in faults
        .iter_mut()
        .filter(|f| !f.repaired && repaired.contains(&f.path))
    {
        if store::exists(session, &fault.path).await?.is_none() {
            fault.repaired = true;
            fault.repair = Some("none needed: the node went with another repair".to_string());
        }
    }
    Ok(())
}

/// Checks every invariant; with `repair`, fixes the safe faults and says what it did.
pub async fn fsck(
    session: &Session,
    db: &Database,
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
    let catalog = CatalogIds::read(db).await?;
    let mut faults = findings(&nodes, &catalog, settings, now_ms);
    if faults.iter().any(|f| f.kind.may_be_in_flight()) {
        // The walk is not atomic: a job moving between queues while it was read looks
        // like a job in no queue, in the wrong one, or an entry without its job. A real
        // inconsistency stays put; so read the tree again and keep such a finding only
        // if it is found again with its job at the same version (every move of a job
        // writes the job, so a job that moved meanwhile has another version).
        let again = tree::walk(session, settings, "/", progress).await?;
        let confirmed = findings(&again, &catalog, settings, now_ms);
        let (first, second) = (index(&nodes), index(&again));
        let version = |ix: &index::Index<'_>, job: Option<&str>| {
            job.and_then(|j| ix.jobs.get(j).map(|(node, _)| node.stat.version))
        };
        faults.retain(|f| {
            !f.kind.may_be_in_flight()
                || confirmed.iter().any(|c| {
                    (c.kind, &c.path, &c.job) == (f.kind, &f.path, &f.job)
                        && version(&first, f.job.as_deref()) == version(&second, f.job.as_deref())
                })
        });
    }
    // The research archive is in the database (issue 22): checked once, by pages.
    check_research(db, &catalog, settings, &mut faults).await?;
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
        settle_gone(session, &mut faults).await?;
    }
    let report = FsckReport {
        nodes: nodes.len(),
        repaired: faults.iter().filter(|f| f.repaired).count(),
        errors: faults.iter().filter(|f| f.is_open_error()).count(),
        warnings: faults
            .iter()
            .filter(|f| f.severity == Severity::Warning && !f.repaired)
            .count(),
        faults,
    };
    metrics::gauge!("archivist_fsck_errors").set(report.errors as f64);
    metrics::counter!("archivist_fsck_repairs_total").increment(report.repaired as u64);
    Ok(report)
}
