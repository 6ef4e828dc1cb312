//! Creating and reading jobs.

use znode_schema::paths;
use znode_schema::records::{JobEvent, JobProgress, JobRecord, JobRequest};
use znode_schema::{JobState, SCHEMA_VERSION};

use crate::counter::Archived;
use crate::error::{EngineError, Result};
use crate::ops::{self, Mode, Op};
use crate::session::Session;
use crate::store;

/// What a new job is about.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Episode id.
    pub episode: String,
    /// Episode media URL.
    pub media_url: String,
    /// Clip ids to research.
    pub clips: Vec<String>,
    /// Queue priority (the episode's).
    pub priority: i64,
    /// The episode's initial curation, unix ms.
    pub curated_ms: i64,
    /// Batch, if any.
    pub batch: Option<String>,
}

/// Where an operator's pending `cancel`/`hold` request sends a job instead of the move
/// its holder, the reaper or the TTL step was about to make, and the message it gets:
/// the request's reason, or "cancel requested by an operator". `None` without a
/// request. The one rule for the researcher's obey, the reaper's expiry and the
/// work-item TTL step ([`crate::lease::expire_waiting`]): a request is never dropped
/// for `expired`, whose pairs would be planned again.
pub fn requested_move(job: &JobRecord) -> Option<(JobState, String)> {
    let (to, word) = match job.request? {
        JobRequest::Cancel => (JobState::Cancelled, "cancel requested"),
        JobRequest::Hold => (JobState::Held, "hold requested"),
    };
    let why = job
        .request_reason
        .clone()
        .unwrap_or_else(|| format!("{word} by an operator"));
    Some((to, why))
}

/// The operations proving in a multi that `job` does not exist: create `/jobs/{job}`
/// and delete it again, which only succeeds while no such job exists. The one proof of
/// absence for removing what names a missing job (a stray queue entry,
/// [`crate::queue::remove_stray`]; a lease, [`crate::lease::remove_jobless`]): every job
/// is created with its queue entry and lease in one multi, so a job created meanwhile
/// fails the whole multi and nothing of it is removed.
pub fn absent_ops(job: &str) -> Vec<Op> {
    let path = paths::job(job);
    vec![
        Op::Create {
            path: path.clone(),
            data: Vec::new(),
            mode: Mode::Persistent,
        },
        Op::Delete {
            path,
            version: Some(0),
        },
    ]
}

/// Reads a job and its data version.
pub async fn read(session: &Session, id: &str) -> Result<(JobRecord, i32)> {
    let (job, stat) = store::read_required::<JobRecord>(session, &paths::job(id)).await?;
    Ok((job, stat.version))
}

/// Reads a job if it exists.
pub async fn read_optional(session: &Session, id: &str) -> Result<Option<(JobRecord, i32)>> {
    Ok(store::read::<JobRecord>(session, &paths::job(id))
        .await?
        .map(|(job, stat)| (job, stat.version)))
}

/// Reads a job if it exists, sending the read again while its reply is lost (for at most
/// the session timeout plus the connect timeout): a connection reset is not "the job
/// cannot be read" nor "it changed meanwhile" (outside 17i G5).
pub async fn reread(session: &Session, id: &str) -> Result<Option<(JobRecord, i32)>> {
    crate::lock::while_reply_lost(session, || read_optional(session, id)).await
}

/// Did the move that `by` made with `step` from `before` apply, judged from the job read
/// again (`after`)? Its event is the one right after `before`'s last event (events are
/// kept in order, the oldest dropped beyond the limit). The one "unknown outcome" rule
/// for a transition whose reply was lost ([`after_lost_reply`]).
pub fn applied(before: &JobRecord, after: &JobRecord, by: &str, step: &str) -> bool {
    let next = match before.events.last() {
        None => after.events.first(),
        Some(last) => after
            .events
            .iter()
            .rposition(|e| e == last)
            .and_then(|i| after.events.get(i + 1)),
    };
    next.is_some_and(|e| e.by == by && e.step == step)
}

/// What a transition whose reply was lost did, by the job read again.
#[derive(Debug, Clone, PartialEq)]
pub enum LostReply {
    /// It applied unseen: the job as it is now, at its version.
    Applied(JobRecord, i32),
    /// It did not apply (or the job moved on past it by someone else's hand): the job as
    /// it is now.
    NotApplied(JobRecord, i32),
    /// The job is gone.
    Gone,
}

/// After a transition of `before` made by `by` with `step` whose reply was lost
/// ([`crate::error::reply_may_be_lost`]: the multi may have applied or not): reads the
/// job again, waiting out the reconnect (a read whose reply is lost too is sent again
/// while the session lives), and says which ([`applied`]). A caller acts on what is true
/// instead of guessing: it goes on with a claim that applied (the lock is still its
/// own), and does not call a job it finished "lost" (outside 17i G4: a claim that applied
/// unseen was dropped and its job stranded in `leased` until the reaper blamed a lost
/// researcher).
pub async fn after_lost_reply(
    session: &Session,
    before: &JobRecord,
    by: &str,
    step: &str,
) -> Result<LostReply> {
    Ok(match reread(session, &before.id).await? {
        None => LostReply::Gone,
        Some((after, version)) if applied(before, &after, by, step) => {
            LostReply::Applied(after, version)
        }
        Some((after, version)) => LostReply::NotApplied(after, version),
    })
}

/// Creates a job in the start state's queue, together with `extra(job_id)` operations
/// (the planner's lease), as one multi. The id comes from `/counters/jobs`, whose version
/// check in the same multi makes ids unique; a lost race is retried. An id whose nodes
/// exist already (the counter fell behind) is skipped by moving the counter past the ids
/// in use ([`crate::counter::catch_up`]), so every pass makes progress. Nothing
/// archived is known here: the planner uses [`create_past`].
pub async fn create(
    session: &Session,
    new: &NewJob,
    by: &str,
    extra: impl Fn(&str) -> Vec<Op>,
) -> Result<JobRecord> {
    create_past(session, new, by, &Archived::NONE, extra).await
}

/// [`create`], never giving out an id the research archive holds (`archived`, read
/// from the database): a counter behind it is moved past it first (the archive's ids
/// have no node in the tree to collide with, so the multi alone would reuse them).
pub async fn create_past(
    session: &Session,
    new: &NewJob,
    by: &str,
    archived: &Archived,
    extra: impl Fn(&str) -> Vec<Op>,
) -> Result<JobRecord> {
    loop {
        let stat = store::exists(session, paths::JOB_COUNTER)
            .await?
            .ok_or_else(|| EngineError::NotInitialised {
                chroot: session.chroot().to_string(),
                missing: paths::JOB_COUNTER.to_string(),
            })?;
        if crate::counter::behind(stat.version, archived.jobs).is_some() {
            let moved = crate::counter::catch_up(session, &crate::counter::JOBS, archived).await?;
            tracing::warn!(
                counter = paths::JOB_COUNTER,
                archived = %paths::job_id(archived.jobs),
                for_ = %new.episode,
                moved = ?moved,
                "job counter was behind the job ids the research archive holds; moved it past them"
            );
            continue;
        }
        let id = paths::job_id(stat.version as u64 + 1);
        let now = crate::clock::stamp_now();
        let job = JobRecord {
            schema: SCHEMA_VERSION,
            id: id.clone(),
            status: JobState::Pending,
            last_successful_status: None,
            retry_count: 0,
            message: None,
            priority: new.priority,
            curated_ms: new.curated_ms,
            episode: new.episode.clone(),
            media_url: new.media_url.clone(),
            clips: new.clips.clone(),
            batch: new.batch.clone(),
            holder: None,
            request: None,
            request_reason: None,
            progress: JobProgress::default(),
            created: now,
            updated: now,
            events: vec![JobEvent {
                at: now,
                by: by.to_string(),
                step: "create".into(),
                result: "ok".into(),
            }],
        };
        let job_path = paths::job(&id);
        let mut batch = vec![
            Op::SetData {
                path: paths::JOB_COUNTER.to_string(),
                data: Vec::new(),
                version: Some(stat.version),
            },
            Op::Create {
                path: job_path.clone(),
                data: store::encode(&job_path, &job)?,
                mode: Mode::Persistent,
            },
            Op::Create {
                path: paths::queue_entry(JobState::Pending, &job.queue_entry().name()),
                data: Vec::new(),
                mode: Mode::Persistent,
            },
        ];
        batch.extend(extra(&id));
        match ops::commit(session, &batch).await {
            Ok(_) => return Ok(job),
            // Another writer took this id first: it made progress; take the next one.
            Err(e) if e.failed_path() == Some(paths::JOB_COUNTER) => {
                tokio::task::yield_now().await;
            }
            // A node this id names exists although the counter had not given the id out:
            // the counter is behind the ids in use. Move it past them (progress), say so.
            Err(e) if crate::counter::taken_id(&crate::counter::JOBS, &e).is_some() => {
                let taken = crate::counter::taken_id(&crate::counter::JOBS, &e).unwrap_or_default();
                let what = format!("a new job of episode {} ({id} is taken)", new.episode);
                crate::counter::skip_taken(session, &crate::counter::JOBS, taken, &what, archived)
                    .await?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Changes the priority of a job that is still `pending`, renaming its queue entry so it
/// is served in the new order. Returns `false` if the job is not pending, is locked by a
/// worker, or already has that priority (work that is leased is not re-ordered).
pub async fn reprioritize(session: &Session, id: &str, priority: i64, by: &str) -> Result<bool> {
    let Some(lock) = crate::lock::JobLock::try_acquire(session, id, by).await? else {
        return Ok(false);
    };
    let lock = crate::lock::LockGuard::new(session, lock);
    let outcome = async {
        let Some((job, version)) = read_optional(session, id).await? else {
            return Ok(false);
        };
        if job.status != JobState::Pending || job.priority == priority {
            return Ok(false);
        }
        let mut next = job.clone();
        next.priority = priority;
        next.updated = crate::clock::stamp_now();
        next.push_event(znode_schema::records::JobEvent {
            at: next.updated,
            by: by.to_string(),
            step: "reprioritize".into(),
            result: format!("priority {} -> {priority}", job.priority),
        });
        let path = paths::job(id);
        ops::commit(
            session,
            &[
                Op::SetData {
                    path: path.clone(),
                    data: store::encode(&path, &next)?,
                    version: Some(version),
                },
                Op::Delete {
                    path: paths::queue_entry(JobState::Pending, &job.queue_entry().name()),
                    version: None,
                },
                Op::Create {
                    path: paths::queue_entry(JobState::Pending, &next.queue_entry().name()),
                    data: Vec::new(),
                    mode: Mode::Persistent,
                },
                lock.lock().release_op(),
            ],
        )
        .await?;
        Ok(true)
    }
    .await;
    // Moved: the multi deleted the lock. Otherwise it is released, best effort (a
    // failed release is not this call's error).
    if matches!(outcome, Ok(true)) {
        lock.committed();
    } else {
        let _ = lock.release().await;
    }
    outcome
}
