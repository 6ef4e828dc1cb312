//! `retry`: a failed job resumes where the state table says, with a fresh lease.

use archivist_engine::schema::records::{JobRecord, UNUSABLE_REPORT};
use archivist_engine::transition::{machine, Role, Transition};
use archivist_engine::Session;

use super::{
    commit_locked, fresh_lease_ops, lock_owner, lock_seen, look, refused, report, reports_of,
    Action, ActionReport, Outcome, Seen,
};
use crate::error::Result;
use crate::settings::AdminSettings;

/// `retry`: a failed job resumes where the state table says (after its
/// `last_successful_status`), `retry_count + 1`, message cleared, with a fresh lease in
/// the same multi.
pub async fn retry(session: &Session, settings: &AdminSettings, id: &str) -> Result<ActionReport> {
    retry_seen(session, settings, &look(session, id).await?).await
}

/// The report a job failed on as unusable (the recorder's failure message names it),
/// if it is still in `/reports`. A failure that names no report of the job, or one
/// already removed, gives `None`.
async fn unusable_report(session: &Session, job: &JobRecord) -> Result<Option<String>> {
    let Some(message) = job.message.as_deref() else {
        return Ok(None);
    };
    if !message.starts_with(UNUSABLE_REPORT) {
        return Ok(None);
    }
    Ok(reports_of(session, &job.id)
        .await?
        .into_iter()
        .find(|path| message.contains(path.as_str())))
}

/// [`retry`] of a job as seen (written at the version seen).
pub async fn retry_seen(
    session: &Session,
    settings: &AdminSettings,
    seen: &Seen,
) -> Result<ActionReport> {
    if !Action::Retry.applies(seen.job.status, seen.job.request) {
        return Err(refused(seen, "only failed jobs are retried"));
    }
    if let Some(report) = unusable_report(session, &seen.job).await? {
        return Err(refused(
            seen,
            format!(
                "it failed because {report} is unusable, and that report is still there: a retry would fail again on it at once. `archivist delete {id}` removes the job with its reports (the planner plans its unrecorded pairs again)",
                id = seen.job.id
            ),
        ));
    }
    let Some(lock) = lock_seen(session, settings, seen).await? else {
        let owner = lock_owner(session, &seen.job.id).await;
        return Err(refused(seen, format!("it is locked by {owner}")));
    };
    let to = machine().resume_at(seen.job.last_successful_status);
    let lease = match fresh_lease_ops(session, settings, &seen.job).await {
        Ok(lease) => lease,
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
        .with_ops(lease.ops);
    commit_locked(session, seen, lock, transition, (&settings.actor, "retry")).await?;
    Ok(report(
        seen,
        Action::Retry,
        Some(to),
        Outcome::Done,
        format!(
            "resumed at {to} (retry {}), fresh lease of {} s{}",
            seen.job.retry_count + 1,
            settings.lease_duration_s,
            lease.note
        ),
    ))
}
