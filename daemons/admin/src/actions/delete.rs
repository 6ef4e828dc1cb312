//! `delete`: a finished-with job (failed, held, cancelled) goes with its queue entry and
//! lease.

use archivist_engine::ops::{self, Op};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{store, Session};

use super::{
    delete_lease_ops, lock_owner, lock_seen, look, refused, report, Action, ActionReport, Outcome,
    Seen,
};
use crate::error::{AdminError, Result};
use crate::settings::AdminSettings;

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
