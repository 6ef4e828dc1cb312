//! `archivist researcher`: clap arguments (each with an `ARCHIVIST_RESEARCHER_...`
//! environment variable) mapped onto `archivist_researcher::ResearcherSettings`.
//!
//! Settings come from the defaults, then the configuration file's `researcher:` section,
//! then the flags given.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use archivist_engine::member::Identity;
use archivist_matcher::MatchMode;
use archivist_researcher::ResearcherSettings;
use clap::{Args, ValueEnum};

use crate::cli::GlobalOpts;

/// Matching strategy (see docs/matcher.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Full-resolution NCC plus the speed/partial detector (most accurate).
    Full,
    /// Feature-domain first pass, about 10x cheaper per clip.
    Fast,
    /// One full FFT NCC per clip, unchanged speed only (the reference baseline).
    Exhaustive,
}

impl From<ModeArg> for MatchMode {
    fn from(m: ModeArg) -> MatchMode {
        match m {
            ModeArg::Full => MatchMode::Full,
            ModeArg::Fast => MatchMode::Fast,
            ModeArg::Exhaustive => MatchMode::Exhaustive,
        }
    }
}

/// Arguments of `archivist researcher`.
#[derive(Debug, Args)]
pub struct ResearcherArgs {
    /// Identity in locks, leases, reports and `/researchers` (default
    /// `researcher-<host>-<pid>`).
    #[arg(long, env = "ARCHIVIST_RESEARCHER_NAME")]
    pub name: Option<String>,
    /// Jobs researched at once (registered as `slots`) [default: 1].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_CONCURRENCY")]
    pub concurrency: Option<u32>,
    /// Directory for downloads and the clip cache [default: /var/tmp/archivist-researcher].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// Lease extension and progress interval, in ms [default: 5000].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_HEARTBEAT_MS")]
    pub heartbeat_ms: Option<u64>,
    /// Pending-queue poll interval when no watch fires, in ms [default: 2000].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_POLL_MS")]
    pub poll_ms: Option<u64>,
    /// HTTP connect timeout, in ms [default: 10000].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_CONNECT_TIMEOUT_MS")]
    pub connect_timeout_ms: Option<u64>,
    /// HTTP read timeout (longest wait for the next bytes), in ms [default: 30000].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_READ_TIMEOUT_MS")]
    pub read_timeout_ms: Option<u64>,
    /// Largest media file accepted, in bytes [default: 2147483648].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_MAX_DOWNLOAD_BYTES")]
    pub max_download_bytes: Option<u64>,
    /// Tries per download; only transient errors are retried [default: 4].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_DOWNLOAD_ATTEMPTS")]
    pub download_attempts: Option<u32>,
    /// Let catalog entries point at local files (`file://` URLs).
    #[arg(long, env = "ARCHIVIST_ALLOW_FILE_URLS")]
    pub allow_file_urls: bool,
    /// Memory for decoded clips kept between jobs, in MiB [default: 256].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_CLIP_CACHE_MB")]
    pub clip_cache_mb: Option<usize>,
    /// The media store's directory (downloaded episodes, by content hash) [default:
    /// <data dir>/media].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_MEDIA_DIR")]
    pub media_dir: Option<PathBuf>,
    /// Most the media store holds, in MiB; least recently used episodes are evicted
    /// [default: 51200].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_MEDIA_MAX_MB")]
    pub media_max_mb: Option<u64>,
    /// Matching strategy [default: full].
    #[arg(long, env = "ARCHIVIST_RESEARCHER_MATCH_MODE", value_enum)]
    pub match_mode: Option<ModeArg>,
}

/// The settings the file and the flags describe.
pub fn settings(base: ResearcherSettings, args: &ResearcherArgs) -> ResearcherSettings {
    let mut s = base;
    let ms = Duration::from_millis;
    if let Some(n) = args.concurrency {
        s = s.with_concurrency(n);
    }
    if let Some(dir) = &args.work_dir {
        s = s.with_work_dir(dir);
    }
    if let Some(v) = args.heartbeat_ms {
        s = s.with_heartbeat(ms(v));
    }
    if let Some(v) = args.poll_ms {
        s = s.with_poll(ms(v));
    }
    let mut d = s.download.clone();
    if let Some(v) = args.connect_timeout_ms {
        d = d.with_connect_timeout(ms(v));
    }
    if let Some(v) = args.read_timeout_ms {
        d = d.with_read_timeout(ms(v));
    }
    if let Some(v) = args.max_download_bytes {
        d = d.with_max_bytes(v);
    }
    if let Some(v) = args.download_attempts {
        d = d.with_max_attempts(v);
    }
    if args.allow_file_urls {
        d = d.with_file_urls(true);
    }
    s = s.with_download(d);
    if let Some(mb) = args.clip_cache_mb {
        s = s.with_clip_cache_bytes(mb << 20);
    }
    let mut media = s.media.clone();
    if let Some(dir) = &args.media_dir {
        media.dir = Some(dir.clone());
    }
    if let Some(mb) = args.media_max_mb {
        media.max_bytes = mb.saturating_mul(1 << 20);
    }
    s = crate::context::with_default_media_dir(s.with_media(media));
    if let Some(mode) = args.match_mode {
        let mut m = s.matching.clone();
        m.mode = mode.into();
        s = s.with_matching(m);
    }
    s
}

/// Runs the researcher daemon until SIGTERM/SIGINT (jobs in flight wind down).
pub async fn run(global: &GlobalOpts, args: ResearcherArgs) -> Result<ExitCode> {
    let config = crate::context::zk_config(global)?;
    let file = crate::context::file_config(global)?;
    let mut settings = settings(file.researcher, &args);
    if let Some(addr) = global.metrics_addr.or(file.metrics_addr) {
        settings = settings.with_metrics_addr(Some(addr.to_string()));
    }
    settings.validate().map_err(anyhow::Error::msg)?;
    let identity = match &args.name {
        Some(n) => Identity::named("researcher", n.clone()),
        None => Identity::new("researcher"),
    };
    let db = crate::context::database(global).await?;
    archivist_researcher::run(
        &config,
        &db,
        settings,
        identity,
        crate::shutdown::on_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}
