//! `hold` and `cancel`: a job stops (or, when a researcher holds it, is asked to stop)
//! and its pairs stay out of planning until it is released or deleted.

use archivist_engine::schema::records::JobRequest;
use archivist_engine::schema::JobState;
use archivist_engine::transition::{machine, Role, Transition};
use archivist_engine::Session;

use super::{
    commit_locked, delete_lease_ops, held_by_daemon, lock_owner, lock_seen, look, refused, report,
    write_request, Action, ActionReport, Outcome, Seen,
};
use crate::error::Result;
use crate::settings::AdminSettings;

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
    // A cancel already asked for is not downgraded to a hold that `release` undoes
    // (outside 17g finding 4: the later `hold` silently replaced it, while an idle
    // cancelled job refuses the same `hold`).
    if target == JobState::Held && seen.job.request == Some(JobRequest::Cancel) {
        return Err(refused(
            seen,
            "cannot hold: a cancel request is pending (its holder moves it to cancelled within seconds); a hold would replace it by one `release` undoes",
        ));
    }
    match lock_seen(session, settings, seen).await? {
        // Running, but nobody holds it (its researcher let go or died): the move is
        // the reaper's (the state table), which honours a written request when it
        // expires the job. Asked once, said plainly (outside 17g finding 1: this was
        // "made by researcher, reaper, not by the admin", exit 1).
        Some(lock) if !admin_may(status, target) => {
            let written = if seen.job.request == Some(request) {
                Ok(false)
            } else {
                write_request(session, settings, seen, request, reason)
                    .await
                    .map(|()| true)
            };
            let _ = lock.release(session).await;
            let written = written?;
            Ok(report(
                seen,
                action,
                Some(status),
                if written {
                    Outcome::Requested
                } else {
                    Outcome::Unchanged
                },
                format!(
                    "no researcher holds it (its lock is gone): {}, the reaper moves it to {target} within two of its sweeps (with `fsck --repair` first if `fsck` reports it); {}",
                    if written {
                        "request written"
                    } else {
                        "already requested"
                    },
                    after_stop(target, &seen.job.id)
                ),
            ))
        }
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
            commit_locked(
                session,
                seen,
                lock,
                transition,
                (&settings.actor, action.as_str()),
            )
            .await?;
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
            // Only a daemon reads requests: a lock another admin command or the console
            // kept past the wait moves nothing (outside 17m L2: "the holder moves it
            // within seconds" of a holder that never would).
            // A lock gone by now was let go meanwhile (outside 17n M2: a researcher
            // finishing as the request was written was called "no daemon").
            let who = match held_by_daemon(session, &seen.job.id).await {
                Some(true) => format!("the holder moves it to {target} within seconds"),
                Some(false) => format!(
                    "the holder is no daemon and reads no requests: the job moves to {target} when a daemon takes it next (a researcher's claim, or the reaper)"
                ),
                None => format!(
                    "its holder let go of it meanwhile: the request stays on the job, and the daemon that takes it next moves it to {target} (`archivist jobs show` says where it is)"
                ),
            };
            Ok(report(
                seen,
                action,
                Some(status),
                Outcome::Requested,
                format!(
                    "locked by {owner}: request written; {who}; {}",
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

/// Does the state table give `from -> to` to the admin? (`leased`/`researching` ->
/// `held`/`cancelled` are the holder's or the reaper's.)
fn admin_may(from: JobState, to: JobState) -> bool {
    machine()
        .transition(from, to)
        .is_some_and(|t| Role::Admin.listed_in(&t.by))
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
