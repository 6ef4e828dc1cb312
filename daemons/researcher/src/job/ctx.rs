//! One claimed job's shared state: the job record and version, the lease, progress, and
//! the admin request. Every write to the job or lease goes through here, serialised by
//! one mutex, so the heartbeat and the main flow never race each other's versions.

use std::sync::Mutex;
use std::time::Duration;

use archivist_engine::lock::JobLock;
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    JobProgress, JobRecord, JobRequest, LeaseRecord, ReportRecord,
};
use archivist_engine::schema::JobState;
use archivist_engine::transition::{LockAction, Role, Transition};
use archivist_engine::{jobs, store, zk, EngineError, Session};
use tokio_util::sync::CancellationToken;

/// What a finishing transition does besides moving the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseOp {
    /// Leave the lease as it is (the recorder revokes it after `reported`).
    Leave,
    /// Delete it (failed, cancelled, held).
    Delete,
    /// Clear its holder (handed back to `pending`).
    ClearHolder,
}

/// A transition of the held job.
#[derive(Debug, Clone)]
pub(crate) struct Move {
    pub to: JobState,
    pub release: bool,
    pub failed: bool,
    pub message: Option<String>,
    pub clear_holder: bool,
    pub clear_request: bool,
    pub lease: LeaseOp,
    pub report: Option<ReportRecord>,
    pub step: &'static str,
    pub result: String,
    /// Give up (with [`EngineError::WrongState`]) if the job, re-read after a version
    /// conflict, carries an admin request: a hand-back must not carry a cancel or hold
    /// into `pending`, where the work-item TTL would drop it.
    pub yield_to_request: bool,
}

impl Move {
    /// Keeps the lock, touches nothing else.
    pub fn keep(to: JobState, step: &'static str, result: impl Into<String>) -> Move {
        Move {
            to,
            release: false,
            failed: false,
            message: None,
            clear_holder: false,
            clear_request: false,
            lease: LeaseOp::Leave,
            report: None,
            step,
            result: result.into(),
            yield_to_request: false,
        }
    }

    /// Releases the lock.
    pub fn release(to: JobState, step: &'static str, result: impl Into<String>) -> Move {
        Move {
            release: true,
            ..Move::keep(to, step, result)
        }
    }
}

struct Held {
    job: JobRecord,
    version: i32,
    lease: Option<(LeaseRecord, i32)>,
}

/// The shared state of one job being researched.
pub(crate) struct JobCtx {
    pub session: Session,
    pub lock: JobLock,
    pub me: String,
    pub job_id: String,
    pub episode: String,
    pub total_clips: usize,
    /// The job's clips (whether one was reported is looked up by name).
    pub clips: Vec<String>,
    held: tokio::sync::Mutex<Held>,
    progress: Mutex<JobProgress>,
    /// The researcher slot's progress gauge (`archivist_researcher_job_progress{slot}`).
    progress_gauge: Option<metrics::Gauge>,
    request: Mutex<Option<JobRequest>>,
    /// The operator's reason given with the request, if any.
    request_reason: Mutex<Option<String>>,
    /// Fires when an admin request (cancel, hold) arrives, or the job is no longer this
    /// worker's ([`JobCtx::lost`]).
    pub stop: CancellationToken,
    /// Set once the job is seen to be no longer this worker's while its session lives:
    /// its lock is gone (deleted by hand) or the job moved to a state a researcher does
    /// not hold (the reaper expired it). Nothing more is written to it.
    lost: std::sync::atomic::AtomicBool,
    /// Whether "unreadable job" was logged for this job already (said once, not every
    /// heartbeat: outside 17i G8).
    told_unreadable: std::sync::atomic::AtomicBool,
    /// When this researcher took the job (research seconds and realtime factor).
    pub started: std::time::Instant,
}

impl JobCtx {
    pub fn new(
        session: Session,
        lock: JobLock,
        me: &str,
        job: JobRecord,
        version: i32,
        lease: Option<(LeaseRecord, i32)>,
        progress_gauge: Option<metrics::Gauge>,
    ) -> JobCtx {
        if let Some(g) = &progress_gauge {
            g.set(job.progress.fraction);
        }
        JobCtx {
            session,
            lock,
            me: me.to_string(),
            job_id: job.id.clone(),
            episode: job.episode.clone(),
            total_clips: job.clips.len(),
            clips: job.clips.clone(),
            progress: Mutex::new(job.progress.clone()),
            progress_gauge,
            held: tokio::sync::Mutex::new(Held {
                job,
                version,
                lease,
            }),
            request: Mutex::new(None),
            request_reason: Mutex::new(None),
            stop: CancellationToken::new(),
            lost: std::sync::atomic::AtomicBool::new(false),
            told_unreadable: std::sync::atomic::AtomicBool::new(false),
            started: std::time::Instant::now(),
        }
    }

    fn job_path(&self) -> String {
        paths::job(&self.job_id)
    }

    fn lease_path(&self) -> String {
        paths::lease(&self.job_id)
    }

    /// The admin request that fired [`JobCtx::stop`], if any.
    pub fn request(&self) -> Option<JobRequest> {
        self.request.lock().ok().and_then(|r| *r)
    }

    /// The operator's reason given with the request, if any.
    pub fn request_reason(&self) -> Option<String> {
        self.request_reason.lock().ok().and_then(|r| r.clone())
    }

    fn note_request(&self, job: &JobRecord) {
        if let Some(req) = job.request {
            if let Ok(mut r) = self.request_reason.lock() {
                r.clone_from(&job.request_reason);
            }
            if let Ok(mut r) = self.request.lock() {
                if r.is_none() {
                    tracing::info!(job = %self.job_id, episode = %self.episode, state = %job.status, request = ?req, "admin request noticed");
                }
                *r = Some(req);
            }
            self.stop.cancel();
        }
    }

    /// Is the job no longer this worker's (its lock gone, or moved by another hand)?
    pub fn lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Marks the job as no longer this worker's and stops its work, saying why once
    /// (outside 17i G7: a researcher whose lock was deleted by hand went on downloading,
    /// wrote progress into the expired job and ended with "transition expired ->
    /// researching is not in the state table").
    fn lose(&self, why: &str) {
        if !self.lost.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(job = %self.job_id, episode = %self.episode, "{why}: this researcher no longer owns the job; its work stops and nothing more is written to it");
        }
        self.stop.cancel();
    }

    /// Adopts a newer reading of the job, or loses the job if it is in a state a
    /// researcher does not hold.
    fn adopt(&self, held: &mut Held, job: JobRecord, version: i32) {
        if !matches!(job.status, JobState::Leased | JobState::Researching) {
            self.lose(&format!("the job is {} now", job.status));
            return;
        }
        self.note_request(&job);
        held.job = job;
        held.version = version;
    }

    /// Snapshot of the progress.
    pub fn progress(&self) -> JobProgress {
        self.progress.lock().map(|p| p.clone()).unwrap_or_default()
    }

    fn update_progress(&self, f: impl FnOnce(&mut JobProgress)) {
        if let Ok(mut p) = self.progress.lock() {
            let before = p.fraction;
            f(&mut p);
            p.fraction = p.fraction.clamp(before, 1.0);
            if let Some(g) = &self.progress_gauge {
                g.set(p.fraction);
            }
        }
    }

    /// Raises the fraction done (never lowers it).
    pub fn raise(&self, fraction: f64) {
        self.update_progress(|p| p.fraction = p.fraction.max(fraction));
    }

    /// Download progress: bytes so far and the fraction of the download phase.
    pub fn downloaded(&self, bytes: u64, total: Option<u64>) {
        self.update_progress(|p| {
            p.bytes = p.bytes.max(bytes);
            if let Some(t) = total.filter(|t| *t > 0) {
                p.fraction = p
                    .fraction
                    .max(0.02 + 0.38 * (bytes as f64 / t as f64).min(1.0));
            }
        });
    }

    /// One more clip done (reported, skipped or already researched).
    pub fn clip_done(&self) {
        let total = self.total_clips.max(1) as f64;
        self.update_progress(|p| {
            p.clips_done += 1;
            p.fraction = p
                .fraction
                .max(0.45 + 0.55 * (p.clips_done as f64 / total).min(1.0));
        });
    }

    /// The episode's media URL.
    pub async fn media_url(&self) -> String {
        self.held.lock().await.job.media_url.clone()
    }

    /// Current job status as last seen.
    pub async fn status(&self) -> JobState {
        self.held.lock().await.job.status
    }

    /// Creates a non-final report in a multi with a check of the job lock. A report that
    /// exists already counts as made.
    ///
    /// # Errors
    /// A precondition on the lock (this worker lost it), or a write/session failure.
    pub async fn report(&self, report: &ReportRecord) -> Result<(), EngineError> {
        let path = paths::report(&paths::report_name(&report.job, &report.clip));
        let op = Op::Create {
            path: path.clone(),
            data: store::encode(&path, report)?,
            mode: Mode::Persistent,
        };
        let ops = [self.lock.check_op(), op];
        let mut waited = None;
        loop {
            match ops::commit(&self.session, &ops).await {
                Ok(_) => return Ok(()),
                Err(e) if e.failed_path() == Some(path.as_str()) => {
                    tracing::info!(job = %self.job_id, episode = %self.episode, clip = %report.clip, "report already there");
                    return Ok(());
                }
                // Creating a report is idempotent: after a dropped connection, try again.
                Err(e) if e.is_retryable() && self.wait_for_connection(&mut waited).await => {
                    tracing::warn!(job = %self.job_id, error = %e, "connection lost writing a report; retrying");
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// After a connection loss: waits a moment for the session to reconnect (a ZooKeeper
    /// leader change). False once the session is lost or a session timeout has passed
    /// since the first loss (`waited` keeps when that was).
    async fn wait_for_connection(&self, waited: &mut Option<std::time::Instant>) -> bool {
        let since = *waited.get_or_insert_with(std::time::Instant::now);
        if self.session.is_lost() || since.elapsed() > self.session.config().session_timeout {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        !self.session.is_lost()
    }

    /// Takes a newer version of the job read after a conflict or a move that did not
    /// apply: an admin request on it is noted; a job in another state, or carrying a
    /// request the move must yield to, is [`EngineError::WrongState`] (the job moved).
    fn take_newer(
        &self,
        held: &mut Held,
        job: JobRecord,
        version: i32,
        m: &Move,
    ) -> Result<(), EngineError> {
        self.note_request(&job);
        let from = held.job.status;
        held.job = job;
        held.version = version;
        if held.job.status != from || (m.yield_to_request && held.job.request.is_some()) {
            return Err(EngineError::WrongState {
                job: self.job_id.clone(),
                expected: from,
                actual: held.job.status,
            });
        }
        Ok(())
    }

    /// The job's lease as it is now, with its version (`None`: revoked).
    async fn lease_now(&self) -> Result<Option<(LeaseRecord, i32)>, EngineError> {
        Ok(
            store::read::<LeaseRecord>(&self.session, &self.lease_path())
                .await?
                .map(|(l, s)| (l, s.version)),
        )
    }

    /// Commits a transition of the held job, re-reading and retrying when the job's
    /// version moved (an admin request), the lease moved (a recorder extended it) or is
    /// gone, or the report already exists.
    ///
    /// # Errors
    /// A precondition on the lock means this worker lost the job; the job in a state
    /// that no longer allows the move is [`EngineError::WrongState`].
    pub async fn transition(&self, m: Move) -> Result<(), EngineError> {
        let mut held = self.held.lock().await;
        if self.lost() {
            return Err(EngineError::WrongState {
                job: self.job_id.clone(),
                expected: held.job.status,
                actual: held.job.status,
            });
        }
        let job_path = self.job_path();
        let lease_path = self.lease_path();
        let lock_path = self.lock.path.clone();
        let report_path = m
            .report
            .as_ref()
            .map(|r| paths::report(&paths::report_name(&r.job, &r.clip)));
        let mut with_report = m.report.is_some();
        let mut last_error = None;
        let mut waited = None;
        let mut attempts = 0;
        while attempts < 6 {
            attempts += 1;
            let progress = self.progress();
            let lock = if m.release {
                LockAction::Release(self.lock.clone())
            } else {
                LockAction::Keep(self.lock.clone())
            };
            let mut t = Transition::new(Role::Researcher, &held.job, held.version, m.to)
                .lock(lock)
                .edit(|j| {
                    j.progress = progress;
                    if m.message.is_some() {
                        j.message = m.message.clone();
                    }
                    if m.clear_holder {
                        j.holder = None;
                    }
                    if m.clear_request {
                        j.request = None;
                        j.request_reason = None;
                    }
                })
                .event(&self.me, m.step, &m.result);
            if m.failed {
                t = t.failed();
            }
            let mut extra = Vec::new();
            if let (true, Some(report), Some(path)) = (with_report, &m.report, &report_path) {
                extra.push(Op::Create {
                    path: path.clone(),
                    data: store::encode(path, report)?,
                    mode: Mode::Persistent,
                });
            }
            match (m.lease, &held.lease) {
                (LeaseOp::Delete, Some(_)) => extra.push(Op::Delete {
                    path: lease_path.clone(),
                    version: None,
                }),
                (LeaseOp::ClearHolder, Some((lease, version))) => {
                    let mut next = lease.clone();
                    next.holder = None;
                    extra.push(Op::SetData {
                        path: lease_path.clone(),
                        data: store::encode(&lease_path, &next)?,
                        version: Some(*version),
                    });
                }
                _ => {}
            }
            let t = t.with_ops(extra);
            match t.commit(&self.session).await {
                Ok((job, version)) => {
                    held.job = job;
                    held.version = version;
                    if matches!(m.lease, LeaseOp::Delete) {
                        held.lease = None;
                    }
                    return Ok(());
                }
                Err(err @ EngineError::Precondition { .. }) => {
                    let failed = err.failed_path().unwrap_or_default();
                    if failed == lock_path {
                        return Err(err);
                    } else if report_path.as_ref().is_some_and(|p| p == failed) {
                        tracing::info!(job = %self.job_id, episode = %self.episode, "final report already there; moving without it");
                        with_report = false;
                    } else if failed == lease_path {
                        held.lease = self.lease_now().await?;
                    } else if failed == job_path {
                        let (job, version) = jobs::read(&self.session, &self.job_id).await?;
                        // After a lost reply, an earlier send of this very move may have
                        // applied late (still in the server's pipeline when the job was
                        // re-read): the conflict is then our own move, not a change.
                        if waited.is_some() && jobs::applied(&held.job, &job, &self.me, m.step) {
                            tracing::info!(job = %self.job_id, episode = %self.episode, state = %job.status, "an earlier send of the transition applied");
                            held.job = job;
                            held.version = version;
                            held.lease = self.lease_now().await?;
                            return Ok(());
                        }
                        self.take_newer(&mut held, job, version, &m)?;
                    } else {
                        return Err(err);
                    }
                    last_error = Some(err.to_string());
                }
                // The connection dropped: the multi may or may not have applied. The
                // engine's one rule for that (`jobs::after_lost_reply`) re-reads the job,
                // waiting out the reconnect, and judges by the job's own history: this
                // move's event right after the last one we saw means it applied (with
                // its report: the multi is atomic), whatever state the job has reached
                // since. Before, a re-read that failed during the reconnect sent the
                // multi again, whose version check then failed on our own applied move,
                // read as "it moved meanwhile": the researcher walked away from a job it
                // held and the reaper blamed a lost session (outside 17m M3).
                Err(e) if e.is_retryable() && self.wait_for_connection(&mut waited).await => {
                    tracing::warn!(job = %self.job_id, error = %e, "connection lost during a transition; checking whether it applied");
                    attempts -= 1;
                    match jobs::after_lost_reply(&self.session, &held.job, &self.me, m.step).await?
                    {
                        jobs::LostReply::Applied(job, version) => {
                            if job.status == m.to {
                                tracing::info!(job = %self.job_id, episode = %self.episode, state = %job.status, "the transition applied unseen");
                            } else {
                                tracing::info!(job = %self.job_id, episode = %self.episode, state = %job.status, "the transition applied unseen and the job moved on since");
                            }
                            held.job = job;
                            held.version = version;
                            held.lease = self.lease_now().await?;
                            return Ok(());
                        }
                        jobs::LostReply::NotApplied(job, version) => {
                            self.take_newer(&mut held, job, version, &m)?;
                            held.lease = self.lease_now().await?;
                            last_error = Some(e.to_string());
                        }
                        jobs::LostReply::Gone => {
                            return Err(EngineError::NotFound(format!(
                                "job {} (deleted while its transition's reply was lost)",
                                self.job_id
                            )))
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(EngineError::Config(format!(
            "job {}: transition to {} kept conflicting ({})",
            self.job_id,
            m.to,
            last_error.unwrap_or_default()
        )))
    }

    /// Extends the lease and publishes progress, both version-checked.
    pub async fn beat(&self) {
        let mut held = self.held.lock().await;
        let client = self.session.client();
        let lease_path = self.lease_path();
        if let Some((lease, version)) = held.lease.clone() {
            let mut next = lease;
            next.extensions += 1;
            let written = match store::encode(&lease_path, &next) {
                Ok(data) => client.set_data(&lease_path, &data, Some(version)).await,
                Err(e) => {
                    tracing::warn!(job = %self.job_id, error = %e, "cannot encode lease");
                    return;
                }
            };
            match written {
                Ok(stat) => held.lease = Some((next, stat.version)),
                Err(zk::Error::BadVersion) => {
                    // The recorder extended it meanwhile; take its version if still ours.
                    match store::read::<LeaseRecord>(&self.session, &lease_path).await {
                        Ok(Some((l, s))) if l.holder.as_deref() == Some(self.me.as_str()) => {
                            held.lease = Some((l, s.version));
                        }
                        Ok(_) => {
                            tracing::warn!(job = %self.job_id, episode = %self.episode, "lease revoked or taken; results are still reported");
                            held.lease = None;
                        }
                        Err(e) => {
                            tracing::warn!(job = %self.job_id, error = %e, "cannot re-read lease")
                        }
                    }
                }
                Err(zk::Error::NoNode) => {
                    tracing::warn!(job = %self.job_id, episode = %self.episode, "lease revoked; results are still reported");
                    held.lease = None;
                }
                Err(e) => tracing::warn!(job = %self.job_id, error = %e, "lease heartbeat failed"),
            }
        }
        let progress = self.progress();
        if progress == held.job.progress {
            // Nothing to write: still look at the lock, so a lock deleted by hand stops
            // the work within a heartbeat.
            match store::exists(&self.session, &self.lock.path).await {
                Ok(Some(stat)) if stat.ephemeral_owner == self.session.id_number() => {}
                Ok(_) => self.lose("its lock is gone (deleted by hand?)"),
                Err(e) => {
                    tracing::debug!(job = %self.job_id, error = %e, "cannot look at the lock")
                }
            }
            return;
        }
        let job_path = self.job_path();
        let mut next = held.job.clone();
        next.progress = progress;
        let data = match store::encode(&job_path, &next) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(job = %self.job_id, error = %e, "cannot encode job");
                return;
            }
        };
        // Lock, then write: the progress goes in only while this worker's lock is there.
        let write = [
            Op::Check {
                path: self.lock.path.clone(),
                version: self.lock.version,
            },
            Op::SetData {
                path: job_path.clone(),
                data,
                version: Some(held.version),
            },
        ];
        match ops::commit(&self.session, &write).await {
            Ok(results) => {
                if let Some(zk::MultiWriteResult::SetData { stat }) = results.get(1) {
                    held.version = stat.version;
                    held.job = next;
                }
            }
            Err(EngineError::Precondition { index: 0, .. }) => {
                self.lose("its lock is gone (deleted by hand?)");
            }
            Err(EngineError::Precondition { index: 1, .. }) => {
                match jobs::read(&self.session, &self.job_id).await {
                    Ok((job, version)) => self.adopt(&mut held, job, version),
                    Err(e) => tracing::warn!(job = %self.job_id, error = %e, "cannot re-read job"),
                }
            }
            Err(e) => tracing::warn!(job = %self.job_id, error = %e, "progress write failed"),
        }
    }

    /// Reads the job now and notices an admin request written since the last look (the
    /// watch that reports it may not have been served yet: a stopping researcher checks
    /// before it hands the job back).
    pub async fn refresh(&self) {
        match jobs::read(&self.session, &self.job_id).await {
            Ok((job, version)) => {
                let mut held = self.held.lock().await;
                if version > held.version {
                    self.adopt(&mut held, job, version);
                } else {
                    self.note_request(&job);
                }
            }
            Err(e) => tracing::warn!(job = %self.job_id, error = %e, "cannot re-read job"),
        }
    }

    /// Reads the job (setting a watch) and notices an admin request; returns the watcher.
    async fn look(&self) -> Option<zk::OneshotWatcher> {
        let path = self.job_path();
        match self.session.client().get_and_watch_data(&path).await {
            Ok((data, stat, watcher)) => {
                match archivist_engine::schema::records::decode::<JobRecord>(&path, &data) {
                    Ok(job) => {
                        let mut held = self.held.lock().await;
                        if stat.version > held.version {
                            self.adopt(&mut held, job, stat.version);
                        } else {
                            self.note_request(&job);
                        }
                    }
                    Err(e) => {
                        if !self
                            .told_unreadable
                            .swap(true, std::sync::atomic::Ordering::Relaxed)
                        {
                            tracing::warn!(job = %self.job_id, error = %e, "unreadable job record: this researcher goes on with the job as it read it at the claim (said once; `archivist fsck` names the record)");
                        }
                    }
                }
                Some(watcher)
            }
            Err(e) => {
                tracing::warn!(job = %self.job_id, error = %e, "cannot watch job");
                None
            }
        }
    }

    /// Heartbeats every `interval` and watches the job for admin requests until `done`
    /// fires or the session is lost.
    pub async fn keep_alive(&self, interval: Duration, done: CancellationToken) {
        let lost = self.session.lost();
        let mut next_beat = tokio::time::Instant::now() + interval;
        loop {
            let watcher = self.look().await;
            let changed = async {
                match watcher {
                    Some(w) => {
                        w.changed().await;
                    }
                    None => tokio::time::sleep(interval).await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep_until(next_beat) => {
                    self.beat().await;
                    next_beat = tokio::time::Instant::now() + interval;
                }
                _ = changed => {}
                _ = done.cancelled() => return,
                _ = lost.cancelled() => return,
            }
        }
    }
}
