//! ZooKeeper's own clock.
//!
//! Lease expiry is judged by one clock for every daemon: ZooKeeper's. A lease expires at
//! its node's `mtime` (set by the server on every write) plus its duration; to compare,
//! a daemon writes `/clock` and reads the `mtime` the server stamped. Hosts' clocks may
//! drift; this does not.

use znode_schema::paths;

use crate::error::{EngineError, Result};
use crate::session::Session;

/// The current time on the ZooKeeper server, in unix milliseconds.
pub async fn zk_now_ms(session: &Session) -> Result<i64> {
    let stat = session
        .client()
        .set_data(paths::CLOCK, b"", None)
        .await
        .map_err(|e| EngineError::zk("set", paths::CLOCK, e))?;
    Ok(stat.mtime)
}

/// ZooKeeper's time as a read-only session can know it, without writing anything: the
/// `mtime` of `/clock`, which every daemon's [`zk_now_ms`] stamps (the planner each
/// round, the reaper each sweep), so it trails the server's time by at most the time
/// since a daemon last read the clock. It is a lower bound: a lease that is expired by it
/// is expired; callers that show it say it is an estimate. Read-only commands (`status`,
/// `jobs show`, `fsck` without `--repair`) use it, so the read-only role can run them.
pub async fn observed_ms(session: &Session) -> Result<i64> {
    let stat = crate::store::exists(session, paths::CLOCK)
        .await?
        .ok_or_else(|| EngineError::NotInitialised {
            chroot: session.chroot().to_string(),
            missing: paths::CLOCK.to_string(),
        })?;
    Ok(stat.mtime)
}

/// Converts unix milliseconds to a timestamp (UTC).
pub fn to_datetime(ms: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// A timestamp as unix milliseconds (saturating).
pub fn to_unix_ms(t: time::OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// This host's clock, for records where a host timestamp is good enough (events).
pub fn local_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}
