//! Settings of curation and of the curator daemon, with documented defaults.

use std::time::Duration;

use serde::Deserialize;

/// How one curation writes to the database.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct CurateSettings {
    /// Curator name stored in new records. Defaults to `curator`.
    pub curator: String,
    /// Records per transaction. Defaults to 1,000.
    pub chunk_records: usize,
    /// ZooKeeper reads in flight at once (re-ordering pending jobs). Defaults to 512.
    pub max_in_flight: usize,
    /// Rounds of re-read-and-retry after conflicts with other writers. Defaults to 8.
    pub max_attempts: u32,
    /// Draw a progress bar on stderr (hidden when stderr is not a terminal). Defaults to
    /// false.
    pub progress: bool,
}

impl Default for CurateSettings {
    fn default() -> Self {
        CurateSettings {
            curator: "curator".to_string(),
            chunk_records: 1_000,
            max_in_flight: 512,
            max_attempts: 8,
            progress: false,
        }
    }
}

impl CurateSettings {
    /// Sets the curator name. Defaults to `curator`.
    pub fn with_curator(mut self, curator: impl Into<String>) -> Self {
        self.curator = curator.into();
        self
    }

    /// Sets the records per transaction. Defaults to 1,000.
    pub fn with_chunk_records(mut self, n: usize) -> Self {
        self.chunk_records = n.max(1);
        self
    }

    /// Sets the requests in flight at once. Defaults to 512.
    pub fn with_max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    /// Sets the conflict retry rounds. Defaults to 8.
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Shows a progress bar on stderr. Defaults to false.
    pub fn with_progress(mut self, progress: bool) -> Self {
        self.progress = progress;
        self
    }
}

/// How feeds and single URLs are fetched.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct FetchSettings {
    /// Whole-request timeout. Defaults to 30 s.
    #[serde(with = "archivist_engine::durations::secs")]
    pub timeout: Duration,
    /// Largest feed document accepted, bytes. Defaults to 32 MiB.
    pub max_feed_bytes: usize,
    /// User-Agent header. Defaults to `archivist-curator/<version>`.
    pub user_agent: String,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            timeout: Duration::from_secs(30),
            max_feed_bytes: 32 * 1024 * 1024,
            user_agent: format!("archivist-curator/{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

impl FetchSettings {
    /// Sets the request timeout. Defaults to 30 s.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the largest feed accepted. Defaults to 32 MiB.
    pub fn with_max_feed_bytes(mut self, n: usize) -> Self {
        self.max_feed_bytes = n;
        self
    }
}

/// The curator daemon: which feeds, how often.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct CuratorSettings {
    /// Feed URLs to poll. Defaults to none.
    pub feeds: Vec<String>,
    /// Time between polls of each feed. Defaults to 15 min.
    #[serde(with = "archivist_engine::durations::secs")]
    pub interval: Duration,
    /// Priority given to new episodes from the feeds (`None`: 0, and existing
    /// priorities are kept). Defaults to none.
    pub priority: Option<i64>,
    /// How records are written.
    pub curate: CurateSettings,
    /// How feeds are fetched.
    pub fetch: FetchSettings,
}

impl Default for CuratorSettings {
    fn default() -> Self {
        CuratorSettings {
            feeds: Vec::new(),
            interval: Duration::from_secs(15 * 60),
            priority: None,
            curate: CurateSettings::default(),
            fetch: FetchSettings::default(),
        }
    }
}

impl CuratorSettings {
    /// Sets the feeds. Defaults to none.
    pub fn with_feeds(mut self, feeds: Vec<String>) -> Self {
        self.feeds = feeds;
        self
    }

    /// Sets the poll interval. Defaults to 15 min.
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Sets the priority of the feeds' episodes. Defaults to none.
    pub fn with_priority(mut self, priority: Option<i64>) -> Self {
        self.priority = priority;
        self
    }

    /// Sets how records are written.
    pub fn with_curate(mut self, curate: CurateSettings) -> Self {
        self.curate = curate;
        self
    }

    /// Sets how feeds are fetched.
    pub fn with_fetch(mut self, fetch: FetchSettings) -> Self {
        self.fetch = fetch;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_from_yaml_with_defaults() {
        let s: CuratorSettings =
            serde_yaml::from_str("feeds: [http://a/feed]\ninterval: 60\ncurate: {curator: x}\n")
                .unwrap();
        assert_eq!(s.interval, Duration::from_secs(60));
        assert_eq!(s.curate.curator, "x");
        assert_eq!(s.curate.chunk_records, 1_000);
        assert_eq!(s.fetch.timeout, Duration::from_secs(30));
    }
}
