//! Expiring work items that waited in the pending queue past their TTL.
//!
//! The rule and the step are the engine's ([`archivist_engine::lease::expire_waiting`]),
//! shared with the reaper: a `pending` job whose wait (the later of its job's and its
//! lease's creation, ZooKeeper's clock) passed the work-item TTL is moved to `expired`
//! ("work-item TTL passed") and its lease revoked, in one multi under the job's lock.
//! The planner runs it before counting, so its capacity check never counts dead items.

use archivist_engine::clock::zk_now_ms;
use archivist_engine::transition::Role;
use archivist_engine::{lease, EngineError, Session};

/// The reason written on an expired waiting item.
pub const REASON: &str = lease::TTL_PASSED;

/// Expires every pending job that waited past `ttl_ms`; returns their ids. A job locked
/// by someone else (a researcher claiming it) is left alone.
pub async fn expire_waiting(
    session: &Session,
    ttl_ms: i64,
    by: &str,
) -> Result<Vec<String>, EngineError> {
    let now = zk_now_ms(session).await?;
    expire_waiting_at(session, ttl_ms, now, by).await
}

/// [`expire_waiting`] at a time already read from ZooKeeper's clock.
pub async fn expire_waiting_at(
    session: &Session,
    ttl_ms: i64,
    now_ms: i64,
    by: &str,
) -> Result<Vec<String>, EngineError> {
    let expired =
        lease::expire_waiting(session, ttl_ms, now_ms, Role::Planner, by, "expire").await?;
    metrics::counter!("archivist_planner_work_items_expired_total").increment(expired.len() as u64);
    Ok(expired)
}
