//! ZooKeeper's own clock.
//!
//! Lease expiry is judged by one clock for every daemon: ZooKeeper's. A lease expires at
//! its node's `mtime` (set by the server on every write) plus its duration; to compare,
//! a daemon writes `/clock` and reads the `mtime` the server stamped. Hosts' clocks may
//! drift; this does not.

use std::sync::atomic::{AtomicI64, Ordering};

use znode_schema::paths;

use crate::error::{EngineError, Result};
use crate::session::Session;

/// The current time on the ZooKeeper server, in unix milliseconds.
pub async fn zk_now_ms(session: &Session) -> Result<i64> {
    let before = host_ms();
    let stat = session
        .client()
        .set_data(paths::CLOCK, b"", None)
        .await
        .map_err(|e| EngineError::zk("set", paths::CLOCK, e))?;
    observe_server_time(stat.mtime, before, host_ms());
    Ok(stat.mtime)
}

/// How far ZooKeeper's clock is ahead of this host's, in milliseconds, as last measured
/// ([`observe_server_time`]); 0 until then.
static SERVER_AHEAD_MS: AtomicI64 = AtomicI64::new(0);

/// Records that a write sent at host time `sent_ms` and answered at `answered_ms` was
/// stamped `server_ms` by ZooKeeper: the server's clock is taken to be `server_ms` at the
/// middle of the round trip. Every daemon writes `/clock` or registers (whose node's
/// `ctime` is such a stamp), so [`stamp_now`] follows one clock across hosts.
pub fn observe_server_time(server_ms: i64, sent_ms: i64, answered_ms: i64) {
    let middle = sent_ms + (answered_ms - sent_ms) / 2;
    SERVER_AHEAD_MS.store(server_ms - middle, Ordering::Relaxed);
}

/// This host's clock in unix milliseconds (uncorrected).
pub fn host_ms() -> i64 {
    to_unix_ms(time::OffsetDateTime::now_utc())
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

/// The time to stamp on records (a job's `updated`, events, registrations): this host's
/// clock corrected by its distance to ZooKeeper's as last measured, so the stamps of
/// daemons on hosts whose clocks disagree still come in the order things happened (with
/// a recorder two days behind and a researcher a year ahead, a job's events were listed
/// out of order and `updated` came before `created`: outside 17i G9). Within a round
/// trip of ZooKeeper's time; the host's own clock until a first measurement.
pub fn stamp_now() -> time::OffsetDateTime {
    let ahead = SERVER_AHEAD_MS.load(Ordering::Relaxed);
    time::OffsetDateTime::now_utc() + time::Duration::milliseconds(ahead)
}
