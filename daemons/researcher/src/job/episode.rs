//! The episode's audio for one job, and the rendition it is (docs/researcher.md,
//! "Renditions and the media store").
//!
//! Before: the episode's pinned rendition (the database) is looked up in the media store;
//! a verified hit is researched without downloading the episode (after an optional
//! conditional GET asking whether the server's audio changed). Otherwise the episode is
//! downloaded as before, with every check it had (status, length, encoding, audio probe).
//!
//! After a complete decode: a download is recorded as a rendition (the first pins the
//! episode) and kept in the store; the job's run records the rendition it used, before
//! any of its results is reported. Audio that differs from the pin is a new rendition:
//! logged, counted (`archivist_researcher_rendition_changes_total`) and written into
//! the job's `media decoded` event, which `archivist jobs show` lists.

use std::path::{Path, PathBuf};

use archivist_db::renditions::{self, Pin, Recorded, Rendition};
use archivist_db::DbError;
use archivist_engine::schema::records::RecordError;
use archivist_engine::EngineError;
use archivist_media::{Key, Lookup};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::ctx::JobCtx;
use super::Worker;
use crate::download::{Fetched, Validators};

/// Where the job's audio came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The media store (no episode bytes downloaded).
    Store,
    /// Downloaded for this job.
    Download,
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Source::Store => "store",
            Source::Download => "download",
        }
    }
}

/// The audio a job researches, at `path` (removed by the caller after decoding).
#[derive(Debug)]
pub(crate) struct Audio {
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    pub source: Source,
    /// The download, when downloaded (final URL, validators).
    pub fetched: Option<Fetched>,
    /// The episode's pin when the job started (`None`: not yet pinned).
    pub pin: Option<Pin>,
    /// A revalidation found the server serving other bytes than the stored pin.
    pub changed: Option<Fetched>,
}

/// A database error as the job sees it: a stored value that does not parse fails the
/// job (it will not parse next time either); the database down leaves it for later.
pub(crate) fn db_error(e: DbError) -> EngineError {
    match e {
        DbError::Corrupt { what, reason } => EngineError::Record(RecordError::Malformed {
            path: what,
            kind: "rendition",
            reason,
        }),
        e => EngineError::daemon(e),
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

impl Worker {
    /// The pinned rendition from the store, if it was fetched from the job's media URL and
    /// the store holds it (verified); `None` otherwise (a damaged object was deleted and
    /// logged).
    pub(crate) async fn pinned_from_store(
        &self,
        ctx: &JobCtx,
        url: &str,
        pin: &Pin,
        dest: &Path,
    ) -> Option<(String, u64)> {
        let sha = &pin.rendition.sha256;
        if pin.rendition.url != url {
            // Re-curated to other media (a wrong file fixed, a new host): the pinned
            // bytes may not be this URL's, so the episode is fetched again (the same
            // bytes keep the pin and take the new URL; others move it).
            tracing::info!(job = %ctx.job_id, episode = %ctx.episode, pinned_url = %pin.rendition.url, %url, "the episode's media URL changed since its audio was pinned; downloading");
            return None;
        }
        let key = match Key::parse(sha) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "the pinned rendition's hash is not a media key; downloading");
                return None;
            }
        };
        match self.media.get(&key, dest).await {
            Ok(Lookup::Hit { bytes }) => Some((sha.clone(), bytes)),
            Ok(Lookup::Miss) => {
                tracing::info!(job = %ctx.job_id, episode = %ctx.episode, rendition = %short(sha), "pinned rendition not in the media store; downloading");
                None
            }
            Ok(Lookup::Corrupt { actual, .. }) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, rendition = %short(sha), %actual, "the stored pinned rendition was damaged (deleted); downloading it again");
                None
            }
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "media store unusable; downloading");
                None
            }
        }
    }

    /// Asks the server whether the pinned rendition is still what it serves (a
    /// conditional GET with the pin's validators). Other audio is returned (its file
    /// removed: the job researches the pin); a `304`, the same bytes, a pin without
    /// validators or any failure is `None` (a failure is logged: the pinned audio is
    /// still the audio to research).
    pub(crate) async fn revalidate(
        &self,
        ctx: &JobCtx,
        url: &str,
        pin: &Pin,
        dest: &Path,
    ) -> Option<Fetched> {
        let validators = Validators {
            etag: pin.rendition.etag.clone(),
            last_modified: pin.rendition.last_modified.clone(),
        };
        if !self.revalidate || validators.is_empty() {
            return None;
        }
        let never = CancellationToken::new();
        let progress = |_: u64, _: Option<u64>| {};
        let answer = self
            .downloader
            .fetch_audio_if_changed(url, dest, &validators, &never, &progress)
            .await;
        let _ = tokio::fs::remove_file(dest).await;
        match answer {
            Ok(None) => None,
            Ok(Some(f)) if f.sha256 == pin.rendition.sha256 => None,
            Ok(Some(f)) => Some(f),
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "could not revalidate the pinned rendition; researching it");
                None
            }
        }
    }

    /// After a complete decode of `audio` lasting `duration_s`: records the rendition
    /// (pinning or reporting a change), keeps a download in the store, and records the
    /// job's run as measured on the rendition researched. Returns a note for the job's
    /// `media decoded` event.
    pub(crate) async fn settle_rendition(
        &self,
        ctx: &JobCtx,
        url: &str,
        audio: &Audio,
        duration_s: f64,
    ) -> Result<String, EngineError> {
        metrics::counter!("archivist_researcher_episode_audio_total", "source" => audio.source.label())
            .increment(1);
        let mut note = match audio.source {
            Source::Store => format!(
                "rendition {} from the media store (0 episode bytes downloaded)",
                short(&audio.sha256)
            ),
            Source::Download => format!(
                "rendition {} downloaded ({} bytes)",
                short(&audio.sha256),
                audio.bytes
            ),
        };
        if let Some(other) = &audio.changed {
            // Revalidation: the server serves other bytes; the job researched the pin.
            let new = rendition_of(&ctx.episode, url, other, None);
            renditions::record(&self.db, &new).await.map_err(db_error)?;
            self.report_change(
                ctx,
                url,
                &audio.sha256,
                other,
                "kept: this job researched the pinned audio from the store",
            );
            note.push_str(&format!(
                "; the server now serves other audio (rendition {}, {} bytes), recorded as a new rendition; the pin is kept",
                short(&other.sha256),
                other.bytes
            ));
        }
        if let (Source::Download, Some(fetched)) = (audio.source, &audio.fetched) {
            let this = rendition_of(&ctx.episode, url, fetched, Some(duration_s));
            match renditions::record(&self.db, &this)
                .await
                .map_err(db_error)?
            {
                Recorded::Pinned => note.push_str("; pinned as the episode's audio"),
                Recorded::SameAsPin => note.push_str("; the pinned audio"),
                Recorded::Differs { pin, .. } => {
                    let old = pin.rendition.sha256.clone();
                    // The pin was known when the job started and its bytes could not be
                    // had (not in the store): the pin moves to what the server serves
                    // now. A pin made meanwhile by another job's download stays.
                    let moved = audio
                        .pin
                        .as_ref()
                        .is_some_and(|p| p.rendition.sha256 == old)
                        && renditions::move_pin(&self.db, &ctx.episode, &old, &this.sha256)
                            .await
                            .map_err(db_error)?;
                    let what = if moved {
                        "moved: the pinned audio could not be had (not in the media store, or the episode's media URL changed) and the server serves other audio"
                    } else {
                        "kept: another job pinned other audio meanwhile"
                    };
                    self.report_change(ctx, url, &old, fetched, what);
                    note.push_str(&format!(
                        "; the audio differs from the pinned rendition {} (a new rendition); pin {what}",
                        short(&old)
                    ));
                }
            }
            self.keep(ctx, audio).await;
        }
        renditions::record_run(&self.db, &ctx.episode, &ctx.job_id, &audio.sha256)
            .await
            .map_err(db_error)?;
        Ok(note)
    }

    /// A new rendition: one log line, one metric.
    fn report_change(&self, ctx: &JobCtx, url: &str, pinned: &str, other: &Fetched, pin: &str) {
        metrics::counter!("archivist_researcher_rendition_changes_total").increment(1);
        tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, %url, pinned = %pinned, new = %other.sha256, bytes = other.bytes, "episode audio changed: the server serves a new rendition; pin {pin}");
    }

    /// Keeps a downloaded rendition in the media store; a store that fails costs only
    /// a later download, so it is logged, not fatal.
    async fn keep(&self, ctx: &JobCtx, audio: &Audio) {
        let stored = match Key::parse(&audio.sha256) {
            Ok(key) => self.media.put(&key, &audio.path).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = stored {
            tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "could not keep the episode in the media store");
        }
    }
}

fn rendition_of(episode: &str, url: &str, f: &Fetched, duration_s: Option<f64>) -> Rendition {
    Rendition {
        url: url.to_string(),
        episode: episode.to_string(),
        sha256: f.sha256.clone(),
        bytes: f.bytes,
        duration_s,
        fetched_at: OffsetDateTime::now_utc(),
        final_url: f.final_url.clone(),
        etag: f.validators.etag.clone(),
        last_modified: f.validators.last_modified.clone(),
    }
}
