//! The audio researcher daemon: claims research jobs, downloads and decodes the episode,
//! matches every clip with `archivist-matcher`, and reports each clip's result at once.
//!
//! The protocol it follows (who writes what, in which multi) is docs/protocol.md's
//! Researcher section; docs/researcher.md explains the design, settings and metrics.
//!
//! Layout:
//! - [`settings`]: [`ResearcherSettings`] and [`DownloadSettings`] with their defaults.
//! - [`download`]: streaming, bounded, retried HTTP(S) downloads with an audio check
//!   (also used by `archivist match` for URLs).
//! - [`clips`]: clips cached on disk by content hash and decoded once per process.
//! - `job`: one job from claim to final report (heartbeat, admin requests, failures).
//! - `serve`: the claim loop on one session.
//!
//! [`run`] keeps the loop running across session losses with
//! `archivist_engine::daemon::supervise`.
#![deny(missing_docs)]

pub mod clips;
pub mod download;
mod job;
pub mod media;
mod serve;
pub mod settings;

use std::path::PathBuf;
use std::sync::Arc;

use archivist_db::Database;
use archivist_engine::member::Identity;
use archivist_engine::{EngineError, ZkConfig};
use tokio_util::sync::CancellationToken;

pub use download::{Answer, DownloadError, Downloader, Fetched, Validators};
pub use job::Outcome;
pub use settings::{DownloadSettings, MediaSettings, ResearcherSettings};

/// Why the researcher could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResearcherError {
    /// ZooKeeper or the tree failed in a way the reconnect loop does not absorb.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The work directory cannot be used.
    #[error("work directory {path}: {reason}")]
    WorkDir {
        /// The directory.
        path: PathBuf,
        /// OS message.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error(transparent)]
    Download(#[from] DownloadError),
    /// The media store cannot be used (its directory; its bucket's settings).
    #[error(transparent)]
    Media(#[from] archivist_media::MediaError),
}

fn prepare_work_dir(settings: &ResearcherSettings) -> Result<(), ResearcherError> {
    for dir in [
        settings.work_dir.clone(),
        settings.work_dir.join("episodes"),
        settings.work_dir.join("clips"),
    ] {
        std::fs::create_dir_all(&dir).map_err(|e| ResearcherError::WorkDir {
            path: dir.clone(),
            reason: e.to_string(),
        })?;
    }
    clear_episode_files(&settings.work_dir.join("episodes"));
    Ok(())
}

/// Removes the episode files a killed process left (`episodes/<job>.media`, a
/// re-validation's body): each job writes its own afresh, and one process owns its work
/// directory (docs/researcher.md), so none is in use at start. Before, they stayed for
/// ever and no bound counted them (outside try 23d F3: 264 MB after one kill -9).
fn clear_episode_files(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let (mut files, mut bytes) = (0u64, 0u64);
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file() && std::fs::remove_file(entry.path()).is_ok() {
            files += 1;
            bytes += meta.len();
        }
    }
    if files > 0 {
        tracing::warn!(dir = %dir.display(), files, bytes, "removed episode files an earlier process left (killed mid-job)");
    }
}

/// Runs the researcher until `shutdown` fires: registers `/researchers/{name}` with
/// `slots = concurrency`, claims pending jobs and researches them. A lost session stops
/// the work it guarded and the loop starts again on a new session. On shutdown, jobs in
/// flight wind down (the current clip is finished and reported as final; a job still
/// downloading is handed back to `pending`).
///
/// # Errors
/// An unusable work directory or HTTP client. ZooKeeper trouble is retried, not returned.
pub async fn run(
    config: &ZkConfig,
    db: &Database,
    settings: ResearcherSettings,
    identity: Identity,
    shutdown: CancellationToken,
) -> Result<(), ResearcherError> {
    prepare_work_dir(&settings)?;
    let downloader = Downloader::new(settings.download.clone())?;
    let media = media::open(&settings)?;
    media::probe(&media, &settings).await?;
    let worker = Arc::new(job::Worker {
        me: identity.name.clone(),
        db: db.clone(),
        work_dir: settings.work_dir.clone(),
        heartbeat: settings.heartbeat,
        matching: settings.matching.clone(),
        clips: clips::ClipCache::new(
            &settings.work_dir,
            downloader.clone(),
            settings.clip_cache_bytes,
        )
        .with_decode_limits(settings.decode_limits()),
        decode_limits: settings.decode_limits(),
        own_store: settings.media.backend == settings::MediaBackend::Local,
        downloader,
        media,
        revalidate: settings.media.revalidate,
        hold_after_read: settings.media.hold_after_read,
        first_fetch: Default::default(),
    });
    let loop_settings = serve::LoopSettings {
        concurrency: settings.concurrency.max(1),
        poll: settings.poll,
        refused_backoff: settings.refused_backoff,
        metrics_addr: settings.metrics_addr.clone(),
    };
    let name = identity.name.clone();
    archivist_engine::daemon::supervise(config, &name, shutdown.clone(), |session| {
        let worker = worker.clone();
        let identity = identity.clone();
        let loop_settings = loop_settings.clone();
        let shutdown = shutdown.clone();
        async move { serve::serve(worker, &session, &identity, &loop_settings, shutdown).await }
    })
    .await?;
    tracing::info!(name = %name, "researcher stopped");
    Ok(())
}
