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

/// Converts unix milliseconds to a timestamp (UTC).
pub fn to_datetime(ms: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// This host's clock, for records where a host timestamp is good enough (events).
pub fn local_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}
