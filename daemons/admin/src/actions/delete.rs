//! `delete`: a finished-with job (failed, held, cancelled) goes with its queue entry,
//! lease and reports.

use archivist_engine::lock::JobLock;
use archivist_engine::ops::{self, Op};
use archivist_engine::schema::records::{self, JobRecord};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{jobs, queue, store, Session};
use serde::Serialize;

use super::{
    delete_lease_ops, episode_held, lock_owner, lock_seen, look, refused, report, reports_of,
    Action, ActionReport, Outcome, Seen,
};
use crate::error::{AdminError, Result};
use crate::settings::AdminSettings;

/// `delete J`: a failed, held or cancelled job is removed with its queue entry, lease and
/// reports, in one multi at the version seen. Research stays; the job's unrecorded pairs
/// become plannable again. Its reports go with it: only their job can have them recorded,
/// so left behind they would wait for a recorder forever (a report the recorder found
/// unusable was never removed otherwise).
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
    if !Action::Delete.applies(status, seen.job.request) {
        return Err(refused(seen, not_deletable(status)));
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
        batch.extend(
            reports_of(session, &seen.job.id)
                .await?
                .into_iter()
                .map(|path| Op::Delete {
                    path,
                    version: None,
                }),
        );
        batch.push(Op::Delete {
            path: paths::job(&seen.job.id),
            version: Some(seen.version),
        });
        match ops::commit(session, &batch).await {
            Ok(_) => {}
            // The reply was lost: the job read again says whether the delete applied
            // (outside 17m L1: it exited 1 "write failed", and the retry then said
            // "does not exist").
            Err(e) if e.is_retryable() && !session.is_lost() => {
                if !matches!(jobs::reread(session, &seen.job.id).await, Ok(None)) {
                    return Err(AdminError::from_commit(&paths::job(&seen.job.id), e));
                }
            }
            Err(e) => return Err(AdminError::from_commit(&paths::job(&seen.job.id), e)),
        }
        Ok::<_, AdminError>(())
    }
    .await;
    if let Err(e) = outcome {
        let _ = lock.release(session).await;
        return Err(e);
    }
    // What happens next depends on the catalog: a held episode is not planned at all.
    let next = if episode_held(session, &seen.job.episode).await {
        format!(
            "job, queue entry, lease and reports deleted; episode {} is held, so its pairs are not planned until `release --episode {}`",
            seen.job.episode, seen.job.episode
        )
    } else {
        "job, queue entry, lease and reports deleted; the planner plans its unrecorded pairs again within seconds (to stop that, `hold --episode` / `hold --clip`)".into()
    };
    Ok(report(seen, Action::Delete, None, Outcome::Done, next))
}

/// What `delete --force` of a job whose record does not decode removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnreadableDelete {
    /// Job id.
    pub job: String,
    /// Why its record does not decode.
    pub error: String,
    /// Every node deleted (the job, its queue entries, its lease, its reports), in one
    /// multi.
    pub deleted: Vec<String>,
    /// In words.
    pub detail: String,
}

/// `delete J --force`: removes a job node whose YAML does not decode (nothing else can
/// act on it: no state is known, so no state rule applies), with every queue entry
/// naming the job, its lease and its reports, in one multi at the version read, under the job's
/// lock. A job that decodes is refused: it goes through [`delete`] and its state rules.
pub async fn delete_unreadable(
    session: &Session,
    settings: &AdminSettings,
    id: &str,
) -> Result<UnreadableDelete> {
    let path = paths::job(id);
    let Some((data, stat)) = store::read_raw(session, &path).await? else {
        return Err(AdminError::NotFound {
            what: "job",
            id: id.to_string(),
            path,
        });
    };
    let error = match records::decode::<JobRecord>(&path, &data) {
        Ok(job) => {
            // A refusal (exit 3, nothing written), as operations.md calls it.
            return Err(AdminError::Refused {
                job: id.to_string(),
                reason: format!(
                    "its record decodes: --force only deletes a job whose record does not; use `delete {id}`"
                ),
                state: job.status,
            });
        }
        Err(e) => e.to_string(),
    };
    let Some(lock) = JobLock::try_acquire(session, id, &settings.actor).await? else {
        return Err(AdminError::Locked {
            job: id.to_string(),
            holder: lock_owner(session, id).await,
        });
    };
    let outcome = async {
        let mut deleted = Vec::new();
        let mut batch = vec![lock.release_op()];
        for state in JobState::ALL {
            let (entries, _) = queue::list(session, state).await?;
            for entry in entries.into_iter().filter(|e| e.job == id) {
                let entry = paths::queue_entry(state, &entry.name());
                deleted.push(entry.clone());
                batch.push(Op::Delete {
                    path: entry,
                    version: None,
                });
            }
        }
        let lease = delete_lease_ops(session, id).await?;
        if !lease.is_empty() {
            deleted.push(paths::lease(id));
        }
        batch.extend(lease);
        for report in reports_of(session, id).await? {
            deleted.push(report.clone());
            batch.push(Op::Delete {
                path: report,
                version: None,
            });
        }
        batch.push(Op::Delete {
            path: path.clone(),
            version: Some(stat.version),
        });
        deleted.insert(0, path.clone());
        ops::commit(session, &batch)
            .await
            .map_err(|e| AdminError::from_commit(&path, e))?;
        Ok::<_, AdminError>(deleted)
    }
    .await;
    let deleted = match outcome {
        Ok(deleted) => deleted,
        Err(e) => {
            let _ = lock.release(session).await;
            return Err(e);
        }
    };
    metrics::counter!("archivist_admin_actions_total", "action" => "delete", "outcome" => "done")
        .increment(1);
    tracing::warn!(job = %id, episode = "unknown", state = "unknown", %error, actor = %settings.actor, "undecodable job deleted (--force)");
    Ok(UnreadableDelete {
        job: id.to_string(),
        error,
        deleted,
        detail: "the undecodable job, its queue entries, lease and reports deleted; the planner plans its episode's unrecorded pairs again".into(),
    })
}

/// Why a job in `status` is not deleted, and what the operator can do instead: `cancel`
/// and `hold` take only jobs that are waiting or being researched, so "cancel or hold it
/// first" would send the operator of a `reported` job round in a circle.
fn not_deletable(status: JobState) -> String {
    let way = match status {
        JobState::Reported => "its research is done and waits for the recorder, which stores it and finishes the job (is a recorder running? `archivist status` lists the daemons); if the recorder fails it, the job is `failed` and can be deleted then",
        JobState::Recorded | JobState::Expired => "it is finished and stays as history: nothing is left to stop",
        _ => "cancel or hold it first",
    };
    format!("only failed, held or cancelled jobs are deleted: {way}")
}
