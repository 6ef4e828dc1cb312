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
    let guard = LockGuard::new(session, lock);
    let read = read.and_then(|found| match found {
        Some((bytes, stat)) => Ok(Some((
            records::decode::<JobRecord>(&job_path, &bytes)?,
            stat.version,
        ))),
        None => Ok(None),
    });
    let attempt = match read {
        Ok(Some((job, version))) if job.status == state && job.queue_entry() == *entry => {
            return Ok(Attempt::Claimed(Box::new(Claimed {
                job,
                version,
                lock: guard.into_inner(),
                session: session.clone(),
                shutdown: shutdown.child_token(),
            })));
        }
        Ok(_) => Ok(Attempt::Moved),
        Err(EngineError::Record(err)) => {
            // An unreadable job cannot be moved by a transition (that needs its
            // data); leave it locked-free for fsck and say so.
            tracing::error!(job = %entry.job, episode = "unknown", %state, %err, "unreadable job in queue; skipping (run `archivist fsck`)");
            Ok(Attempt::Moved)
        }
        Err(e) => Err(e),
    };
    // Not ours after all: the lock goes again.
    guard.settle(attempt, |_| false).await
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
    contention: usize,
    group: Option<ConsumerGroup>,
    stats: Option<Arc<ClaimStats>>,
}

/// Counts of claim attempts by outcome, shared with whoever wants them (a benchmark, a
/// test); the same counts go to the `archivist_claim_attempts_total` metric.
#[derive(Debug, Default)]
pub struct ClaimStats {
    claimed: AtomicU64,
    busy: AtomicU64,
    moved: AtomicU64,
    failed: AtomicU64,
}

impl ClaimStats {
    fn count(&self, outcome: &str) {
        let counter = match outcome {
            "claimed" => &self.claimed,
            "busy" => &self.busy,
            "moved" => &self.moved,
            _ => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Jobs locked and re-checked.
    pub fn claimed(&self) -> u64 {
        self.claimed.load(Ordering::Relaxed)
    }

    /// Lock attempts lost to another worker (each one a wasted write on the server).
    pub fn busy(&self) -> u64 {
        self.busy.load(Ordering::Relaxed)
    }

    /// Entries whose job had moved on by the time it was locked.
    pub fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// Attempts that failed with an error.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// The most a [`Claimer`] widens its window under contention (entries beyond `spread`).
pub const MAX_CONTENTION_WINDOW: usize = 256;

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
            contention: 0,
            group: None,
            stats: None,
        }
    }

    /// Counts this claimer's attempts into `stats` as well.
    pub fn with_stats(mut self, stats: Arc<ClaimStats>) -> Self {
        self.stats = Some(stats);
        self
    }

    /// Joins the state's consumers (`/consumers/{state}`) so this claimer looks first in
    /// its own share of the queue's head ([`crate::group`]). Without it (or if joining
    /// fails: logged, not fatal) it claims from the whole head.
    pub async fn join_group(&mut self, session: &Session, slots: usize) {
        match ConsumerGroup::join(session, self.state, &self.owner, slots).await {
            Ok(group) => self.group = Some(group),
            Err(e) => {
                tracing::warn!(error = %e, state = %self.state, "could not join the consumers; claiming from the whole queue")
            }
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
        Ok(self.claim_many(session, 1, skip, shutdown).await?.pop())
    }

    /// Claims up to `want` jobs at once, skipping the jobs in `skip`: the lock-and-re-read
    /// requests of all candidates are sent together (pipelined on the session), so a
    /// consumer with several free slots fills them in one round trip instead of one per
    /// job. Candidates are `want` distinct entries drawn at random from the first
    /// `want + spread - 1` claimable ones, widened while other workers' locks are met
    /// (up to [`MAX_CONTENTION_WINDOW`] more). Returns as soon as a round claims something,
    /// or empty when no entry of the view could be claimed.
    pub async fn claim_many(
        &mut self,
        session: &Session,
        want: usize,
        skip: &HashSet<String>,
        shutdown: &CancellationToken,
    ) -> Result<Vec<Claimed>> {
        let want = want.max(1);
        self.view.sync(session).await?;
        let share = match self.group.as_mut() {
            Some(group) => group.share(session).await,
            None => Share::WHOLE,
        };
        let now = Instant::now();
        self.busy.retain(|_, until| *until > now);
        loop {
            let window: Vec<QueueEntry> = self
                .view
                .entries()
                .filter(|e| !skip.contains(&e.job) && !self.busy.contains_key(&e.job))
                .take((want + self.spread - 1) * share.count + self.contention)
                .cloned()
                .collect();
            if window.is_empty() {
                return Ok(Vec::new());
            }
            let picks = pick_candidates(window, want, self.spread, share, &mut rand::thread_rng());
            // Each attempt sends its requests when first polled; `join_all` polls them
            // all before awaiting any, so they travel together.
            let attempts = futures_util::future::join_all(
                picks
                    .iter()
                    .map(|entry| try_claim(session, self.state, entry, &self.owner, shutdown)),
            )
            .await;
            let mut claimed = Vec::new();
            let mut first_error = None;
            let mut busy = 0;
            for (entry, attempt) in picks.iter().zip(attempts) {
                let outcome = match &attempt {
                    Ok(Attempt::Claimed(_)) => "claimed",
                    Ok(Attempt::Busy) => "busy",
                    Ok(Attempt::Moved) => "moved",
                    Err(_) => "error",
                };
                metrics::counter!("archivist_claim_attempts_total", "state" => self.state.as_str(), "outcome" => outcome)
                    .increment(1);
                if let Some(stats) = &self.stats {
                    stats.count(outcome);
                }
                match attempt {
                    Ok(Attempt::Claimed(c)) => claimed.push(*c),
                    Ok(Attempt::Busy) => {
                        busy += 1;
                        self.busy.insert(entry.job.clone(), now + self.busy_for);
                    }
                    Ok(Attempt::Moved) => self.view.remove(entry),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            self.contention = next_contention(self.contention, busy);
            if let Some(err) = first_error {
                if claimed.is_empty() {
                    return Err(err);
                }
                // The claims that succeeded are ours and must be run (or they would sit
                // locked until the session ends); the error shows again on the next
                // claim if it persists.
                tracing::warn!(error = %err, state = %self.state, "one of several claims failed");
            }
            if !claimed.is_empty() {
                return Ok(claimed);
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

/// How far beyond `spread` the next claim looks, after a round that found `busy` entries
/// locked by other workers: contention doubles the extra width (plus what was seen), a
/// clean round shrinks it by an eighth. Other consumers' jobs sit at the head of the queue
/// until their first transition; a window wider than the head lets consumers claim apart
/// instead of failing lock after lock (each failed lock is a wasted write).
fn next_contention(current: usize, busy: usize) -> usize {
    if busy > 0 {
        (current * 2 + busy).min(MAX_CONTENTION_WINDOW)
    } else {
        current - current / 8
    }
}

/// Up to `want` entries of `window` (claimable entries in queue order) to try: first this
/// consumer's own share, `want` drawn at random from the first `want + spread - 1` of
/// those; then, if its share runs short, others' entries at random (work is never left for
/// an owner that is busy or gone). Returned in queue order.
fn pick_candidates(
    window: Vec<QueueEntry>,
    want: usize,
    spread: usize,
    share: Share,
    rng: &mut impl Rng,
) -> Vec<QueueEntry> {
    let (mine, others): (Vec<usize>, Vec<usize>) =
        (0..window.len()).partition(|&i| share.owns(&window[i].job));
    let mut chosen = sample(&mine[..mine.len().min(want + spread - 1)], want, rng);
    if chosen.len() < want {
        chosen.extend(sample(&others, want - chosen.len(), rng));
    }
    chosen.sort_unstable();
    let mut window: Vec<Option<QueueEntry>> = window.into_iter().map(Some).collect();
    chosen
        .into_iter()
        .filter_map(|i| window[i].take())
        .collect()
}

/// `n` distinct items of `from` at random (all of them if there are no more).
fn sample(from: &[usize], n: usize, rng: &mut impl Rng) -> Vec<usize> {
    if from.len() <= n {
        return from.to_vec();
    }
    rand::seq::index::sample(rng, from.len(), n)
        .into_iter()
        .map(|i| from[i])
        .collect()
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

/// The states whose queue a daemon claims from, the only ones a pause can stop:
/// researchers claim from `pending`, recorders from `reported`. Jobs reach `leased` and
/// `researching` from a researcher that already holds them, so nothing waits in those
/// queues to be claimed, and terminal, failed and held jobs are claimed by nobody.
/// `archivist pause` refuses every other state (it would say "paused" and stop nothing).
pub const PAUSABLE_STATES: [JobState; 2] = [JobState::Pending, JobState::Reported];

/// Is the state paused by an operator?
pub async fn is_paused(session: &Session, state: JobState) -> Result<bool> {
    Ok(store::exists(session, &paths::pause(state))
        .await?
        .is_some())
}

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
            let skip = active.lock().map(|a| a.clone()).unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// `n` entries in queue order, as a view lists them.
    fn window(n: usize) -> Vec<QueueEntry> {
        let mut w: Vec<QueueEntry> = (0..n)
            .map(|i| QueueEntry::new(0, 1_700_000_000_000 + i as i64, format!("j{i:010}")))
            .collect();
        w.sort_by_key(QueueEntry::name);
        w
    }

    #[test]
    fn consumers_of_a_group_pick_disjoint_entries_when_their_shares_suffice() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let count = 4;
        let mut seen = HashSet::new();
        for rank in 0..count {
            let share = Share { rank, count };
            let picks = pick_candidates(window(64), 5, 4, share, &mut rng);
            assert_eq!(picks.len(), 5);
            for p in picks {
                assert!(share.owns(&p.job), "{} is not in share {rank}", p.job);
                assert!(seen.insert(p.job.clone()), "{} picked twice", p.job);
            }
        }
    }

    #[test]
    fn a_short_share_is_filled_from_other_entries_and_order_is_kept() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let share = Share { rank: 0, count: 3 };
        let w = window(6);
        let own = w.iter().filter(|e| share.owns(&e.job)).count();
        assert!(own < 6);
        let picks = pick_candidates(w.clone(), 6, 1, share, &mut rng);
        assert_eq!(picks.len(), 6, "work is not left waiting for its owner");
        let names: Vec<String> = picks.iter().map(QueueEntry::name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "candidates come back in queue order");
    }

    #[test]
    fn a_lone_consumer_picks_among_the_first_spread_entries() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let w = window(40);
        for _ in 0..50 {
            let picks = pick_candidates(w.clone(), 2, 4, Share::WHOLE, &mut rng);
            assert_eq!(picks.len(), 2);
            for p in picks {
                let i = w.iter().position(|e| *e == p).unwrap();
                assert!(i < 5, "picked entry {i}, beyond want + spread - 1");
            }
        }
    }

    #[test]
    fn contention_widens_the_window_and_calm_narrows_it() {
        let mut c = 0;
        c = next_contention(c, 3);
        assert_eq!(c, 3);
        c = next_contention(c, 2);
        assert_eq!(c, 8);
        for _ in 0..100 {
            c = next_contention(c, 50);
        }
        assert_eq!(c, MAX_CONTENTION_WINDOW);
        for _ in 0..100 {
            c = next_contention(c, 0);
        }
        assert!(c < 8, "{c}");
    }
}
