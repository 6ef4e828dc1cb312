//! `archivist recorder` and `archivist reaper`: clap arguments (each with an
//! `ARCHIVIST_...` environment variable) mapped onto `archivist_recorder`'s settings.
//!
//! Settings come from the defaults, then the configuration file's `recorder:` and
//! `reaper:` sections (and `ARCHIVIST__RECORDER__...` / `ARCHIVIST__REAPER__...`
//! overrides), then the flags given. [`reaper_settings`] and [`spawn_reaper`] let
//! `archivist recorder --with-reaper` (and `archivist run`) run the reaper inside their
//! own process.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use archivist_engine::member::Identity;
use archivist_engine::ZkConfig;
use archivist_recorder::{ReaperSettings, RecorderSettings};
use clap::Args;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cli::GlobalOpts;

/// Arguments of `archivist recorder`.
#[derive(Debug, Args)]
pub struct RecorderArgs {
    /// Identity in locks, events and `/daemons` (default `recorder-<host>-<pid>`).
    #[arg(long, env = "ARCHIVIST_RECORDER_NAME")]
    pub name: Option<String>,
    /// Poll interval of `/reports` and `/queues/reported` when no watch fires, in ms
    /// [default: 2000].
    #[arg(long, env = "ARCHIVIST_RECORDER_POLL_MS")]
    pub poll_ms: Option<u64>,
    /// Most reports of one job stored in one multi [default: 50].
    #[arg(long, env = "ARCHIVIST_RECORDER_BATCH_SIZE")]
    pub batch_size: Option<usize>,
    /// Attempts per batch while other recorders race on the same record [default: 25].
    #[arg(long, env = "ARCHIVIST_RECORDER_MAX_ATTEMPTS")]
    pub max_attempts: Option<u32>,
    /// `reported` jobs closed at once [default: 2].
    #[arg(long, env = "ARCHIVIST_RECORDER_CONCURRENCY")]
    pub concurrency: Option<usize>,
    /// Also run the reaper in this process (only one reaper leads cluster-wide).
    #[arg(long, env = "ARCHIVIST_RECORDER_WITH_REAPER")]
    pub with_reaper: bool,
    /// Reaper settings, used with `--with-reaper`.
    #[command(flatten)]
    pub reaper: ReaperOpts,
}

/// Arguments of `archivist reaper`.
#[derive(Debug, Args)]
pub struct ReaperArgs {
    /// Identity in locks, events and `/daemons` (default `reaper-<host>-<pid>`).
    #[arg(long, env = "ARCHIVIST_REAPER_NAME")]
    pub name: Option<String>,
    /// Reaper settings.
    #[command(flatten)]
    pub reaper: ReaperOpts,
}

/// The reaper's settings flags (shared by `reaper`, `recorder --with-reaper` and `run`).
#[derive(Debug, Clone, Default, Args)]
pub struct ReaperOpts {
    /// Time between sweeps while leading, in ms [default: 5000].
    #[arg(long, env = "ARCHIVIST_REAPER_INTERVAL_MS")]
    pub reaper_interval_ms: Option<u64>,
    /// Work-item TTL of `pending` jobs, in ms; keep it equal to the planner's
    /// [default: 300000].
    #[arg(long, env = "ARCHIVIST_REAPER_WORK_ITEM_TTL_MS")]
    pub work_item_ttl_ms: Option<u64>,
    /// How long `recorded` and `expired` jobs are kept, in ms (failed, held and
    /// cancelled jobs are never deleted by the reaper: only `archivist delete` removes
    /// them) [default: 86400000].
    #[arg(long, env = "ARCHIVIST_REAPER_RETENTION_MS")]
    pub retention_ms: Option<u64>,
}

/// The recorder settings the file (`base`) and the flags describe.
pub fn recorder_settings(base: RecorderSettings, args: &RecorderArgs) -> Result<RecorderSettings> {
    let mut settings = base;
    if let Some(ms) = args.poll_ms {
        settings = settings.with_poll_interval(Duration::from_millis(ms));
    }
    if let Some(n) = args.batch_size {
        settings = settings.with_batch_size(n);
    }
    if let Some(n) = args.max_attempts {
        settings = settings.with_max_attempts(n);
    }
    if let Some(n) = args.concurrency {
        settings = settings.with_concurrency(n);
    }
    settings.validate()?;
    Ok(settings)
}

/// The reaper settings the file (`base`) and the flags describe.
pub fn reaper_settings(base: ReaperSettings, opts: &ReaperOpts) -> Result<ReaperSettings> {
    let mut settings = base;
    if let Some(ms) = opts.reaper_interval_ms {
        settings = settings.with_interval(Duration::from_millis(ms));
    }
    if let Some(ms) = opts.work_item_ttl_ms {
        settings = settings.with_work_item_ttl(Duration::from_millis(ms));
    }
    if let Some(ms) = opts.retention_ms {
        settings = settings.with_retention(Duration::from_millis(ms));
    }
    settings.validate()?;
    Ok(settings)
}

/// Starts the reaper as a task of this process (for `run --all` and `--with-reaper`).
pub fn spawn_reaper(
    config: ZkConfig,
    db: archivist_db::Database,
    settings: ReaperSettings,
    identity: Identity,
    shutdown: CancellationToken,
) -> JoinHandle<Result<(), archivist_recorder::ReaperError>> {
    tokio::spawn(async move {
        archivist_recorder::reaper::run(&config, &db, settings, identity, shutdown).await
    })
}

fn identity(role: &str, name: &Option<String>) -> Identity {
    match name {
        Some(n) => Identity::named(role, n.clone()),
        None => Identity::new(role),
    }
}

/// Runs the recorder daemon (and the reaper, with `--with-reaper`) until SIGTERM/SIGINT.
pub async fn run_recorder(global: &GlobalOpts, args: RecorderArgs) -> Result<ExitCode> {
    let config = crate::context::zk_config(global)?;
    let file = crate::context::file_config(global)?;
    let settings = recorder_settings(file.recorder, &args)?;
    let reaper_settings = reaper_settings(file.reaper, &args.reaper)?;
    let db = crate::context::database(global).await?;
    let shutdown = crate::shutdown::on_signal();
    let reaper = if args.with_reaper {
        Some(spawn_reaper(
            config.clone(),
            db.clone(),
            reaper_settings,
            identity("reaper", &None),
            shutdown.clone(),
        ))
    } else {
        None
    };
    let recorded = archivist_recorder::run(
        &config,
        db,
        settings,
        identity("recorder", &args.name),
        shutdown.clone(),
    )
    .await;
    shutdown.cancel();
    if let Some(reaper) = reaper {
        reaper.await.context("reaper task")??;
    }
    recorded?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the reaper daemon until SIGTERM/SIGINT.
pub async fn run_reaper(global: &GlobalOpts, args: ReaperArgs) -> Result<ExitCode> {
    let config = crate::context::zk_config(global)?;
    let settings = reaper_settings(crate::context::file_config(global)?.reaper, &args.reaper)?;
    let db = crate::context::database(global).await?;
    archivist_recorder::reaper::run(
        &config,
        &db,
        settings,
        identity("reaper", &args.name),
        crate::shutdown::on_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}
