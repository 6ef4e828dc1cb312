//! Settings of admin operations.

use std::time::Duration;

use serde::Deserialize;

/// How admin operations behave. Every field has a documented default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct AdminSettings {
    /// Identity written into locks, events and pause records. Defaults to `admin`.
    pub actor: String,
    /// Duration of the fresh lease `retry` and `release` create, in seconds. Defaults to
    /// 600 s (the planner's lease).
    pub lease_duration_s: u64,
    /// The planners' and reapers' work-item TTL, in seconds: a `retry`/`release` lease
    /// must outlast it ([`archivist_engine::lease::validate_outlasts_ttl`]). Defaults to
    /// 300 s (theirs); the binary takes it from the configuration file.
    pub work_item_ttl_s: u64,
    /// How far past its expiry a lease may be before `fsck` calls it a fault (the
    /// reaper's interval), in seconds. Defaults to 5 s.
    pub reaper_interval_s: u64,
    /// Nodes read per pipelined batch during scans, and research records per database
    /// page in `results --clip` and `export`. Defaults to 500.
    pub batch_size: usize,
}

impl Default for AdminSettings {
    fn default() -> Self {
        AdminSettings {
            actor: "admin".to_string(),
            lease_duration_s: 600,
            work_item_ttl_s: 300,
            reaper_interval_s: 5,
            batch_size: 500,
        }
    }
}

impl AdminSettings {
    /// Sets the identity. Defaults to `admin`.
    pub fn with_actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = actor.into();
        self
    }

    /// Sets the lease duration for `retry`/`release`. Defaults to 600 s.
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration_s = duration.as_secs();
        self
    }

    /// Sets the work-item TTL a fresh lease must outlast. Defaults to 300 s.
    pub fn with_work_item_ttl(mut self, ttl: Duration) -> Self {
        self.work_item_ttl_s = ttl.as_secs();
        self
    }

    /// The work-item TTL in milliseconds.
    pub fn work_item_ttl_ms(&self) -> i64 {
        i64::try_from(self.work_item_ttl_s.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// Sets the reaper interval `fsck` tolerates. Defaults to 5 s.
    pub fn with_reaper_interval(mut self, interval: Duration) -> Self {
        self.reaper_interval_s = interval.as_secs();
        self
    }

    /// Sets the scan batch size. Defaults to 500.
    pub fn with_batch_size(mut self, size: usize) -> Self {
        self.batch_size = size.max(1);
        self
    }

    /// The lease duration in milliseconds.
    pub fn lease_duration_ms(&self) -> i64 {
        i64::try_from(self.lease_duration_s.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// The reaper interval in milliseconds.
    pub fn reaper_interval_ms(&self) -> i64 {
        i64::try_from(self.reaper_interval_s.saturating_mul(1000)).unwrap_or(i64::MAX)
    }
}

/// Reports progress of long scans (the CLI draws a progress bar; tests pass
/// [`Silent`]). Libraries draw nothing themselves.
pub trait Progress: Send + Sync {
    /// A scan of `total` nodes named `what` starts.
    fn begin(&self, what: &str, total: u64) {
        let _ = (what, total);
    }
    /// `n` more nodes were read.
    fn advance(&self, n: u64) {
        let _ = n;
    }
    /// The scan ended.
    fn end(&self) {}
}

/// A [`Progress`] that shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}
