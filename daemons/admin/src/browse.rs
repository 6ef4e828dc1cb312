//! Bounded reads for browsing jobs (the web console): a page of jobs matching a filter,
//! and the failed jobs grouped by reason. Unlike `jobs list`, which reads every job it
//! may show, each call reads at most a fixed number of job nodes (`scan_limit`), so a
//! page costs the same at 100 jobs and at 100 000, and says where the next page starts.

use std::collections::BTreeMap;

use archivist_engine::schema::records::JobRecord;
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{queue, store, Session};
use serde::Serialize;

use crate::error::Result;
use crate::jobs::{JobFilter, JobSummary, Unreadable};
use crate::scan::{self, Loaded};
use crate::settings::{AdminSettings, Silent};

/// What a page of jobs shows: the filter of `jobs list` plus the console's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobQuery {
    /// State and episode, as in `jobs list` ([`JobFilter::matches`]).
    pub filter: JobFilter,
    /// Only jobs whose message (why it is where it is) contains this text, ignoring case.
    pub reason: Option<String>,
    /// Only jobs that research this clip.
    pub clip: Option<String>,
    /// Only jobs whose id sorts after this one (the previous page's `next`).
    pub after: Option<String>,
    /// Jobs per page (at least 1).
    pub limit: usize,
    /// Job nodes read at most for one page (at least 1): a filter that matches
    /// few jobs returns a short page and a `next` to go on from, rather than reading
    /// the whole tree.
    pub scan_limit: usize,
}

impl JobQuery {
    /// Does `job` pass every filter of the query?
    pub fn matches(&self, job: &JobRecord) -> bool {
        self.filter.matches(job)
            && self
                .clip
                .as_deref()
                .is_none_or(|c| job.clips.iter().any(|x| x == c))
            && self.reason.as_deref().is_none_or(|r| {
                job.message
                    .as_deref()
                    .is_some_and(|m| m.to_lowercase().contains(&r.to_lowercase()))
            })
    }
}

/// A page of jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobPage {
    /// Matching jobs, by id.
    pub jobs: Vec<JobSummary>,
    /// Job nodes that do not decode among those read (run `fsck`).
    pub unreadable: Vec<Unreadable>,
    /// Job nodes read for this page.
    pub scanned: usize,
    /// Where the next page starts (pass as `after`), if there may be more.
    pub next: Option<String>,
}

/// One page of jobs matching `query`, in id order. With a state, only that state's
/// queue is listed (the job's own status must match too, as in `jobs list`); otherwise
/// the names under `/jobs`. Then job nodes after `query.after` are read, a pipelined
/// batch at a time, until the page is full or `scan_limit` nodes were read.
pub async fn page(
    session: &Session,
    settings: &AdminSettings,
    query: &JobQuery,
) -> Result<JobPage> {
    let limit = query.limit.max(1);
    let scan_limit = query.scan_limit.max(1);
    let mut ids: Vec<String> = match query.filter.state {
        Some(state) => queue::list(session, state)
            .await?
            .0
            .into_iter()
            .map(|e| e.job)
            .collect(),
        None => store::children(session, paths::JOBS).await?,
    };
    ids.sort();
    ids.dedup();
    if let Some(after) = query.after.as_deref() {
        ids.retain(|id| id.as_str() > after);
    }
    let mut out = JobPage {
        jobs: Vec::new(),
        unreadable: Vec::new(),
        scanned: 0,
        next: None,
    };
    let chunk = settings.batch_size.clamp(1, scan_limit);
    let mut rest = ids.as_slice();
    while !rest.is_empty() && out.jobs.len() < limit && out.scanned < scan_limit {
        let take = chunk.min(rest.len()).min(scan_limit - out.scanned);
        let (batch, tail) = rest.split_at(take);
        rest = tail;
        let loaded: Vec<Loaded<JobRecord>> = scan::load(
            session,
            batch.iter().map(|id| paths::job(id)).collect(),
            settings,
            &Silent,
            "jobs",
        )
        .await?;
        out.scanned += take;
        // The last id this page considered: the one that filled it, else the batch's.
        let mut considered = batch.last().cloned();
        for node in loaded {
            match &node.record {
                Ok(job) if query.matches(job) => {
                    out.jobs.push(JobSummary::of(job, &node.stat));
                    if out.jobs.len() == limit {
                        considered = Some(node.name.clone());
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => out.unreadable.push(Unreadable {
                    path: node.path.clone(),
                    error: e.to_string(),
                }),
            }
        }
        out.next = considered.filter(|c| ids.last().is_some_and(|l| l > c));
    }
    Ok(out)
}

/// Failed jobs sharing one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonGroup {
    /// The message the jobs failed with (exactly as recorded).
    pub reason: String,
    /// How many of the failed jobs read carry it.
    pub count: usize,
    /// The lowest job id carrying it, to open one.
    pub example: String,
}

/// Failures grouped by reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failures {
    /// Jobs in the `failed` queue.
    pub failed: usize,
    /// Those read (at most the limit asked for).
    pub read: usize,
    /// Groups, the largest first.
    pub groups: Vec<ReasonGroup>,
}

/// The jobs of the `failed` queue grouped by their message, reading at most `limit` of
/// them (the queue's most urgent first, its own order).
pub async fn failures_by_reason(
    session: &Session,
    settings: &AdminSettings,
    limit: usize,
) -> Result<Failures> {
    let (entries, _) = queue::list(session, JobState::Failed).await?;
    let failed = entries.len();
    let job_paths: Vec<String> = entries
        .iter()
        .take(limit)
        .map(|e| paths::job(&e.job))
        .collect();
    let read = job_paths.len();
    let loaded = scan::load::<JobRecord>(session, job_paths, settings, &Silent, "jobs").await?;
    let mut groups: BTreeMap<String, ReasonGroup> = BTreeMap::new();
    for job in loaded.iter().filter_map(|n| n.ok()) {
        if job.status != JobState::Failed {
            continue;
        }
        let reason = job.message.clone().unwrap_or_else(|| "(no message)".into());
        let group = groups.entry(reason.clone()).or_insert(ReasonGroup {
            reason,
            count: 0,
            example: job.id.clone(),
        });
        group.count += 1;
        if job.id < group.example {
            group.example = job.id.clone();
        }
    }
    let mut groups: Vec<ReasonGroup> = groups.into_values().collect();
    groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    Ok(Failures {
        failed,
        read,
        groups,
    })
}
