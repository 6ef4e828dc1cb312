//! `release`: a held job goes back to pending with a fresh lease (or an unanswered
//! hold request is withdrawn).

use archivist_engine::ops::{self, Op};
use archivist_engine::schema::records::JobRequest;
use archivist_engine::schema::{paths, JobState};
use archivist_engine::transition::{Role, Transition};
use archivist_engine::{store, Session};

use super::{
    commit_locked, episode_held, fresh_lease_ops, lock_owner, lock_seen, look, refused, report,
    Action, ActionReport, Outcome, Seen,
};
use crate::error::{AdminError, Result};
use crate::settings::AdminSettings;

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
            next.updated = archivist_engine::clock::stamp_now();
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
        Ok(lease) => lease,
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
        .with_ops(lease.ops);
    commit_locked(
        session,
        seen,
        lock,
        transition,
        (&settings.actor, "release"),
    )
    .await?;
    let mut detail = format!(
        "held -> pending, fresh lease of {} s{}",
        settings.lease_duration_s, lease.note
    );
    if episode_held(session, &seen.job.episode).await {
        detail.push_str(&format!(
            "; note: episode {e} is held, which only stops planning: this job is researched all the same (to keep it waiting, `hold --job {id}` again; `release --episode {e}` lets the planner plan the rest)",
            e = seen.job.episode,
            id = seen.job.id
        ));
    }
    Ok(report(
        seen,
        Action::Release,
        Some(JobState::Pending),
        Outcome::Done,
        detail,
    ))
}
