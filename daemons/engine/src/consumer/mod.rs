//! The consumer loop: claim a lockable job near the head of a state's queue, run a step
//! on it, repeat, with a concurrency limit.
//!
//! The loop keeps a live copy of the queue ([`QueueView`], a persistent watch) instead of
//! listing the queue before every claim, and knows whether its state is paused from a
//! watch on `/control/pause/{state}` instead of asking before every claim. It re-lists
//! when the connection dropped and, as a fallback for a missed event, whenever it has
//! been idle for a poll interval (a missed event only delays work). While the pause node
//! exists it claims nothing new. Consumers started together spread their claims over the
//! first few claimable entries ([`ConsumerOptions::with_spread`]) instead of all racing
//! for the first one, and an entry whose lock another worker holds is passed over for a
//! poll interval (or until it leaves the queue).
//!
//! Whatever the view says, a claim takes the job's lock and re-reads the job (both sent
//! in one round trip, [`JobLock::try_acquire_and_read`]) and passes over a job that is
//! not where its entry says. Each claimed job gets the session's `lost` token (stop now,
//! commit nothing) and a `shutdown` token (wind down at a safe point).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use znode_schema::paths;
use znode_schema::queue_key::QueueEntry;
use znode_schema::records::{self, JobRecord};
use znode_schema::JobState;
use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::group::{ConsumerGroup, Share};
use crate::jobs;
use crate::lock::{JobLock, LockGuard};
use crate::queue::{self, QueueView};
use crate::session::Session;
use crate::store;
use crate::transition::{machine, LockAction, Role, Transition};

mod claim;
mod claimer;
mod pause;
mod queue_dir;

pub use claim::*;
pub use claimer::*;
pub use pause::*;
pub use queue_dir::QueueDir;

/// Moves a job the worker still holds to its state's failure target with a reason, and
/// releases the lock. Used when a step errs without transitioning. Re-reads the job
/// first; if it moved or the lock is gone, does nothing.
pub async fn fail_held_job(
    session: &Session,
    lock: JobLock,
    role: Role,
    by: &str,
    reason: &str,
) -> Result<()> {
    let lock = LockGuard::new(session, lock);
    let Some((job, version)) = jobs::read_optional(session, &lock.lock().job).await? else {
        return lock.release().await;
    };
    let Some(to) = machine().state(job.status).on_failure else {
        return lock.release().await;
    };
    let reason = reason.to_string();
    let result = Transition::new(role, &job, version, to)
        .failed()
        .lock(LockAction::Release(lock.lock().clone()))
        .edit(|j| j.message = Some(reason.clone()))
        .event(by, "fail", &reason)
        .commit(session)
        .await;
    match result {
        Ok(_) => {
            lock.committed();
            Ok(())
        }
        Err(e) if e.is_conflict() => lock.release().await,
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
    /// The role the consumer acts as in the state table's `by` column (failing a job
    /// whose step erred is a move of that role). Defaults to the table's consumer of
    /// `state`; `None` if it has none (a failed step then only frees the job).
    pub role: Option<Role>,
    /// Jobs run at once. Defaults to 1.
    pub concurrency: usize,
    /// Poll interval when no watch fires. Defaults to 2 s.
    pub poll_interval: Duration,
    /// Each claim picks at random among this many first claimable entries. Defaults to
    /// [`DEFAULT_SPREAD`].
    pub spread: usize,
    /// Where to count claim attempts besides the metric, if anywhere.
    pub stats: Option<Arc<ClaimStats>>,
}

/// The role the state table names as the consumer of `state`, if any.
pub fn consumer_role(state: JobState) -> Option<Role> {
    machine()
        .state(state)
        .consumer
        .as_deref()
        .and_then(Role::named)
}

/// Default of [`ConsumerOptions::spread`].
pub const DEFAULT_SPREAD: usize = 4;

impl ConsumerOptions {
    /// Options for a state and owner, with defaults.
    pub fn new(state: JobState, owner: impl Into<String>) -> ConsumerOptions {
        ConsumerOptions {
            state,
            owner: owner.into(),
            role: consumer_role(state),
            concurrency: 1,
            poll_interval: Duration::from_secs(2),
            spread: DEFAULT_SPREAD,
            stats: None,
        }
    }

    /// Acts as `role` (see [`ConsumerOptions::role`]).
    pub fn with_role(mut self, role: Role) -> Self {
        self.role = Some(role);
        self
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

    /// Sets how many of the first claimable entries a claim picks among at random (1:
    /// strictly the first; more: consumers started together collide less on the head of
    /// the queue, at the cost of strict order among those entries). Defaults to
    /// [`DEFAULT_SPREAD`].
    pub fn with_spread(mut self, spread: usize) -> Self {
        self.spread = spread.max(1);
        self
    }

    /// Counts claim attempts into `stats` (besides the metric).
    pub fn with_stats(mut self, stats: Arc<ClaimStats>) -> Self {
        self.stats = Some(stats);
        self
    }
}

/// The work done on a claimed job. It commits its own transitions (so it can add lease
/// or report operations to them); if it returns an error while still holding the lock,
/// the loop moves the job to its state's failure target with the error as the reason.
pub trait Step: Send + Sync + 'static {
    /// Runs the step.
    fn run(&self, claimed: Claimed) -> impl Future<Output = Result<()>> + Send;

    /// Jobs the loop must not claim now, besides those in flight: a job the step left
    /// alone a moment ago (the researcher passes over a job whose lease is gone for a
    /// while, instead of locking and releasing it again in a tight loop). Asked before
    /// every claim. Defaults to none.
    fn pass_over(&self) -> HashSet<String> {
        HashSet::new()
    }
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
    let mut claimer = Claimer::new(
        options.state,
        options.owner.clone(),
        options.poll_interval,
        options.spread,
    );
    if let Some(stats) = &options.stats {
        claimer = claimer.with_stats(stats.clone());
    }
    claimer.join_group(session, options.concurrency).await;
    let mut pause = PauseFlag::new(options.state);
    let mut queue_dir = QueueDir::new(options.state, options.role.map(Role::as_str));
    let result = loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break Ok(()),
            },
            _ = shutdown.cancelled() => break Ok(()),
            _ = lost.cancelled() => break Err(EngineError::SessionLost("while waiting for a slot".into())),
        };
        let paused = match pause.get(session).await {
            Ok(p) => p,
            Err(e) if e.is_session_lost() => break Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "checking pause failed");
                false
            }
        };
        // Every free slot is filled in the same round trip.
        let mut permits = vec![permit];
        while let Ok(more) = slots.clone().try_acquire_owned() {
            permits.push(more);
        }
        let claimed = if paused {
            Vec::new()
        } else {
            let mut skip = active.lock().map(|a| a.clone()).unwrap_or_default();
            skip.extend(step.pass_over());
            match claimer
                .claim_many(session, permits.len(), &skip, &shutdown)
                .await
            {
                Ok(c) => c,
                Err(e) if e.is_session_lost() => break Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, state = %options.state, "claim failed; retrying");
                    claimer.invalidate();
                    Vec::new()
                }
            }
        };
        if claimed.is_empty() {
            drop(permits);
            // An empty queue may be a missing one: checked while idle with nothing in
            // view, so a busy consumer pays nothing for it.
            if claimer.is_empty() || queue_dir.is_missing() {
                match queue_dir.check(session).await {
                    Ok(()) => {}
                    Err(e) if e.is_session_lost() => break Err(e),
                    Err(e) => {
                        tracing::warn!(error = %e, state = %options.state, "checking the queue directory failed")
                    }
                }
            }
            tokio::select! {
                _ = claimer.changed() => {}
                _ = pause.changed() => {}
                _ = tokio::time::sleep(options.poll_interval) => claimer.invalidate(),
                _ = shutdown.cancelled() => break Ok(()),
                _ = lost.cancelled() => break Err(EngineError::SessionLost("while idle".into())),
            }
            continue;
        }
        // Slots left unfilled go back at once (dropped with the rest of `permits`).
        for (claimed, permit) in claimed.into_iter().zip(permits) {
            let step = step.clone();
            let active = active.clone();
            let owner = options.owner.clone();
            let role = options.role;
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
                        } else if err.is_retryable() && !err.is_conflict() {
                            // A dropped connection (a leader change) is not the job's fault:
                            // steps are idempotent, so free the job to be claimed again
                            // once the session reconnects, whatever state the last write
                            // left it in.
                            tracing::warn!(error = %err, "connection dropped mid-step; the job will be claimed again");
                            if let Err(e) = lock.release(&session).await {
                                tracing::warn!(error = %e, "could not release the lock; the session's end will");
                            }
                        } else if let Some(role) = role {
                            tracing::warn!(error = %err, "step failed");
                            if let Err(e) =
                                fail_held_job(&session, lock, role, &owner, &err.to_string())
                                    .await
                            {
                                tracing::warn!(error = %e, "could not record the failure");
                            }
                        } else {
                            tracing::warn!(error = %err, "step failed; no role to fail the job as, freeing it");
                            if let Err(e) = lock.release(&session).await {
                                tracing::warn!(error = %e, "could not release the lock; the session's end will");
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
    };
    tracker.close();
    tracker.wait().await;
    result
}
