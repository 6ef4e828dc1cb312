//! Job invariants: every job in exactly the queue of its status, no orphan or
//! undecodable queue entry, no stale lock, leases that match their jobs and are not
//! overdue, no report of a job that does not exist.

use std::collections::{BTreeMap, BTreeSet};

use archivist_engine::lease;
use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::records::{self, LeaseRecord, LockRecord};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::transition::machine;

use crate::scan::NodeStat;
use crate::settings::AdminSettings;
use crate::tree::RawNode;

use super::index::Index;
use super::{Fault, FaultKind, Plan, Severity};

pub(super) fn check_queues(ix: &Index<'_>, faults: &mut Vec<Fault>) {
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
                    format!(
                        "the record says id {}: edited by hand? Its queue entries are kept and the daemons leave it alone; set its `id` back to {id} (zkCli `set`)",
                        job.id
                    ),
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

/// What a job still to be researched names: each clip once, each in the catalog, and
/// no pair another such job names too (outside 17m L7: jobs edited by hand to name a
/// clip twice, an unknown clip, or another job's pairs passed fsck clean).
pub(super) fn check_job_clips(
    ix: &Index<'_>,
    catalog: &std::collections::BTreeSet<String>,
    faults: &mut Vec<Fault>,
) {
    let waiting = |s: JobState| {
        matches!(
            s,
            JobState::Pending | JobState::Leased | JobState::Researching | JobState::Held
        )
    };
    let mut pairs: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for (id, (node, job)) in &ix.jobs {
        let Some(job) = job.as_ref().filter(|j| waiting(j.status)) else {
            continue;
        };
        let mut problems = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for clip in &job.clips {
            if !seen.insert(clip.as_str()) {
                problems.push(format!("names clip {clip} twice"));
                continue;
            }
            if !catalog.contains(clip) {
                problems.push(format!(
                    "names clip {clip}, which the catalog does not hold (it would be stored as that clip's error)"
                ));
            }
            if let Some(other) = pairs.insert((job.episode.as_str(), clip.as_str()), id) {
                problems.push(format!(
                    "names the pair ({}, {clip}) that job {other} names too (it would be researched twice)",
                    job.episode
                ));
            }
        }
        if !problems.is_empty() {
            faults.push(
                Fault::new(
                    FaultKind::JobClips,
                    Severity::Warning,
                    &node.path,
                    format!(
                        "{} job {}; the planner never makes such a job, so its record was edited by hand: `archivist delete {id}` (after `hold --job`) lets the planner plan its pairs again",
                        job.status,
                        problems.join("; ")
                    ),
                )
                .job(id),
            );
        }
    }
}

pub(super) fn check_locks(
    ix: &Index<'_>,
    settings: &AdminSettings,
    now_ms: i64,
    faults: &mut Vec<Fault>,
) {
    // A claim or an admin action holds a pending job's lock for a few round trips.
    let held_too_long_ms = settings.reaper_interval_ms().saturating_mul(2).max(1000);
    for (id, node) in &ix.locks {
        let owner = NodeStat::owner_hex(&node.stat)
            .unwrap_or_else(|| "no session (persistent node)".into());
        if let Some((_, Some(job))) = ix.jobs.get(id) {
            let held_ms = now_ms - node.stat.ctime_ms;
            // A persistent lock is its own error (stale_lock, with what to do): the
            // warning's "restart that daemon" would send the operator after a session
            // that does not exist (outside 17m L5).
            let persistent = node.stat.ephemeral_owner == 0;
            if job.status == JobState::Pending && held_ms > held_too_long_ms && !persistent {
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

pub(super) fn check_leases(
    ix: &Index<'_>,
    settings: &AdminSettings,
    now_ms: i64,
    faults: &mut Vec<Fault>,
) {
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
    let locked: BTreeSet<&str> = ix.locks.iter().map(|(id, _)| *id).collect();
    for (id, (node, job)) in &ix.jobs {
        let Some(job) = job else { continue };
        let running = matches!(job.status, JobState::Leased | JobState::Researching);
        if running && !leased.contains(id) && locked.contains(id) {
            faults.push(
                Fault::new(
                    FaultKind::RunningWithoutLease,
                    Severity::Warning,
                    &node.path,
                    format!(
                        "{} ({}, locked by its researcher) has no lease (deleted by hand?): the planner counts its pairs as leased while the lock is held and the researcher reports on; if it is stuck, `archivist cancel {id}` or stop its researcher (the reaper then expires it)",
                        id, job.status
                    ),
                )
                .job(id),
            );
        }
    }
}

/// A report belongs to its job (`<job>-<clip>`): only that job can have it recorded, so a
/// report whose job does not exist waits for a recorder forever. `delete` removes a job's
/// reports with it; one left by an older build, or by hand, is an error, and `--repair`
/// deletes it (unless its job exists by then).
pub(super) fn check_reports(ix: &Index<'_>, faults: &mut Vec<Fault>) {
    for (name, node) in &ix.reports {
        let job = paths::report_job(name);
        if job.is_some_and(|job| ix.jobs.contains_key(job)) {
            continue;
        }
        let detail = match job {
            Some(job) => {
                format!("report of job {job}, which does not exist: no recorder will ever take it")
            }
            None => format!("{name:?} is not <job>-<clip>: no recorder will ever take it"),
        };
        let fault = Fault::new(
            FaultKind::ReportWithoutJob,
            Severity::Error,
            &node.path,
            detail,
        );
        let fault = match job {
            Some(job) => fault.job(job),
            None => fault,
        };
        faults.push(fault.plan(
            "delete the report",
            Plan::Delete {
                path: node.path.clone(),
                version: Some(node.stat.version),
                unless: job.map(paths::job),
            },
        ));
    }
}
