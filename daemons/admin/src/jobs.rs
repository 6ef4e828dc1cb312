//! `jobs list` and `jobs show`: what jobs exist and everything about one of them.

use archivist_engine::schema::records::{
    JobEvent, JobProgress, JobRecord, JobRequest, LeaseRecord, LockRecord, ReportRecord,
};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{clock, store, Session};
use serde::Serialize;
use time::OffsetDateTime;

use crate::error::{AdminError, Result};
use crate::scan::{self, Loaded, NodeStat};
use crate::settings::{AdminSettings, Progress};

/// One line of `jobs list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSummary {
    /// Job id.
    pub id: String,
    /// Current state.
    pub status: JobState,
    /// Episode.
    pub episode: String,
    /// Number of clips to research.
    pub clips: usize,
    /// Queue priority.
    pub priority: i64,
    /// Times retried.
    pub retry_count: u32,
    /// Researcher working on it.
    pub holder: Option<String>,
    /// Pending admin request.
    pub request: Option<JobRequest>,
    /// Why it is where it is.
    pub message: Option<String>,
    /// Progress fraction.
    pub progress: f64,
    /// Last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated: OffsetDateTime,
    /// Node creation time (ZooKeeper's clock), unix ms.
    pub ctime_ms: i64,
    /// The record's data version when read: what a later action compares against
    /// (the console's confirmation posts it, so a job that moved is refused).
    #[serde(skip)]
    pub version: i32,
}

impl JobSummary {
    pub(crate) fn of(job: &JobRecord, stat: &NodeStat) -> JobSummary {
        JobSummary {
            id: job.id.clone(),
            status: job.status,
            episode: job.episode.clone(),
            clips: job.clips.len(),
            priority: job.priority,
            retry_count: job.retry_count,
            holder: job.holder.clone(),
            request: job.request,
            message: job.message.clone(),
            progress: job.progress.fraction,
            updated: job.updated,
            ctime_ms: stat.ctime_ms,
            version: stat.version,
        }
    }
}

/// A node that could not be decoded, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    /// Node path.
    pub path: String,
    /// Why.
    pub error: String,
}

/// Which jobs `jobs list` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs of this episode.
    pub episode: Option<String>,
}

impl JobFilter {
    /// Does `job` pass the filter? The one rule `jobs list` and the console's job pages
    /// ([`page`]) share.
    pub fn matches(&self, job: &JobRecord) -> bool {
        self.state.is_none_or(|s| s == job.status)
            && self.episode.as_deref().is_none_or(|e| e == job.episode)
    }
}

/// `jobs list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobList {
    /// Matching jobs, by id.
    pub jobs: Vec<JobSummary>,
    /// Job nodes that do not decode (run `fsck`).
    pub unreadable: Vec<Unreadable>,
}

/// Lists jobs. With a state, only that state's queue is read (the job's own status must
/// match too); otherwise every job is. With an episode and no job of it, the catalog in
/// `db` tells a typo from an episode with no jobs yet.
pub async fn list(
    session: &Session,
    db: &archivist_db::Database,
    settings: &AdminSettings,
    filter: &JobFilter,
    progress: &dyn Progress,
) -> Result<JobList> {
    let ids: Vec<String> = match filter.state {
        Some(state) => {
            let (entries, _) = archivist_engine::queue::list(session, state).await?;
            let mut ids: Vec<String> = entries.into_iter().map(|e| e.job).collect();
            ids.sort();
            ids.dedup();
            ids
        }
        None => store::children(session, paths::JOBS).await?,
    };
    let loaded: Vec<Loaded<JobRecord>> = scan::load(
        session,
        ids.iter().map(|id| paths::job(id)).collect(),
        settings,
        progress,
        "jobs",
    )
    .await?;
    let mut out = JobList {
        jobs: Vec::new(),
        unreadable: Vec::new(),
    };
    for node in loaded {
        match &node.record {
            Ok(job) => {
                if !filter.matches(job) {
                    continue;
                }
                out.jobs.push(JobSummary::of(job, &node.stat));
            }
            Err(e) => out.unreadable.push(Unreadable {
                path: node.path.clone(),
                error: e.to_string(),
            }),
        }
    }
    out.jobs.sort_by(|a, b| a.id.cmp(&b.id));
    // An episode that is not in the catalog and has no job is a typo, not "0 jobs"
    // (`results --episode` says so too; outside 17d finding 16d). Jobs of an episode
    // removed from the catalog are still listed.
    if let Some(episode) = filter.episode.as_deref() {
        if out.jobs.is_empty() && archivist_db::catalog::episode(db, episode).await?.is_none() {
            return Err(AdminError::NotFound {
                what: "episode",
                id: episode.to_string(),
                path: "not in the catalog database".to_string(),
            });
        }
    }
    Ok(out)
}

/// A lease and when it expires by ZooKeeper's clock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseView {
    /// Job (and lease) id.
    pub job: String,
    /// The record (absent if it does not decode).
    pub record: Option<LeaseRecord>,
    /// Decode error, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Last write (ZooKeeper's clock), unix ms.
    pub mtime_ms: i64,
    /// `mtime + duration_ms`, unix ms.
    pub expires_ms: i64,
    /// ms until expiry (negative: expired that long ago).
    pub remaining_ms: i64,
    /// Has it expired?
    pub expired: bool,
    /// Why it is invalid (a duration that is not positive, or past the maximum: the
    /// engine's [`archivist_engine::lease::validate_duration`]), if it is. Such a lease
    /// is neither active nor a lease any researcher claims; fsck reports `lease_invalid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
}

impl LeaseView {
    /// Judges a lease node against ZooKeeper's `now`.
    pub fn of(node: &Loaded<LeaseRecord>, now_ms: i64) -> LeaseView {
        let duration = node.ok().map(|r| r.duration_ms).unwrap_or(0);
        let expires_ms = archivist_engine::lease::expires_at(node.stat.mtime_ms, duration);
        LeaseView {
            job: node.name.clone(),
            record: node.ok().cloned(),
            error: node.record.as_ref().err().map(|e| e.to_string()),
            mtime_ms: node.stat.mtime_ms,
            expires_ms,
            remaining_ms: expires_ms.saturating_sub(now_ms),
            expired: expires_ms <= now_ms,
            invalid: node
                .ok()
                .and_then(|r| archivist_engine::lease::validate_duration(r.duration_ms).err())
                .map(|e| e.to_string()),
        }
    }
}

/// The job's lock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LockView {
    /// The record, if it decodes.
    pub record: Option<LockRecord>,
    /// Decode error, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The session that owns the ephemeral node (`0x...`).
    pub owner_session: Option<String>,
}

/// A report of the job waiting for a recorder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportView {
    /// Node name (`<job>-<clip>`).
    pub name: String,
    /// Clip id.
    pub clip: Option<String>,
    /// Occurrences found.
    pub occurrences: usize,
    /// Per-clip error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Last report of the job.
    pub is_final: bool,
}

/// `jobs show J`: everything about one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobDetail {
    /// The record.
    pub job: JobRecord,
    /// Its node's stat.
    pub stat: NodeStat,
    /// The queue entry name the job should have.
    pub queue_entry: String,
    /// Queues that hold that entry (exactly `[status]` when healthy).
    pub queued_in: Vec<JobState>,
    /// Its lock, if locked.
    pub lock: Option<LockView>,
    /// Its lease, if any.
    pub lease: Option<LeaseView>,
    /// Reports waiting under `/reports`.
    pub reports: Vec<ReportView>,
    /// ZooKeeper's clock when read, unix ms.
    pub now_ms: i64,
}

impl JobDetail {
    /// Progress of the job.
    pub fn progress(&self) -> &JobProgress {
        &self.job.progress
    }

    /// Event history, oldest first.
    pub fn events(&self) -> &[JobEvent] {
        &self.job.events
    }
}

/// `jobs show J`.
pub async fn show(session: &Session, settings: &AdminSettings, id: &str) -> Result<JobDetail> {
    let path = paths::job(id);
    let Some((job, stat)) = store::read::<JobRecord>(session, &path).await? else {
        return Err(AdminError::NotFound {
            what: "job",
            id: id.to_string(),
            path,
        });
    };
    // Read-only: see `clock::observed_ms`.
    let now_ms = clock::observed_ms(session).await?;
    let entry = job.queue_entry().name();
    let queue_paths: Vec<String> = JobState::ALL
        .iter()
        .map(|s| paths::queue_entry(*s, &entry))
        .collect();
    let stats = scan::stat_many(session, &queue_paths, settings).await?;
    let queued_in = JobState::ALL
        .iter()
        .zip(stats)
        .filter(|(_, s)| s.is_some())
        .map(|(s, _)| *s)
        .collect();
    let lock = match store::read_raw(session, &paths::job_lock(id)).await? {
        Some((bytes, lstat)) => {
            let decoded = archivist_engine::schema::records::decode::<LockRecord>(
                &paths::job_lock(id),
                &bytes,
            );
            Some(LockView {
                error: decoded.as_ref().err().map(|e| e.to_string()),
                record: decoded.ok(),
                owner_session: NodeStat::from(&lstat).owner_hex(),
            })
        }
        None => None,
    };
    let lease = scan::load::<LeaseRecord>(
        session,
        vec![paths::lease(id)],
        settings,
        &crate::settings::Silent,
        "lease",
    )
    .await?
    .first()
    .map(|node| LeaseView::of(node, now_ms));
    let prefix = format!("{id}-");
    let report_paths: Vec<String> = store::children(session, paths::REPORTS)
        .await?
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .map(|n| paths::report(&n))
        .collect();
    let reports = scan::load::<ReportRecord>(
        session,
        report_paths,
        settings,
        &crate::settings::Silent,
        "reports",
    )
    .await?
    .into_iter()
    .map(|node| match &node.record {
        Ok(r) => ReportView {
            name: node.name.clone(),
            clip: Some(r.clip.clone()),
            occurrences: r.occurrences.len(),
            error: r.error.clone(),
            is_final: r.is_final,
        },
        Err(e) => ReportView {
            name: node.name.clone(),
            clip: None,
            occurrences: 0,
            error: Some(e.to_string()),
            is_final: false,
        },
    })
    .collect();
    Ok(JobDetail {
        stat: NodeStat::from(&stat),
        queue_entry: entry,
        queued_in,
        lock,
        lease,
        reports,
        now_ms,
        job,
    })
}
