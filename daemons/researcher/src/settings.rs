//! Settings of the researcher and of its downloader.
//!
//! Both structs deserialize from partial YAML/JSON (missing fields take the documented
//! defaults) and have consuming `with_*` setters, so the binary maps its flags onto them
//! and tests shrink every timeout to milliseconds.

use std::path::PathBuf;
use std::time::Duration;

use archivist_matcher::MatchConfig;
use serde::{Deserialize, Serialize};

/// How media is fetched over HTTP(S) (and from `file://` when allowed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DownloadSettings {
    /// Time allowed to open a TCP/TLS connection. Defaults to 10 s.
    #[serde(
        with = "archivist_engine::durations::millis",
        rename = "connect_timeout_ms"
    )]
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of a response (headers or body). Defaults to 30 s.
    #[serde(
        with = "archivist_engine::durations::millis",
        rename = "read_timeout_ms"
    )]
    pub read_timeout: Duration,
    /// Largest body accepted, in bytes. Defaults to 2 GiB (a 2-hour WAV fits).
    pub max_bytes: u64,
    /// Tries per URL, the first included; only transient errors (timeouts, 5xx,
    /// connection resets, truncated bodies) are tried again. Defaults to 4.
    pub max_attempts: u32,
    /// Wait before the first retry; doubles per retry, with full jitter. Defaults to 500 ms.
    #[serde(
        with = "archivist_engine::durations::millis",
        rename = "initial_backoff_ms"
    )]
    pub initial_backoff: Duration,
    /// Longest wait between retries. Defaults to 30 s.
    #[serde(
        with = "archivist_engine::durations::millis",
        rename = "max_backoff_ms"
    )]
    pub max_backoff: Duration,
    /// The download budget's fixed part: time every download may take on top of the
    /// bytes received at [`DownloadSettings::min_bytes_per_s`]. Defaults to 60 s.
    #[serde(
        with = "archivist_engine::durations::millis",
        rename = "download_grace_ms"
    )]
    pub download_grace: Duration,
    /// The download budget's rate: a body must arrive at least this fast on average
    /// (bytes/s) once the grace is spent: after `t` seconds at least
    /// `(t - grace) * min_bytes_per_s` bytes must have arrived, whatever Content-Length
    /// announces (a server controls that: announcing 2 GB bought a drip ~34 h). The
    /// read timeout alone cannot stop a server that sends one byte every few seconds.
    /// Defaults to 16 KiB/s (a 128 kbit/s podcast arrives at least in real time).
    pub min_bytes_per_s: u64,
    /// Longest `Retry-After` (on 429 or 503) honoured; a server asking for more fails
    /// the download at once with a reason naming the wait. Defaults to 120 s.
    #[serde(
        with = "archivist_engine::durations::millis",
        rename = "max_retry_after_ms"
    )]
    pub max_retry_after: Duration,
    /// Accept `file://` URLs (local files). Defaults to false: a catalog entry must not
    /// make a daemon read arbitrary local files unless the operator allows it.
    pub allow_file_urls: bool,
    /// The `User-Agent` header, naming the project so a host's operator can tell who
    /// fetches and where to read why. Defaults to [`DEFAULT_USER_AGENT`]; an operator
    /// should add a contact (`archivist/0.1.0 (+https://example.org/bot; ops@example.org)`).
    pub user_agent: String,
    /// Requests to one host in flight at once (bodies included), across every job of
    /// this process. Defaults to 2.
    pub per_host_concurrency: u32,
    /// Requests a second to one host, across every job of this process (0: no limit).
    /// Defaults to 2.
    pub per_host_rate: f64,
    /// Requests to one host allowed at once after a quiet spell, before
    /// [`DownloadSettings::per_host_rate`] spaces them. Defaults to 4.
    pub per_host_burst: u32,
}

/// The default `User-Agent`: the project, its version, and where its docs say what it
/// fetches and why (RFC 9110 section 10.1.5: a product token and a comment).
pub const DEFAULT_USER_AGENT: &str = concat!(
    "archivist/",
    env!("CARGO_PKG_VERSION"),
    " (+docs/researcher.md#politeness; podcast clip research)"
);

impl Default for DownloadSettings {
    fn default() -> Self {
        DownloadSettings {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            max_bytes: 2 << 30,
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            download_grace: Duration::from_secs(60),
            min_bytes_per_s: 16 << 10,
            max_retry_after: Duration::from_secs(120),
            allow_file_urls: false,
            user_agent: DEFAULT_USER_AGENT.to_string(),
            per_host_concurrency: 2,
            per_host_rate: 2.0,
            per_host_burst: 4,
        }
    }
}

impl DownloadSettings {
    /// Sets the connect timeout. Defaults to 10 s.
    pub fn with_connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// Sets the read timeout. Defaults to 30 s.
    pub fn with_read_timeout(mut self, t: Duration) -> Self {
        self.read_timeout = t;
        self
    }

    /// Sets the largest accepted body. Defaults to 2 GiB.
    pub fn with_max_bytes(mut self, n: u64) -> Self {
        self.max_bytes = n;
        self
    }

    /// Sets the tries per URL (at least 1). Defaults to 4.
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets the first retry wait and the longest one. Defaults to 500 ms and 30 s.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max.max(initial);
        self
    }

    /// Sets the download budget: a grace period plus the bytes received at `min_bytes_per_s`
    /// (at least 1). Defaults to 60 s and 16 KiB/s.
    pub fn with_budget(mut self, grace: Duration, min_bytes_per_s: u64) -> Self {
        self.download_grace = grace;
        self.min_bytes_per_s = min_bytes_per_s.max(1);
        self
    }

    /// Sets the longest `Retry-After` honoured. Defaults to 120 s.
    pub fn with_max_retry_after(mut self, t: Duration) -> Self {
        self.max_retry_after = t;
        self
    }

    /// Allows `file://` URLs. Defaults to false.
    pub fn with_file_urls(mut self, allow: bool) -> Self {
        self.allow_file_urls = allow;
        self
    }

    /// Sets the per-host limits: requests in flight (at least 1), requests a second
    /// (0: none) and the burst (at least 1). Defaults to 2, 2/s and 4.
    pub fn with_per_host(mut self, concurrency: u32, rate: f64, burst: u32) -> Self {
        self.per_host_concurrency = concurrency.max(1);
        self.per_host_rate = rate;
        self.per_host_burst = burst.max(1);
        self
    }

    /// Sets the `User-Agent`. Defaults to [`DEFAULT_USER_AGENT`].
    pub fn with_user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = agent.into();
        self
    }
}

/// The media store: downloaded episodes kept by content hash, so later jobs of the
/// episode (and clips curated later) are researched without downloading it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MediaSettings {
    /// The store's directory. Defaults to none here, which is `<work_dir>/media`; the
    /// `archivist` binary fills in `<data dir>/media` (next to the SQLite database), so
    /// the store outlives a cleaned temporary directory.
    pub dir: Option<PathBuf>,
    /// Bytes the store may hold; the least recently used episodes are evicted past it.
    /// Defaults to 50 GiB (about 800 hours of 128 kbit/s MP3).
    pub max_bytes: u64,
    /// Before researching a stored rendition, ask the server whether the episode
    /// changed with a conditional GET (`If-None-Match`/`If-Modified-Since` from the pin):
    /// a `304` costs no body; other bytes are recorded as a new rendition and reported,
    /// and the job still researches the pinned ones. Only when the pin has a validator.
    /// Defaults to true.
    pub revalidate: bool,
    /// Where objects live: `local` (the directory [`MediaSettings::dir`], default) or
    /// `s3` (an S3-compatible bucket, [`MediaSettings::s3`]), which researchers on many
    /// machines share.
    pub backend: MediaBackend,
    /// The bucket, for `backend: s3`.
    pub s3: S3Settings,
    /// For tests only (never read from a file): how long a job waits after copying
    /// its audio out of the store before decoding it, so a test can change the stored
    /// object while a job holds its copy. Zero by default.
    #[doc(hidden)]
    #[serde(skip)]
    pub hold_after_read: Duration,
}

impl Default for MediaSettings {
    fn default() -> Self {
        MediaSettings {
            dir: None,
            max_bytes: 50 << 30,
            revalidate: true,
            backend: MediaBackend::Local,
            s3: S3Settings::default(),
            hold_after_read: Duration::ZERO,
        }
    }
}

impl MediaSettings {
    /// The store's directory for a researcher whose work directory is `work_dir`.
    pub fn dir_for(&self, work_dir: &std::path::Path) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| work_dir.join("media"))
    }
}

/// Which backend holds the media store's objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MediaBackend {
    /// A local directory (one machine, or a shared file system).
    #[default]
    Local,
    /// An S3-compatible bucket (researchers on many machines).
    S3,
}

/// An S3-compatible bucket for the media store. The credentials are never in this
/// file's settings: they come from `credentials_file`, else from the environment's
/// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, and are never logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct S3Settings {
    /// The endpoint URL (`http://minio.internal:9000`); none: AWS's for the region.
    pub endpoint: Option<String>,
    /// The bucket (it must exist). No default.
    pub bucket: String,
    /// The region. Defaults to `us-east-1` (what most S3-compatible servers accept).
    pub region: String,
    /// Objects are kept under this prefix. Defaults to `archivist/media`.
    pub prefix: String,
    /// A file of `AWS_ACCESS_KEY_ID=...` and `AWS_SECRET_ACCESS_KEY=...` lines (as an
    /// env file; `#` comments), readable by the researcher only. Defaults to none: the
    /// environment's variables of those names.
    pub credentials_file: Option<PathBuf>,
}

impl Default for S3Settings {
    fn default() -> Self {
        S3Settings {
            endpoint: None,
            bucket: String::new(),
            region: "us-east-1".into(),
            prefix: "archivist/media".into(),
            credentials_file: None,
        }
    }
}

/// Everything the researcher daemon can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResearcherSettings {
    /// Jobs researched at once; registered as the member's `slots`. Defaults to 1.
    pub concurrency: u32,
    /// Directory for downloads in progress and the clip cache. Defaults to
    /// `/var/tmp/archivist-researcher`.
    pub work_dir: PathBuf,
    /// How often the lease is extended and progress published while a job runs (capped
    /// at a third of the lease's duration). Defaults to 5 s.
    #[serde(with = "archivist_engine::durations::millis", rename = "heartbeat_ms")]
    pub heartbeat: Duration,
    /// How often the pending queue is polled when no watch fires. Defaults to 2 s.
    #[serde(with = "archivist_engine::durations::millis", rename = "poll_ms")]
    pub poll: Duration,
    /// How long a job that could not be claimed (its lease is gone) is passed over before
    /// it is looked at again. Defaults to 30 s.
    #[serde(
        with = "archivist_engine::durations::millis",
        rename = "refused_backoff_ms"
    )]
    pub refused_backoff: Duration,
    /// Memory for decoded clips kept between jobs (least recently used go first), in
    /// bytes. Defaults to 256 MiB.
    pub clip_cache_bytes: usize,
    /// Longest audio decoded (an episode or a clip), in hours; longer is refused as
    /// `too long` before it is decoded (or once it decodes past it, for a stream that
    /// declares no length). Decoded audio costs about 115 MB an hour in memory, so a
    /// machine that researches longer episodes raises it with the memory to match.
    /// Defaults to 12 (`archivist_matcher::decode::MAX_DURATION_S`).
    pub max_audio_hours: f64,
    /// Where this process serves metrics, written into its member record. Defaults to none.
    pub metrics_addr: Option<String>,
    /// Downloader settings.
    pub download: DownloadSettings,
    /// The media store.
    pub media: MediaSettings,
    /// Matcher settings. Defaults to the matcher's defaults.
    #[serde(rename = "match")]
    pub matching: MatchConfig,
}

impl Default for ResearcherSettings {
    fn default() -> Self {
        ResearcherSettings {
            concurrency: 1,
            work_dir: PathBuf::from("/var/tmp/archivist-researcher"),
            heartbeat: Duration::from_secs(5),
            poll: Duration::from_secs(2),
            refused_backoff: Duration::from_secs(30),
            clip_cache_bytes: 256 << 20,
            max_audio_hours: archivist_matcher::decode::MAX_DURATION_S / 3600.0,
            metrics_addr: None,
            download: DownloadSettings::default(),
            media: MediaSettings::default(),
            matching: MatchConfig::default(),
        }
    }
}

impl ResearcherSettings {
    /// Refuses settings that would make the daemon spin on ZooKeeper: a zero poll
    /// interval (a request loop with an empty queue) or a zero heartbeat (as the recorder
    /// and the planner refuse theirs).
    ///
    /// # Errors
    /// A sentence naming the setting.
    pub fn validate(&self) -> Result<(), String> {
        // 0 ran silently with 1 slot (outside try 17p F10), where the recorder refuses it.
        if self.concurrency == 0 {
            return Err(
                "researcher: concurrency (--concurrency, concurrency) must be at least 1".into(),
            );
        }
        if self.poll.is_zero() {
            return Err("researcher: poll interval (--poll-ms, poll_ms) must be positive".into());
        }
        if self.heartbeat.is_zero() {
            return Err(
                "researcher: heartbeat (--heartbeat-ms, heartbeat_ms) must be positive".into(),
            );
        }
        if !(self.max_audio_hours.is_finite() && self.max_audio_hours > 0.0) {
            return Err(format!(
                "researcher: max_audio_hours is {}: it must be a positive number of hours",
                self.max_audio_hours
            ));
        }
        Ok(())
    }

    /// The decode limits [`ResearcherSettings::max_audio_hours`] sets.
    pub fn decode_limits(&self) -> archivist_matcher::decode::DecodeLimits {
        archivist_matcher::decode::DecodeLimits {
            max_duration_s: self.max_audio_hours * 3600.0,
        }
    }

    /// Sets the number of jobs run at once (at least 1). Defaults to 1.
    pub fn with_concurrency(mut self, n: u32) -> Self {
        self.concurrency = n;
        self
    }

    /// Sets the work directory. Defaults to `/var/tmp/archivist-researcher`.
    pub fn with_work_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.work_dir = dir.into();
        self
    }

    /// Sets the heartbeat interval. Defaults to 5 s.
    pub fn with_heartbeat(mut self, t: Duration) -> Self {
        self.heartbeat = t;
        self
    }

    /// Sets the queue poll interval. Defaults to 2 s.
    pub fn with_poll(mut self, t: Duration) -> Self {
        self.poll = t;
        self
    }

    /// Sets how long an unclaimable job is passed over. Defaults to 30 s.
    pub fn with_refused_backoff(mut self, t: Duration) -> Self {
        self.refused_backoff = t;
        self
    }

    /// Sets the decoded-clip memory budget. Defaults to 256 MiB.
    pub fn with_clip_cache_bytes(mut self, n: usize) -> Self {
        self.clip_cache_bytes = n;
        self
    }

    /// Sets the metrics address written into the member record. Defaults to none.
    pub fn with_metrics_addr(mut self, addr: Option<String>) -> Self {
        self.metrics_addr = addr;
        self
    }

    /// Sets the downloader settings.
    pub fn with_download(mut self, d: DownloadSettings) -> Self {
        self.download = d;
        self
    }

    /// Sets the media store settings.
    pub fn with_media(mut self, m: MediaSettings) -> Self {
        self.media = m;
        self
    }

    /// Sets the matcher settings.
    pub fn with_matching(mut self, m: MatchConfig) -> Self {
        self.matching = m;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_poll_or_heartbeat_is_refused() {
        assert!(ResearcherSettings::default().validate().is_ok());
        let zero = ResearcherSettings::default().with_poll(Duration::ZERO);
        assert!(zero.validate().unwrap_err().contains("poll"));
        let zero = ResearcherSettings::default().with_heartbeat(Duration::ZERO);
        assert!(zero.validate().unwrap_err().contains("heartbeat"));
    }

    #[test]
    fn partial_yaml_takes_defaults() {
        let s: ResearcherSettings =
            serde_yaml::from_str("concurrency: 3\ndownload:\n  read_timeout_ms: 250\n").unwrap();
        assert_eq!(s.concurrency, 3);
        // Outside try 17p F10: 0 ran with 1 slot, silently.
        let zero: ResearcherSettings = serde_yaml::from_str("concurrency: 0\n").unwrap();
        assert!(zero.validate().unwrap_err().contains("at least 1"));
        assert_eq!(s.download.read_timeout, Duration::from_millis(250));
        assert_eq!(s.download.connect_timeout, Duration::from_secs(10));
        assert!(!s.download.allow_file_urls);
        assert_eq!(s.heartbeat, Duration::from_secs(5));
        assert_eq!(s.media, MediaSettings::default());
        let s: ResearcherSettings = serde_yaml::from_str("media:\n  max_bytes: 1000\n").unwrap();
        assert_eq!((s.media.max_bytes, s.media.revalidate), (1000, true));
        assert_eq!(s.media.backend, MediaBackend::Local);
        let s: ResearcherSettings = serde_yaml::from_str(
            "media:\n  backend: s3\n  s3:\n    endpoint: http://127.0.0.1:9000\n    bucket: b\n",
        )
        .unwrap();
        assert_eq!(s.media.backend, MediaBackend::S3);
        assert_eq!(
            (s.media.s3.bucket.as_str(), s.media.s3.region.as_str()),
            ("b", "us-east-1")
        );
        assert_eq!(
            s.media.dir_for(std::path::Path::new("/w")),
            PathBuf::from("/w/media")
        );
    }
}
