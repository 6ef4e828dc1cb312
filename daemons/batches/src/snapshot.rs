//! Reading what [`crate::evaluate`] needs: the research records of the batches'
//! episodes and the jobs that can still decide a pair: every queue but `recorded` and
//! `expired` (a `cancelled` job keeps its pairs out of planning until it is deleted, so
//! it decides them). Reads are pipelined.

use std::collections::BTreeSet;

use archivist_engine::schema::paths;
use archivist_engine::schema::records::{JobRecord, ResearchRecord};
use archivist_engine::schema::JobState;
use archivist_engine::{queue, store, Session};

use crate::error::BatchError;
use crate::evaluate::Knowledge;

/// Job states whose jobs can still decide a pair.
pub const LIVE_STATES: [JobState; 7] = [
    JobState::Pending,
    JobState::Leased,
    JobState::Researching,
    JobState::Reported,
    JobState::Failed,
    JobState::Held,
    JobState::Cancelled,
];

/// Loads research of `episodes` and the live jobs of those episodes.
///
/// # Errors
/// [`BatchError::Engine`] when ZooKeeper fails.
pub async fn load(
    session: &Session,
    episodes: &BTreeSet<String>,
    chunk: usize,
) -> Result<Knowledge, BatchError> {
    let research_paths: Vec<String> = episodes.iter().map(|e| paths::research(e)).collect();
    // An unreadable record is left out (logged): a pair only it would decide waits.
    let research =
        store::read_many_readable::<ResearchRecord>(session, &research_paths, chunk).await?;
    let mut job_paths = Vec::new();
    for state in LIVE_STATES {
        let (entries, _) = queue::list(session, state).await?;
        job_paths.extend(entries.into_iter().map(|e| paths::job(&e.job)));
    }
    job_paths.sort();
    job_paths.dedup();
    let jobs: Vec<JobRecord> = store::read_many_readable::<JobRecord>(session, &job_paths, chunk)
        .await?
        .into_iter()
        .filter(|job| episodes.contains(&job.episode) && LIVE_STATES.contains(&job.status))
        .collect();
    Ok(Knowledge::new(research, jobs))
}
