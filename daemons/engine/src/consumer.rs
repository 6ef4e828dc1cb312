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
use crate::jobs;
use crate::lock::JobLock;
use crate::queue::{self, QueueView};
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

/// What trying to claim one queue entry found.
enum Attempt {
    /// Locked and re-checked: ours.
    Claimed(Box<Claimed>),
    /// Another worker holds the job's lock (or the job is gone).
    Busy,
    /// The job is not where the entry says (it moved, or cannot be read); the lock we
    /// took was released again.
    Moved,
}

/// Tries to claim the job of one queue entry: takes its lock and re-reads it (in one
/// round trip), and keeps it only if the job is still in `state` under this entry.
async fn try_claim(
    session: &Session,
    state: JobState,
    entry: &QueueEntry,
    owner: &str,
    shutdown: &CancellationToken,
) -> Result<Attempt> {
    let job_path = paths::job(&entry.job);
    let Some((lock, read)) =
        JobLock::try_acquire_and_read(session, &entry.job, owner, &job_path).await?
    else {
        return Ok(Attempt::Busy);
    };
    let read = read.and_then(|found| match found {
        Some((bytes, stat)) => Ok(Some((
            records::decode::<JobRecord>(&job_path, &bytes)?,
            stat.version,
        ))),
        None => Ok(None),
    });
    match read {
        Ok(Some((job, version))) if job.status == state && job.queue_entry() == *entry => {
            Ok(Attempt::Claimed(Box::new(Claimed {
                job,
                version,
                lock,
                session: session.clone(),
                shutdown: shutdown.child_token(),
            })))
        }
        Ok(_) => {
            lock.release(session).await?;
            Ok(Attempt::Moved)
        }
        Err(EngineError::Record(err)) => {
            // An unreadable job cannot be moved by a transition (that needs its
            // data); leave it locked-free for fsck and say so.
            tracing::error!(job = %entry.job, episode = "unknown", %state, %err, "unreadable job in queue; skipping (run `archivist fsck`)");
            lock.release(session).await?;
            Ok(Attempt::Moved)
        }
        Err(e) => {
            let _ = lock.release(session).await;
            Err(e)
        }
    }
}

/// Takes the first job of `state`'s queue whose lock is free, skipping `skip`. After
/// locking, the job is re-read: one that moved meanwhile is unlocked and passed over.
///
/// Lists the queue on every call; a long-running consumer uses a [`Claimer`] instead.
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
        if let Attempt::Claimed(claimed) =
            try_claim(session, state, &entry, owner, shutdown).await?
        {
            return Ok(Some(*claimed));
        }
    }
    Ok(None)
}

/// Claims jobs of one state's queue for a long-running consumer, from a live
/// [`QueueView`] instead of a listing per claim. Each claim picks at random among the
/// first `spread` claimable entries (so consumers do not all race for the head of the
/// queue); an entry whose lock another worker holds is passed over for `busy_for` or
/// until it leaves the queue. The lock-and-re-check rule is the same as [`claim_next`]'s.
#[derive(Debug)]
pub struct Claimer {
    state: JobState,
    owner: String,
    view: QueueView,
    busy: HashMap<String, Instant>,
    busy_for: Duration,
    spread: usize,
}

impl Claimer {
    /// A claimer of `state`'s queue for `owner`.
    pub fn new(
        state: JobState,
        owner: impl Into<String>,
        busy_for: Duration,
        spread: usize,
    ) -> Claimer {
        Claimer {
            state,
            owner: owner.into(),
            view: QueueView::new(state),
            busy: HashMap::new(),
            busy_for,
            spread: spread.max(1),
        }
    }

    /// Claims a job, skipping the jobs in `skip` (those this worker already holds);
    /// `None` if no entry of the view could be claimed.
    pub async fn claim(
        &mut self,
        session: &Session,
        skip: &HashSet<String>,
        shutdown: &CancellationToken,
    ) -> Result<Option<Claimed>> {
        self.view.sync(session).await?;
        let now = Instant::now();
        self.busy.retain(|_, until| *until > now);
        loop {
            let candidates: Vec<&QueueEntry> = self
                .view
                .entries()
                .filter(|e| !skip.contains(&e.job) && !self.busy.contains_key(&e.job))
                .take(self.spread)
                .collect();
            let pick = match candidates.len() {
                0 => return Ok(None),
                1 => 0,
                n => rand::thread_rng().gen_range(0..n),
            };
            let entry = candidates[pick].clone();
            match try_claim(session, self.state, &entry, &self.owner, shutdown).await? {
                Attempt::Claimed(claimed) => return Ok(Some(*claimed)),
                Attempt::Busy => {
                    self.busy.insert(entry.job.clone(), now + self.busy_for);
                }
                Attempt::Moved => self.view.remove(&entry),
            }
            // Take in what changed meanwhile (no listing unless the view went stale).
            self.view.sync(session).await?;
        }
    }

    /// Waits until the queue changes. Select it with a poll timer and the session's
    /// `lost` token: it never returns once the session has ended.
    pub async fn changed(&mut self) {
        self.view.changed().await
    }

    /// Forgets the view and the busy entries: the next claim lists the queue again.
    pub fn invalidate(&mut self) {
        self.view.invalidate();
        self.busy.clear();
    }
}

/// Whether a state is paused, kept current by a persistent watch on its pause node
/// instead of a read before every claim.
struct PauseFlag {
    state: JobState,
    path: String,
    paused: Option<bool>,
    watcher: Option<zk::PersistentWatcher>,
    dead: bool,
}

impl PauseFlag {
    fn new(state: JobState) -> PauseFlag {
        PauseFlag {
            state,
            path: paths::pause(state),
            paused: None,
            watcher: None,
            dead: false,
        }
    }

    fn apply(&mut self, event: zk::WatchedEvent) {
        if queue::is_terminal(&event) {
            // Never poll the watcher again (the client panics); ask every time.
            self.dead = true;
            self.watcher = None;
            self.paused = None;
            return;
        }
        match event.event_type {
            zk::EventType::NodeCreated => self.paused = Some(true),
            zk::EventType::NodeDeleted => self.paused = Some(false),
            zk::EventType::Session => self.paused = None,
            _ => {}
        }
    }

    fn apply_arrived(&mut self) {
        while let Some(event) = self.watcher.as_mut().and_then(queue::arrived) {
            self.apply(event);
        }
    }

    /// Is the state paused? Reads the pause node only when the watch cannot say.
    async fn get(&mut self, session: &Session) -> Result<bool> {
        self.apply_arrived();
        if let Some(paused) = self.paused {
            return Ok(paused);
        }
        if self.watcher.is_none() && !self.dead {
            match session
                .client()
                .watch(&self.path, zk::AddWatchMode::Persistent)
                .await
            {
                Ok(watcher) => self.watcher = Some(watcher),
                Err(e) => {
                    tracing::debug!(error = %e, path = %self.path, "pause watch not set; reading each time")
                }
            }
        }
        let paused = is_paused(session, self.state).await?;
        if self.watcher.is_some() {
            self.paused = Some(paused);
            self.apply_arrived();
        }
        Ok(self.paused.unwrap_or(paused))
    }

    /// Waits until the pause node is created or deleted (never returns without a watch).
    async fn changed(&mut self) {
        loop {
            let Some(watcher) = self.watcher.as_mut() else {
                return std::future::pending().await;
            };
            let event = watcher.changed().await;
            let before = self.paused;
            self.apply(event);
            if self.paused != before {
                return;
            }
        }
    }
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
    /// Each claim picks at random among this many first claimable entries. Defaults to
    /// [`DEFAULT_SPREAD`].
    pub spread: usize,
}

/// Default of [`ConsumerOptions::spread`].
pub const DEFAULT_SPREAD: usize = 4;

impl ConsumerOptions {
    /// Options for a state and owner, with defaults.
    pub fn new(state: JobState, owner: impl Into<String>) -> ConsumerOptions {
        ConsumerOptions {
            state,
            owner: owner.into(),
            concurrency: 1,
            poll_interval: Duration::from_secs(2),
            spread: DEFAULT_SPREAD,
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

    /// Sets how many of the first claimable entries a claim picks among at random (1:
    /// strictly the first; more: consumers started together collide less on the head of
    /// the queue, at the cost of strict order among those entries). Defaults to
    /// [`DEFAULT_SPREAD`].
    pub fn with_spread(mut self, spread: usize) -> Self {
        self.spread = spread.max(1);
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
    let mut claimer = Claimer::new(
        options.state,
        options.owner.clone(),
        options.poll_interval,
        options.spread,
    );
    let mut pause = PauseFlag::new(options.state);
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
        let claimed = if paused {
            None
        } else {
            let skip = active.lock().map(|a| a.clone()).unwrap_or_default();
            match claimer.claim(session, &skip, &shutdown).await {
                Ok(c) => c,
                Err(e) if e.is_session_lost() => break Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, state = %options.state, "claim failed; retrying");
                    claimer.invalidate();
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
                tokio::select! {
                    _ = claimer.changed() => {}
                    _ = pause.changed() => {}
                    _ = tokio::time::sleep(options.poll_interval) => claimer.invalidate(),
                    _ = shutdown.cancelled() => break Ok(()),
                    _ = lost.cancelled() => break Err(EngineError::SessionLost("while idle".into())),
                }
            }
        }
    };
    tracker.close();
    tracker.wait().await;
    result
}
