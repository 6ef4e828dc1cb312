//! Compare-and-set actions on one job: retry, hold, release, cancel, delete.
//!
//! Every action starts from a [`Seen`] job (the record and the data version the
//! operator looked at). On an unlocked job the action takes the job's lock, re-reads the
//! job and refuses if its version moved, then commits one multi at the version seen that
//! also releases the lock. On a job a researcher holds, `hold` and `cancel` write a
//! `request` at the version seen instead; the holder acts on it within seconds.
//!
//! One file per action (`retry`, `stop` for hold and cancel, `release`, `delete`, `bulk`
//! for many jobs); this module holds what they share: looking, locking and re-checking,
//! committing, reporting.

mod bulk;
mod delete;
mod release;
mod retry;
mod stop;

pub use bulk::{message_matches, retry_all_failed, BulkItem};
pub use delete::{delete, delete_seen, delete_unreadable, UnreadableDelete};
pub use release::{release, release_seen};
pub use retry::{retry, retry_seen};
pub use stop::{cancel, cancel_seen, hold, hold_seen};

use std::time::Duration;

use archivist_engine::lock::{self, JobLock};
use archivist_engine::ops::{self, Op};
use archivist_engine::schema::records::{JobRecord, JobRequest};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::transition::{LockAction, Transition};
use archivist_engine::{jobs, lease, store, Session};
use serde::Serialize;

use crate::error::{AdminError, Result};
use crate::settings::AdminSettings;

/// A job as the operator saw it: the record and its data version. Actions write at this
/// version, so a job that moved after it was seen is never changed blindly.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The record read.
    pub job: JobRecord,
    /// Its data version when read.
    pub version: i32,
}

/// Reads a job for an action.
pub async fn look(session: &Session, id: &str) -> Result<Seen> {
    match jobs::read_optional(session, id).await? {
        Some((job, version)) => Ok(Seen { job, version }),
        None => Err(AdminError::NotFound {
            what: "job",
            id: id.to_string(),
            path: paths::job(id),
        }),
    }
}

/// Which action ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// `retry`
    Retry,
    /// `hold`
    Hold,
    /// `release`
    Release,
    /// `cancel`
    Cancel,
    /// `delete`
    Delete,
}

impl Action {
    /// Every action, in the order pages offer them.
    pub const ALL: [Action; 5] = [
        Action::Retry,
        Action::Hold,
        Action::Release,
        Action::Cancel,
        Action::Delete,
    ];

    /// The action a command or a form names.
    pub fn named(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// Can the action change a job in `status` carrying `request`? The one rule the
    /// actions refuse by and the console offers by (outside 24b N4: the console offered
    /// `hold` on failed jobs and `retry` on recorded ones, all refused on submit). A
    /// job it cannot change is refused, or already where the action would put it.
    pub fn applies(self, status: JobState, request: Option<JobRequest>) -> bool {
        let table = archivist_engine::transition::machine();
        match self {
            Action::Retry => status == JobState::Failed,
            Action::Hold => {
                status != JobState::Held
                    && table.allows(status, JobState::Held)
                    && request != Some(JobRequest::Cancel)
            }
            Action::Cancel => {
                status != JobState::Cancelled && table.allows(status, JobState::Cancelled)
            }
            // A hold request is withdrawn only where it can still take effect (outside
            // try 24c L3: "release…" was offered on the failed and recorded lists).
            Action::Release => {
                status == JobState::Held
                    || (request == Some(JobRequest::Hold) && table.allows(status, JobState::Held))
            }
            Action::Delete => matches!(
                status,
                JobState::Failed | JobState::Held | JobState::Cancelled
            ),
        }
    }

    /// Can the action change some job in `status` (whatever request it carries)? What a
    /// list filtered by state offers.
    pub fn may_apply_in(self, status: JobState) -> bool {
        [None, Some(JobRequest::Hold), Some(JobRequest::Cancel)]
            .into_iter()
            .any(|request| self.applies(status, request))
    }

    /// The action's name, as commands and forms give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Retry => "retry",
            Action::Hold => "hold",
            Action::Release => "release",
            Action::Cancel => "cancel",
            Action::Delete => "delete",
        }
    }
}

/// What an action did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Written: the job moved (or was deleted).
    Done,
    /// A researcher holds the job: the request was written on it; it acts within seconds.
    Requested,
    /// Nothing to do: the job already was where the action would put it.
    Unchanged,
}

/// The result of an action on one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActionReport {
    /// Job id.
    pub job: String,
    /// Episode of the job.
    pub episode: String,
    /// The action.
    pub action: Action,
    /// State the job was in.
    pub from: JobState,
    /// State it is in now (`None` once deleted).
    pub to: Option<JobState>,
    /// What happened.
    pub outcome: Outcome,
    /// In words.
    pub detail: String,
}

fn report(
    seen: &Seen,
    action: Action,
    to: Option<JobState>,
    outcome: Outcome,
    detail: String,
) -> ActionReport {
    let outcome_name = match outcome {
        Outcome::Done => "done",
        Outcome::Requested => "requested",
        Outcome::Unchanged => "unchanged",
    };
    metrics::counter!("archivist_admin_actions_total", "action" => action.as_str(), "outcome" => outcome_name)
        .increment(1);
    tracing::info!(
        job = %seen.job.id,
        episode = %seen.job.episode,
        state = %seen.job.status,
        action = action.as_str(),
        outcome = outcome_name,
        "{detail}"
    );
    ActionReport {
        job: seen.job.id.clone(),
        episode: seen.job.episode.clone(),
        action,
        from: seen.job.status,
        to,
        outcome,
        detail,
    }
}

fn refused(seen: &Seen, reason: impl Into<String>) -> AdminError {
    metrics::counter!("archivist_admin_refusals_total").increment(1);
    AdminError::Refused {
        job: seen.job.id.clone(),
        state: seen.job.status,
        reason: reason.into(),
    }
}

/// Who holds a job's lock, in words. A persistent lock (made by hand: no session owns
/// it) never goes by itself, so the words say what to do instead of a bare "session
/// 0x0" (outside 17d finding 16c).
async fn lock_owner(session: &Session, id: &str) -> String {
    match lock::holder(session, id).await {
        Ok(Some((record, stat))) if stat.ephemeral_owner == 0 => format!(
            "{} (a persistent lock made by hand, since {}: no session owns it, so it never goes by itself; after checking nobody works on the job, delete {} and try again; `archivist fsck` lists such locks)",
            record.owner,
            record.since,
            archivist_engine::schema::paths::job_lock(id)
        ),
        Ok(Some((record, stat))) => format!(
            "{} (session {}, since {})",
            record.owner,
            format_args!("{:#x}", stat.ephemeral_owner),
            record.since
        ),
        // The holder finished meanwhile: if it deleted the job (a concurrent `delete`),
        // say so rather than "try again" on a job that is gone (outside 17m L3).
        Ok(None) => match jobs::read_optional(session, id).await {
            Ok(None) => "nobody any more: the job was deleted meanwhile".to_string(),
            _ => "nobody any more (try again)".to_string(),
        },
        Err(e) => format!("an unreadable lock ({e})"),
    }
}

/// How long an action waits for a job's lock held by a session that is no daemon of the
/// tree: another admin command (or the console) holds a lock for milliseconds, and reads
/// no requests, so a request written on its lock waited for the planner's work-item TTL
/// while the answer promised "within seconds" (outside 17k N2).
const BRIEF_HOLDER_WAIT: Duration = Duration::from_secs(2);

/// Takes the job's lock; while a session that is no registered daemon's holds it, tries
/// again for up to [`BRIEF_HOLDER_WAIT`]. `None`: a daemon holds it (it reads requests),
/// or the other holder kept it longer.
async fn acquire_patiently(
    session: &Session,
    settings: &AdminSettings,
    job: &str,
) -> Result<Option<JobLock>> {
    let deadline = tokio::time::Instant::now() + BRIEF_HOLDER_WAIT;
    loop {
        if let Some(lock) = JobLock::try_acquire(session, job, &settings.actor).await? {
            return Ok(Some(lock));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        match lock::holder(session, job).await {
            // Released meanwhile (or the job is gone: the caller's re-read says so).
            Ok(None) => {}
            Ok(Some((_, stat))) => {
                let holder = stat.ephemeral_owner;
                if holder == 0 || daemon_sessions(session).await.contains(&holder) {
                    return Ok(None);
                }
            }
            Err(_) => return Ok(None),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Is the job's lock held by a registered daemon's session (one that reads requests and
/// acts on them)? `Some(false)` for another admin command, the console or a persistent
/// lock; `None` when the lock is gone (the holder let go meanwhile) or cannot be read.
async fn held_by_daemon(session: &Session, job: &str) -> Option<bool> {
    match lock::holder(session, job).await {
        Ok(Some((_, stat))) if stat.ephemeral_owner != 0 => Some(
            daemon_sessions(session)
                .await
                .contains(&stat.ephemeral_owner),
        ),
        Ok(Some(_)) => Some(false),
        _ => None,
    }
}

/// The sessions of the tree's registered researchers and daemons (their registration
/// nodes are ephemeral).
async fn daemon_sessions(session: &Session) -> Vec<i64> {
    let mut owners = Vec::new();
    for (dir, node) in [
        (paths::RESEARCHERS, paths::researcher as fn(&str) -> String),
        (paths::DAEMONS, paths::daemon as fn(&str) -> String),
    ] {
        for member in store::children(session, dir).await.unwrap_or_default() {
            if let Ok(Some(stat)) = store::exists(session, &node(&member)).await {
                owners.push(stat.ephemeral_owner);
            }
        }
    }
    owners
}

/// Takes the job's lock and checks the job is still at the version seen; on any
/// failure after locking the lock is released again.
async fn lock_seen(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
) -> Result<Option<JobLock>> {
    let Some(lock) = acquire_patiently(session, settings, &seen.job.id).await? else {
        return Ok(None);
    };
    let check = jobs::reread(session, &seen.job.id).await;
    let moved = match &check {
        Ok(Some((_, version))) if *version == seen.version => None,
        Ok(Some((job, version))) => Some(format!(
            "it is now {} at version {version}, was {} at version {}",
            job.status, seen.job.status, seen.version
        )),
        Ok(None) => Some("it was deleted".to_string()),
        Err(e) => Some(format!("it cannot be read: {e}")),
    };
    if let Some(detail) = moved {
        let _ = lock.release(session).await;
        return Err(AdminError::Moved {
            path: paths::job(&seen.job.id),
            detail,
        });
    }
    Ok(Some(lock))
}

/// Commits a transition built with the lock (its event by `by` with `step`); releases
/// the lock if nothing was written. A commit whose reply was lost is judged by the job
/// read again ([`after_error`]): one that applied is reported done, one that cannot be
/// read back is [`AdminError::Unconfirmed`].
async fn commit_locked(
    session: &Session,
    seen: &Seen,
    lock: JobLock,
    transition: Transition,
    (by, step): (&str, &str),
) -> Result<()> {
    match transition
        .lock(LockAction::Release(lock.clone()))
        .commit(session)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => match after_error(session, seen, &e, by, step).await {
            Unseen::Applied => Ok(()),
            Unseen::Unknown(why) => Err(AdminError::Unconfirmed {
                job: seen.job.id.clone(),
                why,
            }),
            Unseen::NotApplied => {
                let _ = lock.release(session).await;
                Err(AdminError::from_commit(&paths::job(&seen.job.id), e))
            }
        },
    }
}

/// What became of a write whose commit returned an error.
enum Unseen {
    /// It applied; its reply was lost.
    Applied,
    /// It did not (or the error was not a lost reply).
    NotApplied,
    /// Its reply may have been lost and the job could not be read back: why.
    Unknown(String),
}

/// After `error` from a write of `seen`: was it a lost reply to a write that applied
/// unseen (`archivist_engine::jobs::after_lost_reply`, the engine's one rule)? Then the
/// action is done: before, `hold` exited 1 "write failed" for a job it had held
/// (outside 17i G5). When the job cannot be read back, nobody knows (17p F6).
async fn after_error(
    session: &Session,
    seen: &Seen,
    error: &archivist_engine::EngineError,
    by: &str,
    step: &str,
) -> Unseen {
    if error.is_conflict() || !error.is_retryable() {
        return Unseen::NotApplied;
    }
    if session.is_lost() {
        return Unseen::Unknown(format!("{error}; the session is gone"));
    }
    match jobs::after_lost_reply(session, &seen.job, by, step).await {
        Ok(jobs::LostReply::Applied(..)) => Unseen::Applied,
        Ok(_) => Unseen::NotApplied,
        Err(e) => Unseen::Unknown(format!("{error}; reading it back: {e}")),
    }
}

/// Operations deleting the job's lease if there is one (version-checked).
async fn delete_lease_ops(session: &Session, job: &str) -> Result<Vec<Op>> {
    Ok(lease::revoke_ops(session, job).await?)
}

/// Is `episode` held (`hold --episode`: `/control/hold/{episode}`)? The planner plans
/// nothing for a held episode, which changes what `delete` and `release` of one of its
/// jobs lead to. A hold that cannot be read counts as not held (the message is only a
/// hint).
async fn episode_held(session: &Session, episode: &str) -> bool {
    matches!(crate::control::is_held(session, episode).await, Ok(true))
}

/// The paths of `job`'s reports in `/reports` (named `<job>-<clip>`,
/// [`paths::report_job`]).
async fn reports_of(session: &Session, job: &str) -> Result<Vec<String>> {
    Ok(store::children(session, paths::REPORTS)
        .await?
        .into_iter()
        .filter(|name| paths::report_job(name) == Some(job))
        .map(|name| paths::report(&name))
        .collect())
}

/// A fresh lease for `retry`/`release`: its operations, and the words to add to the
/// report ("", or that the CLI's own TTL was used because no planner publishes one).
struct FreshLease {
    ops: Vec<Op>,
    note: String,
}

/// The work-item TTL in force and where it comes from: the longest one published by
/// the running planners (`work_item_ttl_ms` of their `/daemons/{name}` record: the TTL
/// is a per-daemon setting, and the CLI on an operator's workstation normally has no
/// planner configuration at all: outside 17g finding 2), else this CLI's
/// `planner.work_item_ttl_ms`, saying so.
async fn ttl_in_force(session: &Session, settings: &AdminSettings) -> Result<(i64, String)> {
    let (ttl, published) = lease::ttl_in_force(session, settings.work_item_ttl_ms()).await?;
    Ok((
        ttl,
        published.unwrap_or_else(|| {
            "this CLI's planner.work_item_ttl_ms: no running planner publishes its TTL".to_string()
        }),
    ))
}

/// Operations replacing any stale lease by a fresh, unclaimed one for the job (a fresh
/// lease starts a fresh wait: the planner and the reaper count the work-item TTL from
/// the later of the job's and its lease's creation, [`lease::waiting_since`]). The
/// lease must outlast the TTL in force ([`ttl_in_force`]).
async fn fresh_lease_ops(
    session: &Session,
    settings: &AdminSettings,
    job: &JobRecord,
) -> Result<FreshLease> {
    lease::validate_duration(settings.lease_duration_ms())
        .map_err(|e| AdminError::Invalid(format!("--lease-duration-s: {e}")))?;
    let (ttl_ms, source) = ttl_in_force(session, settings).await?;
    lease::validate_outlasts_ttl("--lease-duration-s", settings.lease_duration_ms(), ttl_ms)
        .map_err(|e| match e {
            archivist_engine::EngineError::Config(why) => {
                AdminError::Invalid(format!("{why} (the TTL is {source})"))
            }
            other => AdminError::from(other),
        })?;
    let note = if source.starts_with("this CLI") {
        format!("; checked against {source}")
    } else {
        String::new()
    };
    Ok(FreshLease {
        ops: lease::renew_ops(session, job, settings.lease_duration_ms()).await?,
        note,
    })
}

/// Writes `request` on a job a researcher holds, at the version seen.
async fn write_request(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
    request: JobRequest,
    reason: Option<&str>,
) -> Result<()> {
    let path = paths::job(&seen.job.id);
    let mut next = seen.job.clone();
    next.request = Some(request);
    next.request_reason = reason.map(str::to_string);
    next.updated = archivist_engine::clock::stamp_now();
    next.push_event(archivist_engine::schema::records::JobEvent {
        at: next.updated,
        by: settings.actor.clone(),
        step: "request".into(),
        result: format!("{request:?}").to_lowercase(),
    });
    let written = ops::commit(
        session,
        &[Op::SetData {
            data: store::encode(&path, &next)?,
            path: path.clone(),
            version: Some(seen.version),
        }],
    )
    .await;
    match written {
        Ok(_) => Ok(()),
        Err(e) => match after_error(session, seen, &e, &settings.actor, "request").await {
            Unseen::Applied => Ok(()),
            Unseen::Unknown(why) => Err(AdminError::Unconfirmed {
                job: seen.job.id.clone(),
                why,
            }),
            Unseen::NotApplied => Err(AdminError::from_commit(&path, e)),
        },
    }
}
