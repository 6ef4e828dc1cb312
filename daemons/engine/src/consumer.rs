//! The consumer loop: claim the first lockable job of a state's queue, run a step on it,
//! repeat, with a concurrency limit.
//!
//! It wakes on a watch of the queue directory and polls as a fallback (a missed watch
//! only delays work). While `/control/pause/{state}` exists it claims nothing new.
//! Each claimed job gets the session's `lost` token (stop now, commit nothing) and a
//! `shutdown` token (wind down at a safe point).

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use znode_schema::paths;
use znode_schema::records::JobRecord;
use znode_schema::JobState;

use crate::error::{EngineError, Result};
use crate::jobs;
use crate::lock::JobLock;
use crate::queue;
use crate::session::Session;
use crate::store;
use crate::transition::{machine, LockAction, Transition};

/// A job this worker holds the lock on, re-checked to be in the expected state.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The job as read after locking.
    pub job: JobRecord,
    /// Its data version.
    pub version: i32,
    /// The lock.
    pub lock: JobLock,
    /// The session holding the lock.
    pub session: Session,
    /// Fires when the daemon shuts down: finish at a safe point and hand the job back.
    pub shutdown: CancellationToken,
}

impl Claimed {
    /// Fires when the session is lost: stop at once, commit nothing.
    pub fn lost(&self) -> CancellationToken {
        self.session.lost()
    }
}

/// Takes the first job of `state`'s queue whose lock is free, skipping `skip`. After
/// locking, the job is re-read: one that moved meanwhile is unlocked and passed over.
pub async fn claim_next(
    session: &Session,
    state: JobState,
    owner: &str,
    skip: &HashSet<String>,
    shutdown: &CancellationToken,
) -> Result<Option<Claimed>> {
    let (entries, _bad) = queue::list(session, state).await?;
    for entry in entries {
        if skip.contains(&entry.job) {
            continue;
        }
        let Some(lock) = JobLock::try_acquire(session, &entry.job, owner).await? else {
            continue;
        };
        match jobs::read_optional(session, &entry.job).await {
            Ok(Some((job, version))) if job.status == state && job.queue_entry() == entry => {
                return Ok(Some(Claimed {
                    job,
                    version,
                    lock,
                    session: session.clone(),
                    shutdown: shutdown.child_token(),
                }));
            }
            Ok(_) => lock.release(session).await?,
            Err(EngineError::Record(err)) => {
                // An unreadable job cannot be moved by a transition (that needs its
                // data); leave it locked-free for fsck and say so.
                tracing::error!(job = %entry.job, episode = "unknown", %state, %err, "unreadable job in queue; skipping (run `archivist fsck`)");
                lock.release(session).await?;
            }
            Err(e) => {
                let _ = lock.release(session).await;
                return Err(e);
            }
        }
    }
    Ok(None)
}

/// Is the state paused by an operator?
pub async fn is_paused(session: &Session, state: JobState) -> Result<bool> {
    Ok(store::exists(session, &paths::pause(state))
        .await?
        .is_some())
}

/// Moves a job the worker still holds to its state's failure target with a reason, and
/// releases the lock. Used when a step errs without transitioning. Re-reads the job
/// first; if it moved or the lock is gone, does nothing.
pub async fn fail_held_job(session: &Session, lock: JobLock, by: &str, reason: &str) -> Result<()> {
    let Some((job, version)) = jobs::read_optional(session, &lock.job).await? else {
        return lock.release(session).await;
    };
    let Some(to) = machine().state(job.status).on_failure else {
        return lock.release(session).await;
    };
    let reason = reason.to_string();
    let result = Transition::new(&job, version, to)
        .failed()
        .lock(LockAction::Release(lock.clone()))
        .edit(|j| j.message = Some(reason.clone()))
        .event(by, "fail", &reason)
        .commit(session)
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.is_conflict() => lock.release(session).await,
        Err(e) => Err(e),
    }
}

/// Options for [`run`].
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// Queue to consume.
    pub state: JobState,
    /// Identity written into locks and events.
    pub owner: String,
    /// Jobs run at once. Defaults to 1.
    pub concurrency: usize,
    /// Poll interval when no watch fires. Defaults to 2 s.
    pub poll_interval: Duration,
}

impl ConsumerOptions {
    /// Options for a state and owner, with defaults.
    pub fn new(state: JobState, owner: impl Into<String>) -> ConsumerOptions {
        ConsumerOptions {
            state,
            owner: owner.into(),
            concurrency: 1,
            poll_interval: Duration::from_secs(2),
        }
    }

    /// Sets the concurrency. Defaults to 1.
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Sets the poll interval. Defaults to 2 s.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }
}

/// The work done on a claimed job. It commits its own transitions (so it can add lease
/// or report operations to them); if it returns an error while still holding the lock,
/// the loop moves the job to its state's failure target with the error as the reason.
pub trait Step: Send + Sync + 'static {
    /// Runs the step.
    fn run(&self, claimed: Claimed) -> impl Future<Output = Result<()>> + Send;
}

/// Runs the consumer until `shutdown` fires or the session is lost, then waits for the
/// jobs in flight to finish. Returns [`EngineError::SessionLost`] if the session went.
pub async fn run<S: Step>(
    session: &Session,
    options: ConsumerOptions,
    step: Arc<S>,
    shutdown: CancellationToken,
) -> Result<()> {
    let slots = Arc::new(Semaphore::new(options.concurrency));
    let active: Arc<Mutex<HashSet<String>>> = Arc::default();
    let tracker = TaskTracker::new();
    let lost = session.lost();
    let queue_path = paths::queue(options.state);
    let result = loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break Ok(()),
            },
            _ = shutdown.cancelled() => break Ok(()),
            _ = lost.cancelled() => break Err(EngineError::SessionLost("while waiting for a slot".into())),
        };
        // Set the watch before looking, so a job queued after the look still wakes us.
        let watch = session.client().get_and_watch_children(&queue_path).await;
        let paused = match is_paused(session, options.state).await {
            Ok(p) => p,
            Err(e) if e.is_session_lost() => break Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "checking pause failed");
                false
            }
        };
        let claimed = if paused {
            None
        } else {
            let skip = active.lock().map(|a| a.clone()).unwrap_or_default();
            match claim_next(session, options.state, &options.owner, &skip, &shutdown).await {
                Ok(c) => c,
                Err(e) if e.is_session_lost() => break Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, state = %options.state, "claim failed; retrying");
                    None
                }
            }
        };
        match claimed {
            Some(claimed) => {
                let step = step.clone();
                let active = active.clone();
                let owner = options.owner.clone();
                let job_id = claimed.job.id.clone();
                if let Ok(mut a) = active.lock() {
                    a.insert(job_id.clone());
                }
                let span = crate::logs::job_span(&claimed.job);
                tracker.spawn(
                    async move {
                        let lock = claimed.lock.clone();
                        let session = claimed.session.clone();
                        if let Err(err) = step.run(claimed).await {
                            if err.is_session_lost() {
                                tracing::warn!(
                                    "session lost during step; the job is left to the reaper"
                                );
                            } else {
                                tracing::warn!(error = %err, "step failed");
                                if let Err(e) =
                                    fail_held_job(&session, lock, &owner, &err.to_string()).await
                                {
                                    tracing::warn!(error = %e, "could not record the failure");
                                }
                            }
                        }
                        if let Ok(mut a) = active.lock() {
                            a.remove(&job_id);
                        }
                        drop(permit);
                    }
                    .instrument(span),
                );
            }
            None => {
                drop(permit);
                let poll = tokio::time::sleep(options.poll_interval);
                match watch {
                    Ok((_, _, watcher)) => tokio::select! {
                        _ = watcher.changed() => {}
                        _ = poll => {}
                        _ = shutdown.cancelled() => break Ok(()),
                        _ = lost.cancelled() => break Err(EngineError::SessionLost("while idle".into())),
                    },
                    Err(_) => tokio::select! {
                        _ = poll => {}
                        _ = shutdown.cancelled() => break Ok(()),
                        _ = lost.cancelled() => break Err(EngineError::SessionLost("while idle".into())),
                    },
                }
            }
        }
    };
    tracker.close();
    tracker.wait().await;
    result
}
