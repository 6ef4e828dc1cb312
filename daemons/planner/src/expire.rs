//! Expiring work items that waited in the pending queue past their TTL.
//!
//! The seed's rule is that a waiting item expires before its lease does. A job in
//! `pending` whose node is older than the work-item TTL (its `ctime`, ZooKeeper's clock,
//! against [`zk_now_ms`]) is moved to `expired` ("work-item TTL passed") and its lease
//! deleted, in one multi under the job's lock, exactly as `docs/protocol.md` has the
//! reaper do it. The planner does it too, before counting, so its capacity check never
//! counts dead items; the lock and the version checks make the two harmless together.

use archivist_engine::clock::zk_now_ms;
use archivist_engine::lock::JobLock;
use archivist_engine::ops::Op;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::JobRecord;
use archivist_engine::schema::JobState;
use archivist_engine::transition::{LockAction, Transition};
use archivist_engine::{queue, store, EngineError, Session};

/// The reason written on an expired waiting item.
pub const REASON: &str = "work-item TTL passed";

/// Expires every pending job older than `ttl_ms`; returns their ids. A job locked by
/// someone else (a researcher claiming it) is left alone.
pub async fn expire_waiting(
    session: &Session,
    ttl_ms: i64,
    by: &str,
) -> Result<Vec<String>, EngineError> {
    let (entries, _) = queue::list(session, JobState::Pending).await?;
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let now = zk_now_ms(session).await?;
    let stats: Vec<_> = entries
        .iter()
        .map(|e| session.client().check_stat(&paths::job(&e.job)))
        .collect();
    let stats = archivist_engine::ops::await_all(stats).await;
    let mut expired = Vec::new();
    for (entry, stat) in entries.iter().zip(stats) {
        let Ok(Some(stat)) = stat else { continue };
        if stat.ctime.saturating_add(ttl_ms) > now {
            continue;
        }
        if expire_one(session, &entry.job, ttl_ms, now, by).await? {
            expired.push(entry.job.clone());
        }
    }
    Ok(expired)
}

async fn expire_one(
    session: &Session,
    job_id: &str,
    ttl_ms: i64,
    now: i64,
    by: &str,
) -> Result<bool, EngineError> {
    let Some(lock) = JobLock::try_acquire(session, job_id, by).await? else {
        return Ok(false);
    };
    let outcome: Result<bool, EngineError> = async {
        let Some((job, stat)) = store::read::<JobRecord>(session, &paths::job(job_id)).await? else {
            return Ok(false);
        };
        if job.status != JobState::Pending || stat.ctime.saturating_add(ttl_ms) > now {
            return Ok(false);
        }
        let lease_path = paths::lease(job_id);
        let lease_op = store::exists(session, &lease_path).await?.map(|s| Op::Delete {
            path: lease_path.clone(),
            version: Some(s.version),
        });
        Transition::new(&job, stat.version, JobState::Expired)
            .failed()
            .lock(LockAction::Release(lock.clone()))
            .edit(|j| j.message = Some(REASON.to_string()))
            .event(by, "expire", REASON)
            .with_ops(lease_op)
            .commit(session)
            .await?;
        metrics::counter!("archivist_planner_work_items_expired_total").increment(1);
        tracing::info!(job = %job.id, episode = %job.episode, state = %JobState::Expired, "waiting work item expired; lease released");
        Ok(true)
    }
    .await;
    match outcome {
        Ok(true) => Ok(true),
        Ok(false) => {
            lock.release(session).await?;
            Ok(false)
        }
        Err(e) if e.is_conflict() => {
            lock.release(session).await?;
            Ok(false)
        }
        Err(e) => {
            let _ = lock.release(session).await;
            Err(e)
        }
    }
}
