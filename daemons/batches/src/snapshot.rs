//! Reading what [`crate::evaluate`] needs: the research records of the batches'
//! episodes (from the database, issue 22) and the jobs that can still decide a pair:
//! every queue but `recorded` and `expired` (a `cancelled` job keeps its pairs out of
//! planning until it is deleted, so it decides them). ZooKeeper reads are pipelined.

use std::collections::BTreeSet;

use archivist_db::{research, Database, DbError};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::JobRecord;
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

/// Loads research of `episodes` (from `db`) and the live jobs of those episodes.
///
/// # Errors
/// [`BatchError::Engine`] when ZooKeeper fails; [`BatchError::Db`] when the database
/// does (not for a record that does not decode: that one is left out, logged).
pub async fn load(
    session: &Session,
    db: &Database,
    episodes: &BTreeSet<String>,
    chunk: usize,
) -> Result<Knowledge, BatchError> {
    let mut research = Vec::new();
    for episode in episodes {
        match research::read(db, episode).await {
            Ok(Some(record)) => research.push(record),
            Ok(None) => {}
            // An unreadable record is left out (logged): a pair only it would decide
            // waits.
            Err(e @ DbError::Corrupt { .. }) => {
                tracing::warn!(episode, error = %e, "unreadable research record; its pairs wait (see `archivist fsck`)");
            }
            Err(e) => return Err(e.into()),
        }
    }
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
