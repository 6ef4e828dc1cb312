//! Researching one claimed job, following docs/protocol.md's Researcher section:
//!
//! 1. claim: `pending -> leased` keeping the lock, with the lease write (holder = me) in
//!    the same multi; a job whose lease is gone is left alone;
//! 2. take the episode's pinned rendition from the media store, or download the episode
//!    to `work_dir/episodes/<job>.media` and check it is audio (`episode`);
//! 3. decode and analyse it on a blocking thread, then `leased -> researching`;
//! 4. per clip: fetch (cached), match on a blocking thread, report at once (a multi with
//!    a check of the lock); the last report is `final` and goes in the same multi as
//!    `researching -> reported`, which releases the lock;
//! 5. meanwhile a heartbeat extends the lease and publishes progress, and a watch on the
//!    job notices an admin `request` (cancel, hold) within seconds.
//!
//! Shutdown winds down: during the download the job is handed back to `pending`; while
//! matching, the current clip is finished and its report is the final one.

mod ctx;
mod episode;
mod first_fetch;
mod report;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use archivist_db::catalog;
use archivist_db::{Database, DbError};
use archivist_engine::consumer::Claimed;
use archivist_engine::lock::LockGuard;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    clip_stamp, ClipRecord, JobRequest, LeaseRecord, RecordError,
};
use archivist_engine::schema::JobState;
use archivist_engine::transition::{LockAction, Role, Transition};
use archivist_engine::{jobs, store, EngineError, Session};
use archivist_matcher::decode::decode_file_with;
use archivist_matcher::{MatchConfig, Matcher};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clips::{relabel, ClipCache, ClipError};
use crate::download::Downloader;
use ctx::{JobCtx, LeaseOp, Move};
use report::{occurrences, ClipOutcome};

/// How a job ended for this worker.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every clip reported; the job is `reported`.
    Reported {
        /// Reports written by this run.
        reports: usize,
    },
    /// Shutdown: the job is `reported` with what was done.
    WoundDown {
        /// Reports written by this run.
        reports: usize,
    },
    /// Shutdown during the download: the job is back in `pending`.
    HandedBack,
    /// The job is `failed` with this reason.
    Failed(String),
    /// An admin request was obeyed.
    Stopped(JobRequest),
    /// The job could not be claimed (lease gone, or it moved).
    Refused(String),
    /// The job's lease prefers another registered researcher (affinity: it holds the
    /// episode's audio) for this long yet: passed over until then.
    Deferred {
        /// The preferred researcher.
        to: String,
        /// How long the preference holds yet.
        for_: std::time::Duration,
    },
    /// The lock was lost (someone removed it); nothing more was written.
    LockLost,
}

impl Outcome {
    /// Label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Reported { .. } => "reported",
            Outcome::WoundDown { .. } => "wound_down",
            Outcome::HandedBack => "handed_back",
            Outcome::Failed(_) => "failed",
            Outcome::Stopped(JobRequest::Cancel) => "cancelled",
            Outcome::Stopped(JobRequest::Hold) => "held",
            Outcome::Refused(_) => "refused",
            Outcome::Deferred { .. } => "deferred",
            Outcome::LockLost => "lock_lost",
        }
    }
}

/// Everything a job needs from the process: identity, settings, downloader, clip cache.
pub(crate) struct Worker {
    pub me: String,
    /// The database holding the catalog (clip records are read from it).
    pub db: Database,
    pub work_dir: PathBuf,
    pub heartbeat: Duration,
    pub matching: MatchConfig,
    pub downloader: Downloader,
    pub clips: ClipCache,
    /// Episodes kept by content hash (the pinned renditions).
    pub media: archivist_media::MediaStore,
    /// Whether a stored rendition is revalidated with a conditional GET.
    pub revalidate: bool,
    /// Longest audio decoded (`researcher.max_audio_hours`).
    pub decode_limits: archivist_matcher::decode::DecodeLimits,
    /// Whether the media store is this researcher's own (a local directory): then it
    /// says which pinned episodes it holds, for the planner's affinity hint (a shared
    /// S3 store is every researcher's).
    pub own_store: bool,
    /// Tests only: a pause between reading the audio from the store and decoding it.
    pub hold_after_read: Duration,
    /// The episodes this process is downloading for the first time ([`first_fetch`]).
    pub first_fetch: first_fetch::FirstFetch,
}

enum Decoded {
    Ready(Box<Matcher>, Vec<String>),
    Failed(String),
}

/// Is this the database failing (down, busy, locked, a full disk), not a value in it
/// that does not parse (which fails the job: it will not parse next time either)?
pub(crate) fn database_unavailable(e: &EngineError) -> bool {
    e.downcast_ref::<DbError>()
        .is_some_and(|d| !matches!(d, DbError::Corrupt { .. }))
}

impl Worker {
    /// Affinity: is the job's lease still preferring another researcher that is
    /// registered now (it holds the episode's audio in its own store)? Then this one
    /// passes the job over until the preference ends, by ZooKeeper's clock: a hint,
    /// never a wait past the planner's grace, and none when the preferred researcher
    /// is gone.
    async fn deferred_to(
        &self,
        session: &Session,
        lease: &LeaseRecord,
    ) -> Option<(String, std::time::Duration)> {
        let to = lease.prefer.as_deref().filter(|p| *p != self.me)?;
        let until = lease.prefer_until_ms?;
        // ZooKeeper's time as this host follows it (no write per look).
        let now = archivist_engine::clock::to_unix_ms(archivist_engine::clock::stamp_now());
        let left = u64::try_from(until.checked_sub(now)?)
            .ok()
            .filter(|ms| *ms > 0)?;
        let registered = store::exists(session, &paths::researcher(to)).await;
        matches!(registered, Ok(Some(_)))
            .then(|| (to.to_string(), std::time::Duration::from_millis(left)))
    }

    /// Clip ids of the job not yet researched for the episode nor reported by this job.
    async fn clips_to_do(
        &self,
        session: &Session,
        job: &archivist_engine::schema::records::JobRecord,
    ) -> Result<Vec<String>, EngineError> {
        let research = match archivist_db::research::read(&self.db, &job.episode).await {
            Ok(r) => r,
            // Stored research that does not parse will not parse on the next try either:
            // the job fails saying why (serve.rs), as an unreadable node did.
            Err(DbError::Corrupt { what, reason }) => {
                return Err(EngineError::Record(RecordError::Malformed {
                    path: what,
                    kind: "research",
                    reason,
                }))
            }
            // The database is down or busy: the job is left for a later try.
            Err(e) => return Err(EngineError::daemon(e)),
        };
        let mut todo = Vec::new();
        for clip in &job.clips {
            let researched = paths::clip_number(clip)
                .zip(research.as_ref())
                .filter(|(n, r)| r.is_researched(*n));
            if let Some((n, r)) = researched {
                // Settled, unless it is an error made with an older version of the clip.
                if !r.errors.contains_key(clip) {
                    continue;
                }
                let now = catalog::clip(&self.db, clip).await;
                match now {
                    Ok(Some(c)) if r.error_is_stale(clip, n, &c.fields) => {}
                    _ => continue,
                }
            }
            let report = paths::report(&paths::report_name(&job.id, clip));
            if store::exists(session, &report).await?.is_some() {
                continue;
            }
            todo.push(clip.clone());
        }
        Ok(todo)
    }

    /// Claims and researches one job the consumer locked in `pending`.
    pub async fn research(
        &self,
        claimed: Claimed,
        progress_gauge: Option<metrics::Gauge>,
    ) -> Result<Outcome, EngineError> {
        let Claimed {
            job,
            version,
            lock,
            session,
            shutdown,
        } = claimed;
        let lock = LockGuard::new(&session, lock);
        let lease_path = paths::lease(&job.id);
        let Some((mut lease, lease_stat)) =
            store::read::<LeaseRecord>(&session, &lease_path).await?
        else {
            lock.release().await?;
            return Ok(Outcome::Refused(format!("{lease_path} is gone")));
        };
        if let Err(e) = archivist_engine::lease::validate_duration(lease.duration_ms) {
            // Expired when written: claiming it would research under no lease at all.
            lock.release().await?;
            return Ok(Outcome::Refused(format!("{lease_path}: {e}")));
        }
        if let Some((to, for_)) = self.deferred_to(&session, &lease).await {
            lock.release().await?;
            return Ok(Outcome::Deferred { to, for_ });
        }
        let todo = self.clips_to_do(&session, &job).await?;
        let skipped = job.clips.len() - todo.len();
        let claim_lease =
            archivist_engine::lease::extend_op(&lease, lease_stat.version, Some(&self.me))?;
        // What the claim writes (the heartbeat extends from it).
        lease.holder = Some(self.me.clone());
        lease.extensions += 1;
        let me = self.me.clone();
        let claim = Transition::new(Role::Researcher, &job, version, JobState::Leased)
            .lock(LockAction::Keep(lock.lock().clone()))
            .edit(|j| {
                j.holder = Some(me.clone());
                j.message = None;
                j.progress.fraction = j.progress.fraction.max(0.02);
            })
            .event(
                &self.me,
                "claim",
                &format!(
                    "ok: {} of {} clips to research",
                    todo.len(),
                    job.clips.len()
                ),
            )
            .with_ops([claim_lease])
            .commit(&session)
            .await;
        let (job, version) = match claim {
            Ok(claimed) => claimed,
            Err(e) if e.is_conflict() => {
                let _ = lock.release().await;
                return Ok(Outcome::Refused(e.to_string()));
            }
            // The reply was lost: the claim may have applied unseen. Look, and go on with
            // a claim that applied (the lock is still ours while the session lives), or
            // hand the job back (outside 17i G4: it was dropped, stranded in `leased`).
            Err(e) if e.is_retryable() && !session.is_lost() => {
                tracing::warn!(job = %job.id, episode = %job.episode, state = %job.status, error = %e, "connection lost during the claim; checking whether it applied");
                let found = jobs::after_lost_reply(&session, &job, &self.me, "claim").await;
                let ours = match &found {
                    Ok(jobs::LostReply::Applied(after, _)) if after.status == JobState::Leased => {
                        lock.lock().is_ours(&session).await.unwrap_or(false)
                    }
                    _ => false,
                };
                match found {
                    Ok(jobs::LostReply::Applied(after, v)) if ours => {
                        tracing::info!(job = %job.id, episode = %job.episode, state = %after.status, "the claim applied unseen; going on");
                        (after, v)
                    }
                    Ok(found) => {
                        let _ = lock.release().await;
                        let now = match found {
                            jobs::LostReply::Applied(j, _) | jobs::LostReply::NotApplied(j, _) => {
                                j.status.to_string()
                            }
                            jobs::LostReply::Gone => "gone".to_string(),
                        };
                        return Ok(Outcome::Refused(format!(
                            "the claim's reply was lost ({e}) and it is not ours to work on (the job is {now}); handed back"
                        )));
                    }
                    Err(err) => {
                        let _ = lock.release().await;
                        return Err(err);
                    }
                }
            }
            Err(e) => {
                let _ = lock.release().await;
                return Err(e);
            }
        };
        // From here the job's own transitions and the caller settle the lock.
        let lock = lock.into_inner();
        tracing::info!(job = %job.id, episode = %job.episode, state = %job.status, clips = todo.len(), skipped, "claimed");
        let lease_version = lease_stat.version + 1;
        let interval = self.heartbeat.min(Duration::from_millis(
            (lease.duration_ms.max(300) / 3) as u64,
        ));
        let ctx = Arc::new(JobCtx::new(
            session,
            lock,
            &self.me,
            job,
            version,
            Some((lease, lease_version)),
            progress_gauge,
        ));
        for _ in 0..skipped {
            ctx.clip_done();
        }
        let done = CancellationToken::new();
        let alive = {
            let ctx = ctx.clone();
            let done = done.clone();
            tokio::spawn(async move { ctx.keep_alive(interval, done).await }.in_current_span())
        };
        let mut result = self.work(&ctx, todo.clone(), &shutdown).await;
        // A dropped connection (a ZooKeeper leader change) is not the job's fault: while
        // the session lives the lock is still ours, so wait for the reconnect and carry on
        // (reports are idempotent, transitions version-checked).
        let mut resumed = 0;
        while let Err(e) = &result {
            if !e.is_retryable() || e.is_conflict() || e.is_session_lost() || resumed >= 3 {
                break;
            }
            resumed += 1;
            tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "ZooKeeper connection lost mid-job; resuming");
            tokio::time::sleep(Duration::from_secs(1)).await;
            if ctx.session.is_lost() {
                break;
            }
            result = self.work(&ctx, todo.clone(), &shutdown).await;
        }
        done.cancel();
        let _ = alive.await;
        match result {
            Err(e) if e.is_conflict() && !e.is_session_lost() => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "lost the job");
                // The precondition that failed may not be the lock's (a queue entry
                // deleted by hand): a lock still ours is released, so the job is not
                // left locked with nobody working on it (the reaper and fsck take it).
                if let Err(e) = ctx.lock.release_if_ours(&ctx.session).await {
                    tracing::warn!(job = %ctx.job_id, error = %e, "could not release the lock of a lost job; the session's end will");
                }
                Ok(Outcome::LockLost)
            }
            // The connection dropped mid-write (a ZooKeeper leader change, say): the session
            // lives on, so the job is not at fault; the caller releases it to be resumed.
            Err(e) if e.is_retryable() && !e.is_session_lost() => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "ZooKeeper connection kept failing mid-job; giving the job back");
                let why = format!("the ZooKeeper connection kept failing ({e})");
                self.give_back(&ctx, &why).await.or(Err(e))
            }
            // The database is down, locked or its disk full: not the job's fault, and
            // failing it left every job in flight for an operator's `retry` (outside
            // 17m M2). Released as for a dropped connection: the lease runs out and the
            // pairs are planned again once the database answers.
            Err(e) if database_unavailable(&e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "the database is unavailable mid-job; giving the job back for a later try");
                let why = format!("the database is unavailable ({e})");
                self.give_back(&ctx, &why).await.or(Err(e))
            }
            Err(e) if !e.is_session_lost() => {
                // Something unexpected: record it on the job if we still can.
                let reason = format!("researcher error: {e}");
                match self.fail(&ctx, reason.clone()).await {
                    Ok(outcome) => Ok(outcome),
                    Err(_) => Err(e),
                }
            }
            other => other,
        }
    }

    /// Gives a job back that this researcher cannot go on with for a reason that is not
    /// the job's (the database down, the ZooKeeper connection failing): a `leased` job
    /// goes back to `pending` (another researcher, or this one later, takes it); a
    /// `researching` one is `reported` with what was done, as at shutdown (the recorder
    /// stores its reports; the planner plans the rest again). Before, the lock was only
    /// released and the job left `leased`, and the reaper expired it blaming "researcher
    /// lost: its lock vanished with its session" of a session that lived (outside 17n
    /// M1). `Err` when even that cannot be written: the caller releases the lock.
    async fn give_back(&self, ctx: &JobCtx, why: &str) -> Result<Outcome, EngineError> {
        ctx.refresh().await;
        if ctx.request().is_some() {
            return self.obey(ctx).await;
        }
        if ctx.status().await == JobState::Researching {
            ctx.transition(Move::release(
                JobState::Reported,
                "final report",
                format!("given back with the reports made so far: {why}"),
            ))
            .await?;
            return Ok(Outcome::WoundDown { reports: 0 });
        }
        let mut m = Move::release(
            JobState::Pending,
            "give back",
            format!("handed back: {why}"),
        );
        m.clear_holder = true;
        m.lease = LeaseOp::ClearHolder;
        m.yield_to_request = true;
        match ctx.transition(m).await {
            Ok(()) => Ok(Outcome::HandedBack),
            Err(EngineError::WrongState { .. }) if ctx.request().is_some() => self.obey(ctx).await,
            Err(e) => Err(e),
        }
    }

    async fn fail(&self, ctx: &JobCtx, reason: String) -> Result<Outcome, EngineError> {
        let state = ctx.status().await;
        tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, %state, %reason, "job failed");
        let mut m = Move::release(JobState::Failed, "research", reason.clone());
        m.failed = true;
        m.message = Some(reason.clone());
        m.clear_holder = true;
        m.lease = LeaseOp::Delete;
        ctx.transition(m).await?;
        Ok(Outcome::Failed(reason))
    }

    async fn obey(&self, ctx: &JobCtx) -> Result<Outcome, EngineError> {
        if ctx.lost() {
            // Not a request: the job is no longer ours; whoever holds it now decides.
            return Ok(Outcome::LockLost);
        }
        let request = ctx.request().unwrap_or(JobRequest::Cancel);
        let (to, word) = match request {
            JobRequest::Cancel => (JobState::Cancelled, "cancel requested"),
            JobRequest::Hold => (JobState::Held, "hold requested"),
        };
        let mut m = Move::release(to, word, "ok");
        m.message = Some(
            ctx.request_reason()
                .unwrap_or_else(|| format!("{word} by an operator")),
        );
        m.clear_holder = true;
        m.clear_request = true;
        m.lease = LeaseOp::Delete;
        ctx.transition(m).await?;
        Ok(Outcome::Stopped(request))
    }

    /// Hands the job back to `pending` on shutdown, unless an operator asked to cancel or
    /// hold it: that request is obeyed instead (`leased -> cancelled/held` is this
    /// holder's move), since a pending job's request would be lost to the work-item TTL
    /// and its pairs planned again.
    async fn hand_back(&self, ctx: &JobCtx) -> Result<Outcome, EngineError> {
        ctx.refresh().await;
        if ctx.request().is_some() {
            return self.obey(ctx).await;
        }
        let mut m = Move::release(JobState::Pending, "shutdown", "handed back");
        m.clear_holder = true;
        m.lease = LeaseOp::ClearHolder;
        m.yield_to_request = true;
        match ctx.transition(m).await {
            Ok(()) => Ok(Outcome::HandedBack),
            // A request written while handing back: obey it instead.
            Err(EngineError::WrongState { .. }) if ctx.request().is_some() => self.obey(ctx).await,
            Err(e) => Err(e),
        }
    }

    async fn work(
        &self,
        ctx: &JobCtx,
        todo: Vec<String>,
        shutdown: &CancellationToken,
    ) -> Result<Outcome, EngineError> {
        let lost = ctx.session.lost();
        if todo.is_empty() {
            if ctx.status().await != JobState::Researching {
                ctx.transition(Move::keep(
                    JobState::Researching,
                    "media decoded",
                    "skipped: nothing to research",
                ))
                .await?;
            }
            ctx.transition(Move::release(
                JobState::Reported,
                "final report",
                "every clip was already researched",
            ))
            .await?;
            return Ok(Outcome::Reported { reports: 0 });
        }
        // The catalog's media URL now, not the one the job was planned with: an episode
        // re-curated to another URL (a wrong file fixed) since the job was planned is
        // fetched from where it is now (outside 23c N3: a queued job researched the
        // wrong file after the fix, and a held one moved the pin back to its audio). An
        // episode not in the catalog keeps the job's URL.
        let planned_url = ctx.media_url().await;
        let current = catalog::episode(&self.db, &ctx.episode)
            .await
            .map_err(episode::db_error)?
            .map(|e| e.fields.media_url);
        let (url, url_note) = match current {
            Some(now) if now != planned_url => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, planned = %planned_url, %now, "the episode's media URL changed since the job was planned; fetching it from the catalog's");
                let note = format!(
                    "the episode's media URL changed since the job was planned ({planned_url} -> {now}): researched at the catalog's"
                );
                (now, Some(note))
            }
            _ => (planned_url, None),
        };
        let dest = self
            .work_dir
            .join("episodes")
            .join(format!("{}.media", ctx.job_id));
        let started = Instant::now();
        let mut pin = archivist_db::renditions::pin(&self.db, &ctx.episode)
            .await
            .map_err(episode::db_error)?;
        // An episode not pinned yet: one job of this process fetches it, the others wait
        // and then read the pin again (lock, then re-check).
        let fetching = match pin {
            Some(_) => None,
            None => {
                let held = tokio::select! {
                    held = self.first_fetch.hold(&ctx.episode) => held,
                    _ = ctx.stop.cancelled() => return self.obey(ctx).await,
                    _ = shutdown.cancelled() => return self.hand_back(ctx).await,
                    _ = lost.cancelled() => return Err(EngineError::SessionLost("while another job fetched the episode".into())),
                };
                pin = archivist_db::renditions::pin(&self.db, &ctx.episode)
                    .await
                    .map_err(episode::db_error)?;
                Some(held)
            }
        };
        // The pinned rendition from the store, and whether the server changed it.
        let stored = match &pin {
            Some(p) => {
                let check = dest.with_extension("revalidate");
                let looked = async {
                    let hit = self.pinned_from_store(ctx, &url, p, &dest).await;
                    let revalidated = match hit {
                        Ok(Some(_)) => {
                            if !self.hold_after_read.is_zero() {
                                tokio::time::sleep(self.hold_after_read).await;
                            }
                            self.revalidate(ctx, &url, p, &check).await
                        }
                        _ => episode::Revalidated::Unchanged,
                    };
                    (hit, revalidated)
                };
                tokio::select! {
                    r = looked => r,
                    _ = ctx.stop.cancelled() => { remove(&dest).await; remove(&check).await; return self.obey(ctx).await }
                    _ = shutdown.cancelled() => { remove(&dest).await; remove(&check).await; return self.hand_back(ctx).await }
                    _ = lost.cancelled() => { remove(&dest).await; remove(&check).await; return Err(EngineError::SessionLost("while reading the media store".into())) }
                }
            }
            None => (Ok(None), episode::Revalidated::Unchanged),
        };
        let stored = match stored {
            (Ok(hit), revalidated) => (hit, revalidated),
            (Err(reason), _) => {
                remove(&dest).await;
                return self.fail(ctx, reason).await;
            }
        };
        let audio = match stored {
            (Some((sha256, bytes)), revalidated) => {
                tracing::info!(job = %ctx.job_id, episode = %ctx.episode, state = "leased", bytes, rendition = %sha256, "episode from the media store");
                episode::Audio {
                    path: dest.clone(),
                    sha256,
                    bytes,
                    source: episode::Source::Store,
                    fetched: None,
                    pin,
                    revalidated,
                }
            }
            (None, _) => {
                let never = CancellationToken::new();
                let progress = |bytes: u64, total: Option<u64>| ctx.downloaded(bytes, total);
                // A file left by a crash goes first (one left by a version that handed
                // out hard links may be a stored object's inode: writing into it would
                // change the object).
                remove(&dest).await;
                let fetched = tokio::select! {
                    r = self.downloader.fetch_audio(&url, &dest, &never, &progress) => r,
                    _ = ctx.stop.cancelled() => { remove(&dest).await; return self.obey(ctx).await }
                    _ = shutdown.cancelled() => { remove(&dest).await; return self.hand_back(ctx).await }
                    _ = lost.cancelled() => { remove(&dest).await; return Err(EngineError::SessionLost("while downloading".into())) }
                };
                let fetched = match fetched {
                    Ok(f) => f,
                    Err(e) => return self.fail(ctx, e.to_string()).await,
                };
                tracing::info!(job = %ctx.job_id, episode = %ctx.episode, state = "leased", bytes = fetched.bytes, attempts = fetched.attempts, secs = started.elapsed().as_secs_f64(), "episode downloaded");
                episode::Audio {
                    path: dest.clone(),
                    sha256: fetched.sha256.clone(),
                    bytes: fetched.bytes,
                    source: episode::Source::Download,
                    fetched: Some(fetched),
                    pin,
                    revalidated: episode::Revalidated::Unchanged,
                }
            }
        };
        match audio.source {
            episode::Source::Download => ctx.downloaded(audio.bytes, Some(audio.bytes)),
            episode::Source::Store => ctx.raise(0.40),
        }
        let decode_started = Instant::now();
        let path = dest.clone();
        let label = url.clone();
        let config = self.matching.clone();
        // The file stays until the rendition is settled: a download goes into the store.
        let limits = self.decode_limits;
        let decoding =
            tokio::task::spawn_blocking(move || match decode_file_with(&path, &limits) {
                Ok(audio) => Decoded::Ready(
                    Box::new(Matcher::from_samples(audio.samples, config)),
                    audio.warnings,
                ),
                Err(e) => Decoded::Failed(relabel(e, &label).to_string()),
            });
        let decoded = tokio::select! {
            // The decoder's own panics are caught inside it (`decode::guard`); anything
            // else failing the task is this file's fault too, not the configuration's.
            r = decoding => r.unwrap_or_else(|e| Decoded::Failed(format!("{url}: the decode task failed: {e}"))),
            _ = ctx.stop.cancelled() => { remove(&dest).await; return self.obey(ctx).await }
            _ = shutdown.cancelled() => { remove(&dest).await; return self.hand_back(ctx).await }
            _ = lost.cancelled() => { remove(&dest).await; return Err(EngineError::SessionLost("while decoding".into())) }
        };
        let (matcher, warnings) = match decoded {
            Decoded::Ready(m, w) => (Arc::new(*m), w),
            Decoded::Failed(reason) => {
                remove(&dest).await;
                // Bytes from the store are the ones that decoded whole when they were
                // downloaded (their hash proves it): say where these came from.
                let reason = match audio.source {
                    episode::Source::Store => format!(
                        "{reason} (the audio was read from the media store: rendition {}, verified by its sha256)",
                        audio.sha256
                    ),
                    episode::Source::Download => reason,
                };
                return self.fail(ctx, reason).await;
            }
        };
        let decode_s = decode_started.elapsed().as_secs_f64();
        metrics::histogram!("archivist_researcher_decode_seconds").record(decode_s);
        let episode_s = matcher.episode_duration_s();
        if decode_s > 0.0 {
            metrics::histogram!("archivist_researcher_decode_realtime_factor")
                .record(episode_s / decode_s);
        }
        // Recorded before any result is reported, so every stored result's run names the
        // audio it was measured on.
        let settled = self.settle_rendition(ctx, &url, &audio, episode_s).await;
        drop(fetching);
        remove(&dest).await;
        let rendition = match settled {
            Err(e) if e.downcast_ref::<episode::RunOnOtherAudio>().is_some() => {
                return self.fail(ctx, e.to_string()).await;
            }
            settled => settled?,
        };
        let mut note = format!("ok: {episode_s:.3} s of audio; {rendition}");
        if let Some(changed) = &url_note {
            note.push_str("; ");
            note.push_str(changed);
        }
        for w in &warnings {
            note.push_str("; ");
            note.push_str(w);
        }
        ctx.raise(0.45);
        // Resumed after a dropped connection, the job may be researching already.
        if ctx.status().await != JobState::Researching {
            ctx.transition(Move::keep(JobState::Researching, "media decoded", note))
                .await?;
        }
        tracing::info!(job = %ctx.job_id, episode = %ctx.episode, state = "researching", episode_s, memory_mb = matcher.heap_bytes() / (1 << 20), "episode decoded");
        self.match_clips(ctx, matcher, todo, shutdown).await
    }

    async fn match_clips(
        &self,
        ctx: &JobCtx,
        matcher: Arc<Matcher>,
        todo: Vec<String>,
        shutdown: &CancellationToken,
    ) -> Result<Outcome, EngineError> {
        let lost = ctx.session.lost();
        let episode_s = matcher.episode_duration_s();
        let mut reports = 0usize;
        let n = todo.len();
        for (i, clip) in todo.iter().enumerate() {
            if ctx.stop.is_cancelled() {
                return self.obey(ctx).await;
            }
            if shutdown.is_cancelled() {
                ctx.transition(Move::release(
                    JobState::Reported,
                    "final report",
                    format!("wound down after {reports} reports"),
                ))
                .await?;
                return Ok(Outcome::WoundDown { reports });
            }
            let outcome = tokio::select! {
                o = self.research_clip(ctx, &matcher, clip) => o?,
                _ = ctx.stop.cancelled() => return self.obey(ctx).await,
                _ = lost.cancelled() => return Err(EngineError::SessionLost("while matching".into())),
            };
            let last = i + 1 == n || shutdown.is_cancelled();
            let report = outcome
                .as_ref()
                .map(|o| o.report(&ctx.job_id, &ctx.episode, &ctx.me, episode_s, last));
            if report.is_some() {
                reports += 1;
            }
            ctx.clip_done();
            if last {
                let wound_down = i + 1 < n;
                let mut m = Move::release(
                    JobState::Reported,
                    "final report",
                    if wound_down {
                        format!("wound down after {reports} reports")
                    } else {
                        format!("ok: {reports} reports")
                    },
                );
                m.report = report;
                ctx.transition(m).await?;
                // Whole job on this researcher: download, decode and every clip.
                let research_s = ctx.started.elapsed().as_secs_f64();
                metrics::histogram!("archivist_researcher_research_seconds").record(research_s);
                if research_s > 0.0 && !wound_down {
                    metrics::histogram!("archivist_researcher_realtime_factor")
                        .record(episode_s / research_s);
                }
                tracing::info!(job = %ctx.job_id, episode = %ctx.episode, state = "reported", reports, wound_down, research_s, realtime_factor = episode_s / research_s.max(1e-9), "final report");
                return Ok(if wound_down {
                    Outcome::WoundDown { reports }
                } else {
                    Outcome::Reported { reports }
                });
            }
            if let Some(report) = report {
                ctx.report(&report).await?;
            }
        }
        // Only reached with an empty list, which `work` handles before downloading.
        ctx.transition(Move::release(
            JobState::Reported,
            "final report",
            "no clips",
        ))
        .await?;
        Ok(Outcome::Reported { reports })
    }

    /// One clip: `None` when a transient problem (the clip's server is down) leaves it
    /// for a later job instead of recording an error.
    async fn research_clip(
        &self,
        ctx: &JobCtx,
        matcher: &Arc<Matcher>,
        clip: &str,
    ) -> Result<Option<ClipOutcome>, EngineError> {
        let record = match catalog::clip(&self.db, clip).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                metrics::counter!("archivist_researcher_clips_total", "result" => "error")
                    .increment(1);
                return Ok(Some(ClipOutcome::error(
                    clip,
                    format!("clip {clip} is not in the catalog"),
                )));
            }
            Err(DbError::Corrupt { what, reason }) => {
                metrics::counter!("archivist_researcher_clips_total", "result" => "error")
                    .increment(1);
                return Ok(Some(ClipOutcome::error(
                    clip,
                    format!("{what}: stored value is unreadable: {reason}"),
                )));
            }
            // The database is down or busy: leave the clip for a later job rather than
            // store an error about the clip that is not the clip's fault.
            Err(e) => return Err(EngineError::daemon(e)),
        };
        let stamp = clip_stamp(&record.fields);
        let outcome = self.match_clip(ctx, matcher, clip, &record).await?;
        Ok(outcome.map(|o| o.stamped(stamp)))
    }

    /// Fetches and matches one clip whose catalog record was read.
    async fn match_clip(
        &self,
        ctx: &JobCtx,
        matcher: &Arc<Matcher>,
        clip: &str,
        record: &ClipRecord,
    ) -> Result<Option<ClipOutcome>, EngineError> {
        let never = CancellationToken::new();
        let decoded = match self
            .clips
            .get(
                &record.fields.media_url,
                &clip_stamp(&record.fields),
                record.fields.content_hash.as_deref(),
                &never,
            )
            .await
        {
            Ok(d) => d,
            Err(ClipError::Download(e)) if e.is_transient() => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, state = "researching", %clip, error = %e, "clip unavailable; left for a later job");
                metrics::counter!("archivist_researcher_clips_total", "result" => "skipped")
                    .increment(1);
                return Ok(None);
            }
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, state = "researching", %clip, error = %e, "clip unusable");
                metrics::counter!("archivist_researcher_clips_total", "result" => "error")
                    .increment(1);
                return Ok(Some(ClipOutcome::error(clip, e.to_string())));
            }
        };
        let started = Instant::now();
        let m = matcher.clone();
        let label = clip.to_string();
        let found = tokio::task::spawn_blocking(move || m.find(&decoded.samples, &label))
            .await
            .map_err(|e| EngineError::Config(format!("match task failed: {e}")))?;
        metrics::histogram!("archivist_researcher_match_seconds")
            .record(started.elapsed().as_secs_f64());
        Ok(Some(match found {
            Ok(result) => {
                let result_label = if result.occurrences.is_empty() {
                    "not_found"
                } else {
                    "found"
                };
                metrics::counter!("archivist_researcher_clips_total", "result" => result_label)
                    .increment(1);
                tracing::debug!(job = %ctx.job_id, episode = %ctx.episode, state = "researching", %clip, occurrences = result.occurrences.len(), "clip matched");
                if result.limit_reached {
                    tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, state = "researching", %clip, occurrences = result.occurrences.len(), "more occurrences than the matcher's max_occurrences: only the most confident are reported");
                }
                ClipOutcome {
                    clip: clip.to_string(),
                    occurrences: occurrences(&result),
                    error: None,
                    clip_duration_s: result.clip_duration_s,
                    clip_stamp: None,
                }
            }
            Err(e) => {
                metrics::counter!("archivist_researcher_clips_total", "result" => "error")
                    .increment(1);
                ClipOutcome::error(clip, e.to_string())
            }
        }))
    }
}

async fn remove(path: &std::path::Path) {
    let _ = tokio::fs::remove_file(path).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside 17m M2: a database locked for 45 s (or a full disk) failed every job in
    /// flight for good. Such errors release the job for a later try; a stored value that
    /// does not parse still fails it.
    #[test]
    fn a_database_outage_is_not_the_jobs_fault_but_a_corrupt_value_is() {
        let missing = EngineError::daemon(DbError::Missing {
            url: "sqlite:///x.db".into(),
        });
        assert!(database_unavailable(&missing));
        let gone = EngineError::daemon(DbError::FileGone {
            url: "sqlite:///x.db".into(),
            what: "deleted".into(),
        });
        assert!(database_unavailable(&gone));
        let corrupt = EngineError::daemon(DbError::Corrupt {
            what: "found (e1, c1)".into(),
            reason: "bad".into(),
        });
        assert!(!database_unavailable(&corrupt));
        assert!(!database_unavailable(&EngineError::Config("x".into())));
    }
}
