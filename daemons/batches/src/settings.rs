//! Settings of the batcher daemon, with documented defaults.

use std::time::Duration;

use archivist_catalog::CurateSettings;

/// How the batcher polls, curates and calls webhooks. The `batcher:` section of the
/// configuration file (durations in milliseconds, keys ending in `_ms`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatcherSettings {
    /// Time between passes over the batches. Defaults to 5 s.
    #[serde(rename = "poll_ms", with = "archivist_engine::durations::millis")]
    pub poll_interval: Duration,
    /// HTTP attempts per report delivery. Defaults to 5.
    pub webhook_attempts: u32,
    /// Wait before the second attempt; doubled after each (capped at 60 s). Defaults to
    /// 1 s.
    #[serde(
        rename = "webhook_backoff_ms",
        with = "archivist_engine::durations::millis"
    )]
    pub webhook_backoff: Duration,
    /// Timeout of one HTTP attempt. Defaults to 10 s.
    #[serde(
        rename = "webhook_timeout_ms",
        with = "archivist_engine::durations::millis"
    )]
    pub webhook_timeout: Duration,
    /// Reads in flight at once when loading research records and jobs. Defaults to 512.
    pub read_chunk: usize,
    /// How what a submission names is curated (the curator name is the batcher's).
    pub curate: CurateSettings,
}

impl Default for BatcherSettings {
    fn default() -> Self {
        BatcherSettings {
            poll_interval: Duration::from_secs(5),
            webhook_attempts: 5,
            webhook_backoff: Duration::from_secs(1),
            webhook_timeout: Duration::from_secs(10),
            read_chunk: 512,
            curate: CurateSettings::default().with_curator("batcher"),
        }
    }
}

impl BatcherSettings {
    /// Sets the time between passes. Defaults to 5 s.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Sets the webhook attempts (at least 1) and the first backoff. Defaults to 5 and
    /// 1 s.
    pub fn with_webhook_retries(mut self, attempts: u32, backoff: Duration) -> Self {
        self.webhook_attempts = attempts.max(1);
        self.webhook_backoff = backoff;
        self
    }

    /// Sets the timeout of one webhook attempt. Defaults to 10 s.
    pub fn with_webhook_timeout(mut self, timeout: Duration) -> Self {
        self.webhook_timeout = timeout;
        self
    }
}
