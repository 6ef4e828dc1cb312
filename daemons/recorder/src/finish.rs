//! The `reported` state consumer: closes a job after its final report.
//!
//! For a claimed `reported` job it stores every report of the job still in `/reports`,
//! then in one multi moves the job `reported -> recorded`, releases the lock and deletes
//! the lease (the seed's revocation). A report that cannot be stored fails the job
//! (`reported -> failed`, "report unusable: ...", lease deleted, report kept), so an
//! operator looks at it; contention only hands the job back for a later try.

use std::sync::Arc;
use std::time::Duration;

use archivist_engine::consumer::{Claimed, Step};
use archivist_engine::ops::Op;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{RecordError, UNUSABLE_REPORT};
use archivist_engine::schema::JobState;
use archivist_engine::transition::{LockAction, Role, Transition};
use archivist_engine::{jobs, store as zkstore, EngineError, Session};

use crate::backoff::DatabaseBackoff;
use crate::error::RecorderError;
use crate::settings::RecorderSettings;
use crate::store;
use archivist_db::Database;

/// Closes `reported` jobs; give it to `archivist_engine::consumer::run`.
#[derive(Debug, Clone)]
pub struct FinishStep {
    settings: RecorderSettings,
    db: Database,
    by: String,
    backoff: Arc<DatabaseBackoff>,
}

impl FinishStep {
    /// A step that acts as `by` (the recorder's identity name), storing into `db`.
    pub fn new(settings: RecorderSettings, db: Database, by: impl Into<String>) -> FinishStep {
        FinishStep {
            settings,
            db,
            by: by.into(),
            backoff: Arc::default(),
        }
    }
}

/// What closing a job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// The job is `recorded`; its lease is gone.
    Recorded {
        /// Clips this step stored (reports the `/reports` watcher had not taken yet).
        stored: usize,
    },
    /// A report could not be stored: the job is `failed` with the reason, its lease gone.
    Failed,
    /// The job moved meanwhile, or the reports stayed contended: lock released, nothing
    /// else done.
    HandedBack,
    /// The database refused the store (down, full, read-only): lock released, the
    /// reports wait; the step waits before its slot takes another job.
    DatabaseFailed,
}

/// The names of `job`'s reports still in `/reports`.
pub async fn reports_of(session: &Session, job: &str) -> Result<Vec<String>, EngineError> {
    Ok(zkstore::children(session, paths::REPORTS)
        .await?
        .into_iter()
        .filter(|n| paths::report_job(n) == Some(job))
        .collect())
}

fn unusable(err: RecorderError) -> EngineError {
    match err {
        RecorderError::Engine(e) => e,
        RecorderError::BadReport { path, reason } => EngineError::Record(RecordError::Malformed {
            path,
            kind: "ReportRecord",
            reason: format!("{UNUSABLE_REPORT}: {reason}"),
        }),
        other => EngineError::daemon(other),
    }
}

/// Moves the claimed job `reported -> failed` ("report unusable: ..."), deleting its
/// lease and releasing the lock in one multi; the report stays for an operator.
async fn fail(claimed: &Claimed, by: &str, reason: &str) -> Result<Finished, EngineError> {
    let session = &claimed.session;
    let Some((job, version)) = jobs::read_optional(session, &claimed.job.id).await? else {
        claimed.lock.clone().release(session).await?;
        return Ok(Finished::HandedBack);
    };
    let message = format!("{UNUSABLE_REPORT}: {reason}");
    let result = Transition::new(Role::Recorder, &job, version, JobState::Failed)
        .failed()
        .lock(LockAction::Release(claimed.lock.clone()))
        .edit(|j| j.message = Some(message.clone()))
        .event(by, "record", &message)
        .with_ops(lease_delete(session, &job.id).await?)
        .commit(session)
        .await;
    match result {
        Ok(_) => {
            tracing::error!(job = %job.id, episode = %job.episode, state = %JobState::Failed, %message, "job failed");
            Ok(Finished::Failed)
        }
        Err(e) if e.is_conflict() => {
            claimed.lock.clone().release(session).await?;
            Ok(Finished::HandedBack)
        }
        Err(e) => Err(e),
    }
}

/// The delete of `job`'s lease at its current version, if it has one.
async fn lease_delete(session: &Session, job: &str) -> Result<Option<Op>, EngineError> {
    Ok(archivist_engine::lease::revoke_ops(session, job)
        .await?
        .into_iter()
        .next())
}

/// Stores what is left of a claimed `reported` job and closes it. See the module docs.
///
/// # Errors
/// An unusable report (the consumer then fails the job with it as the reason), or a
/// ZooKeeper failure.
pub async fn finish(
    claimed: &Claimed,
    db: &Database,
    settings: &RecorderSettings,
    by: &str,
) -> Result<Finished, EngineError> {
    let session = &claimed.session;
    let job_id = claimed.job.id.as_str();
    let mut stored = 0;
    for attempt in 1..=settings.max_attempts {
        // Store leftovers until none remain (the watcher may be storing some too).
        loop {
            let names = reports_of(session, job_id).await?;
            if names.is_empty() {
                break;
            }
            for batch in names.chunks(settings.batch_size.max(1)) {
                match store::store_reports(session, db, settings, job_id, batch).await {
                    Ok(done) => {
                        stored += done.stored.len();
                        if let Some(err) = done.bad.into_iter().next() {
                            return fail(claimed, by, &err.to_string()).await;
                        }
                    }
                    Err(RecorderError::Contended { .. }) => {
                        claimed.lock.clone().release(session).await?;
                        return Ok(Finished::HandedBack);
                    }
                    Err(RecorderError::Database(e)) => {
                        // Not the job's fault: its reports wait for the database.
                        tracing::warn!(job = %job_id, episode = %claimed.job.episode, state = %claimed.job.status, error = %e, "storing reports in the database failed; job handed back");
                        claimed.lock.clone().release(session).await?;
                        return Ok(Finished::DatabaseFailed);
                    }
                    Err(e) => return Err(unusable(e)),
                }
            }
        }
        let (job, version) = match jobs::read_optional(session, job_id).await? {
            Some(found) => found,
            None => {
                claimed.lock.clone().release(session).await?;
                return Ok(Finished::HandedBack);
            }
        };
        if job.status != JobState::Reported {
            claimed.lock.clone().release(session).await?;
            return Ok(Finished::HandedBack);
        }
        let lease_delete = lease_delete(session, job_id).await?;
        let result = Transition::new(Role::Recorder, &job, version, JobState::Recorded)
            .lock(LockAction::Release(claimed.lock.clone()))
            .edit(|j| j.message = None)
            .event(by, "record", &format!("ok: {stored} clips stored at close"))
            .with_ops(lease_delete)
            .commit(session)
            .await;
        match result {
            Ok(_) => {
                metrics::counter!("archivist_recorder_jobs_recorded_total").increment(1);
                tracing::info!(job = %job.id, episode = %job.episode, state = %JobState::Recorded, stored, "job recorded; lease revoked");
                return Ok(Finished::Recorded { stored });
            }
            Err(e) if e.is_conflict() => {
                tracing::debug!(job = %job.id, episode = %job.episode, state = %job.status, attempt, error = %e, "close raced; re-reading");
                tokio::time::sleep(Duration::from_millis(10 * attempt as u64)).await;
            }
            Err(e) => return Err(e),
        }
    }
    claimed.lock.clone().release(session).await?;
    Ok(Finished::HandedBack)
}

impl Step for FinishStep {
    async fn run(&self, claimed: Claimed) -> Result<(), EngineError> {
        match finish(&claimed, &self.db, &self.settings, &self.by).await? {
            Finished::DatabaseFailed => {
                let wait = self.backoff.failed();
                tracing::warn!(
                    wait_s = wait.as_secs(),
                    "the database refused a store; waiting before the next job"
                );
                tokio::time::sleep(wait).await;
            }
            Finished::Recorded { .. } => self.backoff.succeeded(),
            Finished::Failed | Finished::HandedBack => {}
        }
        Ok(())
    }
}
