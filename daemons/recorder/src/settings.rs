//! The recorder's and the reaper's settings, with their documented defaults.

use std::time::Duration;

use serde::Deserialize;

use crate::error::SettingsError;

/// How the recorder stores reports. Read from a config file (YAML, durations in
/// milliseconds) or built with the `with_*` setters; every field has a default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecorderSettings {
    /// How often `/reports` and `/queues/reported` are listed when no watch fires (a
    /// missed watch only delays work by this much). Defaults to 2 s.
    #[serde(rename = "poll_ms", with = "archivist_engine::durations::millis")]
    pub poll_interval: Duration,
    /// Most reports of one job stored in one multi (they share the episode's research
    /// record, so a batch is one record write). Defaults to 50.
    pub batch_size: usize,
    /// Attempts to store one batch when other recorders keep moving the research record
    /// or the lease; after that the batch is left for the next pass. Defaults to 25.
    pub max_attempts: u32,
    /// Base of the random pause between attempts (attempt n waits up to n times this).
    /// Defaults to 10 ms.
    #[serde(
        rename = "retry_backoff_ms",
        with = "archivist_engine::durations::millis"
    )]
    pub retry_backoff: Duration,
    /// Jobs in `reported` closed at once. Defaults to 2.
    pub concurrency: usize,
}

impl Default for RecorderSettings {
    fn default() -> Self {
        RecorderSettings {
            poll_interval: Duration::from_secs(2),
            batch_size: 50,
            max_attempts: 25,
            retry_backoff: Duration::from_millis(10),
            concurrency: 2,
        }
    }
}

impl RecorderSettings {
    /// Sets the poll interval. Defaults to 2 s.
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Self {
        self.poll_interval = poll_interval;
        self
    }

    /// Sets the most reports per multi. Defaults to 50.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets the attempts per batch. Defaults to 25.
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets the retry backoff base. Defaults to 10 ms.
    pub fn with_retry_backoff(mut self, retry_backoff: Duration) -> Self {
        self.retry_backoff = retry_backoff;
        self
    }

    /// Sets how many `reported` jobs are closed at once. Defaults to 2.
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Parses settings from YAML (a config file); absent fields keep their defaults.
    pub fn from_yaml(source: &str, text: &str) -> Result<RecorderSettings, SettingsError> {
        let settings: RecorderSettings = serde_yaml::from_str(text).map_err(|e| SettingsError {
            source_name: source.to_string(),
            reason: e.to_string(),
        })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Refuses settings that cannot work (zero batch, attempts, concurrency or poll).
    pub fn validate(&self) -> Result<(), SettingsError> {
        let refuse = |reason: &str| {
            Err(SettingsError {
                source_name: "recorder settings".into(),
                reason: reason.to_string(),
            })
        };
        if self.batch_size == 0 {
            return refuse("batch size must be at least 1");
        }
        if self.max_attempts == 0 {
            return refuse("max attempts must be at least 1");
        }
        if self.concurrency == 0 {
            return refuse("concurrency must be at least 1");
        }
        if self.poll_interval.is_zero() {
            return refuse("poll interval must be positive");
        }
        Ok(())
    }
}

/// How the reaper cleans up. Read from a config file (YAML, durations in milliseconds) or
/// built with the `with_*` setters; every field has a default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReaperSettings {
    /// Time between sweeps while leading. Defaults to 5 s.
    #[serde(rename = "interval_ms", with = "archivist_engine::durations::millis")]
    pub interval: Duration,
    /// How long a work item may wait in `pending` (from the later of its job's and its
    /// lease's creation, ZooKeeper's clock) before it is expired. Must match the
    /// planner's, which keeps it below the lease duration. Defaults to 5 minutes.
    #[serde(
        rename = "work_item_ttl_ms",
        with = "archivist_engine::durations::millis"
    )]
    pub work_item_ttl: Duration,
    /// How long a `recorded`, `expired` or `cancelled` job is kept after its last change
    /// before its job node and queue entry are deleted (research stays). Defaults to 24 h.
    #[serde(rename = "retention_ms", with = "archivist_engine::durations::millis")]
    pub retention: Duration,
}

impl Default for ReaperSettings {
    fn default() -> Self {
        ReaperSettings {
            interval: Duration::from_secs(5),
            work_item_ttl: Duration::from_secs(300),
            retention: Duration::from_secs(24 * 3600),
        }
    }
}

impl ReaperSettings {
    /// Sets the sweep interval. Defaults to 5 s.
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Sets the work-item TTL. Defaults to 5 minutes.
    pub fn with_work_item_ttl(mut self, work_item_ttl: Duration) -> Self {
        self.work_item_ttl = work_item_ttl;
        self
    }

    /// Sets the retention of finished jobs. Defaults to 24 h.
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// Parses settings from YAML (a config file); absent fields keep their defaults.
    pub fn from_yaml(source: &str, text: &str) -> Result<ReaperSettings, SettingsError> {
        let settings: ReaperSettings = serde_yaml::from_str(text).map_err(|e| SettingsError {
            source_name: source.to_string(),
            reason: e.to_string(),
        })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Refuses a zero sweep interval, and a work-item TTL under a second (0 expired
    /// every job as it was created, 1.4 a second for ever: outside try 17p F4).
    pub fn validate(&self) -> Result<(), SettingsError> {
        let refuse = |reason: &str| SettingsError {
            source_name: "reaper settings".into(),
            reason: reason.into(),
        };
        if self.interval.is_zero() {
            return Err(refuse("interval must be positive"));
        }
        if self.work_item_ttl < Duration::from_secs(1) {
            return Err(refuse(
                "work_item_ttl_ms must be at least 1000 (a work item must be able to wait for a researcher)",
            ));
        }
        Ok(())
    }

    /// The work-item TTL in milliseconds.
    pub fn work_item_ttl_ms(&self) -> i64 {
        i64::try_from(self.work_item_ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// The retention in milliseconds.
    pub fn retention_ms(&self) -> i64 {
        i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones_and_valid() {
        let r = RecorderSettings::default();
        assert_eq!(r.poll_interval, Duration::from_secs(2));
        assert_eq!(r.batch_size, 50);
        assert!(r.validate().is_ok());
        let p = ReaperSettings::default();
        assert_eq!(p.interval, Duration::from_secs(5));
        assert_eq!(p.work_item_ttl, Duration::from_secs(300));
        assert_eq!(p.retention, Duration::from_secs(86_400));
        assert!(p.validate().is_ok());
        // Outside try 17p F4: a TTL of 0 expired every job as it was created.
        for ms in [0, 500] {
            let err = p
                .clone()
                .with_work_item_ttl(Duration::from_millis(ms))
                .validate()
                .unwrap_err();
            assert!(err.to_string().contains("at least 1000"), "{err}");
        }
    }

    #[test]
    fn yaml_overrides_only_what_it_names_and_names_the_source() {
        let r = RecorderSettings::from_yaml("r.yml", "poll_ms: 250\nbatch_size: 5\n").unwrap();
        assert_eq!(r.poll_interval, Duration::from_millis(250));
        assert_eq!(r.batch_size, 5);
        assert_eq!(r.max_attempts, 25);
        let err = RecorderSettings::from_yaml("bad.yml", "batch_size: 0\n").unwrap_err();
        assert!(err.to_string().contains("batch size"), "{err}");
        let err = ReaperSettings::from_yaml("reaper.yml", "interval: 5\n").unwrap_err();
        assert!(err.to_string().contains("reaper.yml"), "{err}");
        let p = ReaperSettings::from_yaml("p.yml", "retention_ms: 1000\n").unwrap();
        assert_eq!(p.retention_ms(), 1000);
        assert_eq!(p.work_item_ttl_ms(), 300_000);
    }
}
