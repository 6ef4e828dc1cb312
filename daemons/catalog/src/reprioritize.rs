//! Re-ordering the pending work of episodes whose priority changed.
//!
//! Jobs copy their episode's priority into their queue entry name, so a new priority
//! only takes effect for work not yet leased when those entries are renamed
//! (`archivist_engine::jobs::reprioritize`, which locks, re-checks `pending`, and renames
//! in one multi). Jobs are found by listing `/queues/pending` and reading the jobs
//! (pipelined): fine at this scale (the planner keeps the queue short).

use std::collections::BTreeMap;

use archivist_engine::schema::paths;
use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::records::{decode, JobRecord};
use archivist_engine::schema::JobState;
use archivist_engine::{jobs, store, EngineError, Session};

use crate::pipeline;

/// For each episode id -> new priority, re-orders its pending jobs whose priority
/// differs. Returns how many jobs were re-ordered. Jobs that moved on meanwhile (leased,
/// locked) are left alone: they are no longer waiting.
pub async fn reprioritize_episodes(
    session: &Session,
    changes: &BTreeMap<String, i64>,
    by: &str,
    window: usize,
) -> Result<usize, EngineError> {
    if changes.is_empty() {
        return Ok(0);
    }
    let entries = store::children(session, &paths::queue(JobState::Pending)).await?;
    let ids: Vec<String> = entries
        .iter()
        .filter_map(|name| QueueEntry::parse(name).ok().map(|e| e.job))
        .collect();
    let job_paths: Vec<String> = ids.iter().map(|id| paths::job(id)).collect();
    let reads = pipeline::read_many(session, &job_paths, window).await?;
    let mut moved = 0;
    for ((id, path), read) in ids.iter().zip(&job_paths).zip(reads) {
        let Some((bytes, _)) = read else { continue };
        let job: JobRecord = match decode(path, &bytes) {
            Ok(job) => job,
            Err(e) => {
                tracing::warn!(job = %id, episode = "unknown", state = "pending", error = %e, "unreadable job skipped while re-ordering");
                continue;
            }
        };
        let Some(&priority) = changes.get(&job.episode) else {
            continue;
        };
        if job.priority == priority || job.status != JobState::Pending {
            continue;
        }
        if jobs::reprioritize(session, id, priority, by).await? {
            tracing::info!(job = %id, episode = %job.episode, state = "pending", from = job.priority, to = priority, "pending job re-ordered");
            metrics::counter!("archivist_catalog_jobs_reprioritized_total").increment(1);
            moved += 1;
        }
    }
    Ok(moved)
}
