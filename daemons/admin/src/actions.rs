//! Compare-and-set actions on one job: retry, hold, release, cancel, delete.
//!
//! Every action starts from a [`Seen`] job (the record and the data version the
//! operator looked at). On an unlocked job the action takes the job's lock, re-reads the
//! job and refuses if its version moved, then commits one multi at the version seen that
//! also releases the lock. On a job a researcher holds, `hold` and `cancel` write a
//! `request` at the version seen instead; the holder acts on it within seconds.

use archivist_engine::lock::{self, JobLock};
use archivist_engine::ops::{self, Op};
use archivist_engine::schema::records::{JobRecord, JobRequest};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::transition::{machine, LockAction, Role, Transition};
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
    fn as_str(self) -> &'static str {
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

/// Who holds a job's lock, in words.
async fn lock_owner(session: &Session, id: &str) -> String {
    match lock::holder(session, id).await {
        Ok(Some((record, stat))) => format!(
            "{} (session {}, since {})",
            record.owner,
            format_args!("{:#x}", stat.ephemeral_owner),
            record.since
        ),
        Ok(None) => "nobody any more (try again)".to_string(),
        Err(e) => format!("an unreadable lock ({e})"),
    }
}

/// Takes the job's lock and checks the job is still at the version seen; on any
/// failure after locking the lock is released again.
async fn lock_seen(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
) -> Result<Option<JobLock>> {
    let Some(lock) = JobLock::try_acquire(session, &seen.job.id, &settings.actor).await? else {
        return Ok(None);
    };
    let check = jobs::read_optional(session, &seen.job.id).await;
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

/// Commits a transition built with the lock; releases the lock if nothing was written.
async fn commit_locked(
    session: &Session,
    seen: &Seen,
    lock: JobLock,
    transition: Transition,
) -> Result<()> {
    match transition
        .lock(LockAction::Release(lock.clone()))
        .commit(session)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            let _ = lock.release(session).await;
            Err(AdminError::from_commit(&paths::job(&seen.job.id), e))
        }
    }
}

/// Operations deleting the job's lease if there is one (version-checked).
async fn delete_lease_ops(session: &Session, job: &str) -> Result<Vec<Op>> {
    Ok(lease::revoke_ops(session, job).await?)
}

/// Operations replacing any stale lease by a fresh, unclaimed one for the job (a fresh
/// lease starts a fresh wait: the planner and the reaper count the work-item TTL from
/// the later of the job's and its lease's creation, [`lease::waiting_since`]).
async fn fresh_lease_ops(
    session: &Session,
    settings: &AdminSettings,
    job: &JobRecord,
) -> Result<Vec<Op>> {
    lease::validate_duration(settings.lease_duration_ms())
        .map_err(|e| AdminError::Invalid(format!("--lease-duration-s: {e}")))?;
    Ok(lease::renew_ops(session, job, settings.lease_duration_ms()).await?)
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
    next.updated = archivist_engine::clock::local_now();
    next.push_event(archivist_engine::schema::records::JobEvent {
        at: next.updated,
        by: settings.actor.clone(),
        step: "request".into(),
        result: format!("{request:?}").to_lowercase(),
    });
    ops::commit(
        session,
        &[Op::SetData {
            data: store::encode(&path, &next)?,
            path: path.clone(),
            version: Some(seen.version),
        }],
    )
    .await
    .map_err(|e| AdminError::from_commit(&path, e))?;
    Ok(())
}

/// `retry`: a failed job resumes where the state table says (after its
/// `last_successful_status`), `retry_count + 1`, message cleared, with a fresh lease in
/// the same multi.
pub async fn retry(session: &Session, settings: &AdminSettings, id: &str) -> Result<ActionReport> {
    retry_seen(session, settings, &look(session, id).await?).await
}

/// [`retry`] of a job as seen (written at the version seen).
pub async fn retry_seen(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
) -> Result<ActionReport> {
    if seen.job.status != JobState::Failed {
        return Err(refused(seen, "only failed jobs are retried"));
    }
    let Some(lock) = lock_seen(session, settings, seen).await? else {
        let owner = lock_owner(session, &seen.job.id).await;
        return Err(refused(seen, format!("it is locked by {owner}")));
    };
    let to = machine().resume_at(seen.job.last_successful_status);
    let lease = match fresh_lease_ops(session, settings, &seen.job).await {
        Ok(ops) => ops,
        Err(e) => {
            let _ = lock.release(session).await;
            return Err(e);
        }
    };
    let transition = Transition::new(Role::Admin, &seen.job, seen.version, to)
        .failed()
        .edit(|j| {
            j.retry_count += 1;
            j.message = None;
            j.holder = None;
            j.request = None;
            j.request_reason = None;
        })
        .event(&settings.actor, "retry", &format!("resumed at {to}"))
        .with_ops(lease);
    commit_locked(session, seen, lock, transition).await?;
    Ok(report(
        seen,
        Action::Retry,
        Some(to),
        Outcome::Done,
        format!(
            "resumed at {to} (retry {}), fresh lease of {} s",
            seen.job.retry_count + 1,
            settings.lease_duration_s
        ),
    ))
}

/// `hold` or `cancel` of one job.
async fn stop(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
    target: JobState,
    reason: Option<&str>,
) -> Result<ActionReport> {
    let (action, request) = match target {
        JobState::Held => (Action::Hold, JobRequest::Hold),
        _ => (Action::Cancel, JobRequest::Cancel),
    };
    let status = seen.job.status;
    if status == target {
        return Ok(report(
            seen,
            action,
            Some(status),
            Outcome::Unchanged,
            format!("already {status}"),
        ));
    }
    if !machine().allows(status, target) {
        let why = if machine().state(status).terminal {
            "it has finished".to_string()
        } else {
            format!("the state table has no {status} -> {target}")
        };
        return Err(refused(seen, format!("cannot {}: {why}", action.as_str())));
    }
    match lock_seen(session, settings, seen).await? {
        Some(lock) => {
            let lease = match delete_lease_ops(session, &seen.job.id).await {
                Ok(ops) => ops,
                Err(e) => {
                    let _ = lock.release(session).await;
                    return Err(e);
                }
            };
            let message = reason
                .map(str::to_string)
                .unwrap_or_else(|| format!("{} by {}", target, settings.actor));
            let transition = Transition::new(Role::Admin, &seen.job, seen.version, target)
                .failed()
                .edit(|j| {
                    j.message = Some(message.clone());
                    j.request = None;
                    j.request_reason = None;
                    j.holder = None;
                })
                .event(&settings.actor, action.as_str(), "ok")
                .with_ops(lease);
            commit_locked(session, seen, lock, transition).await?;
            Ok(report(
                seen,
                action,
                Some(target),
                Outcome::Done,
                format!(
                    "{status} -> {target}, lease revoked; {}",
                    after_stop(target, &seen.job.id)
                ),
            ))
        }
        None if matches!(
            status,
            JobState::Pending | JobState::Leased | JobState::Researching
        ) =>
        {
            if seen.job.request == Some(request) {
                return Ok(report(
                    seen,
                    action,
                    Some(status),
                    Outcome::Unchanged,
                    format!("{} already requested", action.as_str()),
                ));
            }
            write_request(session, settings, seen, request, reason).await?;
            let owner = lock_owner(session, &seen.job.id).await;
            Ok(report(
                seen,
                action,
                Some(status),
                Outcome::Requested,
                format!(
                    "locked by {owner}: request written, the holder moves it to {target} within seconds; {}",
                    after_stop(target, &seen.job.id)
                ),
            ))
        }
        None => {
            let owner = lock_owner(session, &seen.job.id).await;
            Err(refused(seen, format!("it is locked by {owner}")))
        }
    }
}

/// What happens to a stopped job's pairs, in words for the operator.
fn after_stop(target: JobState, job: &str) -> String {
    match target {
        JobState::Held => format!(
            "its pairs are not planned until `archivist release --job {job}` (or `delete {job}`)"
        ),
        _ => format!(
            "its pairs are not planned again until `archivist delete {job}`; to stop an episode or clip for good, `hold --episode` / `hold --clip`"
        ),
    }
}

/// `hold J`: pending (or stale leased/researching) jobs move to held and lose their
/// lease; a job a researcher holds gets `request: hold`.
pub async fn hold(
    session: &Session,
    settings: &AdminSettings,
    id: &str,
    reason: Option<&str>,
) -> Result<ActionReport> {
    hold_seen(session, settings, &look(session, id).await?, reason).await
}

/// [`hold`] of a job as seen.
pub async fn hold_seen(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
    reason: Option<&str>,
) -> Result<ActionReport> {
    stop(session, settings, seen, JobState::Held, reason).await
}

/// `cancel J`: pending, failed and held jobs move to cancelled and lose their lease; a
/// job a researcher holds gets `request: cancel`. A cancelled job keeps its pairs out of
/// planning until it is deleted (the reaper keeps cancelled jobs).
pub async fn cancel(
    session: &Session,
    settings: &AdminSettings,
    id: &str,
    reason: Option<&str>,
) -> Result<ActionReport> {
    cancel_seen(session, settings, &look(session, id).await?, reason).await
}

/// [`cancel`] of a job as seen.
pub async fn cancel_seen(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
    reason: Option<&str>,
) -> Result<ActionReport> {
    stop(session, settings, seen, JobState::Cancelled, reason).await
}

/// `release J`: a held job goes back to pending with a fresh lease. On a job that still
/// carries an unanswered `request: hold`, the request is withdrawn.
pub async fn release(
    session: &Session,
    settings: &AdminSettings,
    id: &str,
) -> Result<ActionReport> {
    release_seen(session, settings, &look(session, id).await?).await
}

/// [`release`] of a job as seen.
pub async fn release_seen(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
) -> Result<ActionReport> {
    let status = seen.job.status;
    if status != JobState::Held {
        if seen.job.request == Some(JobRequest::Hold) {
            let path = paths::job(&seen.job.id);
            let mut next = seen.job.clone();
            next.request = None;
            next.request_reason = None;
            next.updated = archivist_engine::clock::local_now();
            ops::commit(
                session,
                &[Op::SetData {
                    data: store::encode(&path, &next)?,
                    path: path.clone(),
                    version: Some(seen.version),
                }],
            )
            .await
            .map_err(|e| AdminError::from_commit(&path, e))?;
            return Ok(report(
                seen,
                Action::Release,
                Some(status),
                Outcome::Done,
                "hold request withdrawn".into(),
            ));
        }
        return Err(refused(seen, "only held jobs are released"));
    }
    let Some(lock) = lock_seen(session, settings, seen).await? else {
        let owner = lock_owner(session, &seen.job.id).await;
        return Err(refused(seen, format!("it is locked by {owner}")));
    };
    let lease = match fresh_lease_ops(session, settings, &seen.job).await {
        Ok(ops) => ops,
        Err(e) => {
            let _ = lock.release(session).await;
            return Err(e);
        }
    };
    let transition = Transition::new(Role::Admin, &seen.job, seen.version, JobState::Pending)
        .failed()
        .edit(|j| {
            j.message = None;
            j.request = None;
            j.request_reason = None;
            j.holder = None;
        })
        .event(&settings.actor, "release", "ok")
        .with_ops(lease);
    commit_locked(session, seen, lock, transition).await?;
    Ok(report(
        seen,
        Action::Release,
        Some(JobState::Pending),
        Outcome::Done,
        format!(
            "held -> pending, fresh lease of {} s",
            settings.lease_duration_s
        ),
    ))
}

/// `delete J`: a failed, held or cancelled job is removed with its queue entry and lease,
/// in one multi at the version seen. Research and reports stay; the job's unrecorded
/// pairs become plannable again.
pub async fn delete(session: &Session, settings: &AdminSettings, id: &str) -> Result<ActionReport> {
    delete_seen(session, settings, &look(session, id).await?).await
}

/// [`delete`] of a job as seen.
pub async fn delete_seen(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
) -> Result<ActionReport> {
    let status = seen.job.status;
    if !matches!(
        status,
        JobState::Failed | JobState::Held | JobState::Cancelled
    ) {
        return Err(refused(
            seen,
            "only failed, held or cancelled jobs are deleted (cancel or hold it first)",
        ));
    }
    let Some(lock) = lock_seen(session, settings, seen).await? else {
        let owner = lock_owner(session, &seen.job.id).await;
        return Err(refused(seen, format!("it is locked by {owner}")));
    };
    let outcome = async {
        let entry = paths::queue_entry(status, &seen.job.queue_entry().name());
        let mut batch = vec![lock.release_op()];
        if store::exists(session, &entry).await?.is_some() {
            batch.push(Op::Delete {
                path: entry,
                version: None,
            });
        }
        batch.extend(delete_lease_ops(session, &seen.job.id).await?);
        batch.push(Op::Delete {
            path: paths::job(&seen.job.id),
            version: Some(seen.version),
        });
        ops::commit(session, &batch)
            .await
            .map_err(|e| AdminError::from_commit(&paths::job(&seen.job.id), e))?;
        Ok::<_, AdminError>(())
    }
    .await;
    if let Err(e) = outcome {
        let _ = lock.release(session).await;
        return Err(e);
    }
    // What happens next depends on the catalog: a held episode is not planned at all.
    let episode_held = matches!(
        store::read::<archivist_engine::schema::records::EpisodeRecord>(
            session,
            &paths::episode(&seen.job.episode)
        )
        .await,
        Ok(Some((ref e, _))) if e.fields.held
    );
    let next = if episode_held {
        format!(
            "job, queue entry and lease deleted; episode {} is held, so its pairs are not planned until `release --episode {}`",
            seen.job.episode, seen.job.episode
        )
    } else {
        "job, queue entry and lease deleted; the planner plans its unrecorded pairs again within seconds (to stop that, `hold --episode` / `hold --clip`)".into()
    };
    Ok(report(seen, Action::Delete, None, Outcome::Done, next))
}

/// One job's result in a bulk action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BulkItem {
    /// Job id.
    pub job: String,
    /// The report, when the action ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<ActionReport>,
    /// Why not, when it was refused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Was it a refusal (the job moved or is in the wrong state)?
    pub refused: bool,
}

/// Does `message` match the operator's pattern? A pattern with `*` is a glob over the
/// whole message; otherwise it is a substring. Both ignore case.
pub fn message_matches(pattern: &str, message: &str) -> bool {
    let pattern = pattern.to_lowercase();
    let message = message.to_lowercase();
    if !pattern.contains('*') {
        return message.contains(&pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = message.as_str();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            continue;
        }
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// `retry --all-failed [--reason PATTERN]`: retries every failed job (whose message
/// matches the pattern), each with its own compare-and-set.
pub async fn retry_all_failed(
    session: &Session,
    settings: &AdminSettings,
    reason: Option<&str>,
) -> Result<Vec<BulkItem>> {
    let (entries, _) = archivist_engine::queue::list(session, JobState::Failed).await?;
    let mut out = Vec::new();
    for entry in entries {
        let seen = match look(session, &entry.job).await {
            Ok(seen) => seen,
            Err(e) => {
                out.push(BulkItem {
                    job: entry.job.clone(),
                    report: None,
                    refused: e.is_refusal() || matches!(e, AdminError::NotFound { .. }),
                    error: Some(e.to_string()),
                });
                continue;
            }
        };
        if let Some(pattern) = reason {
            if !message_matches(pattern, seen.job.message.as_deref().unwrap_or("")) {
                continue;
            }
        }
        match retry_seen(session, settings, &seen).await {
            Ok(r) => out.push(BulkItem {
                job: entry.job,
                report: Some(r),
                error: None,
                refused: false,
            }),
            Err(e) => out.push(BulkItem {
                job: entry.job,
                report: None,
                refused: e.is_refusal(),
                error: Some(e.to_string()),
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::message_matches;

    #[test]
    fn patterns_match_substrings_and_globs() {
        assert!(message_matches("404", "download failed: HTTP 404"));
        assert!(message_matches("DOWNLOAD*404", "download failed: HTTP 404"));
        assert!(!message_matches(
            "download*500",
            "download failed: HTTP 404"
        ));
        assert!(message_matches("*not audio", "file is not audio"));
        assert!(!message_matches("not audio*", "file is not audio!x"));
        assert!(message_matches("not audio*", "not audio at all"));
    }
}
