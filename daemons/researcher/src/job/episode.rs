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
use archivist_engine::schema::paths;
use archivist_engine::schema::records::RecordError;
use archivist_engine::{store, EngineError};
use archivist_media::{Key, Lookup, MediaError};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use archivist_matcher::decode::decode_file_with;

use super::ctx::JobCtx;
use super::Worker;
use crate::clips::relabel;
use crate::download::{Answer, Fetched, Validators};

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
    /// What a revalidation of the stored pin found.
    pub revalidated: Revalidated,
}

/// What the conditional GET before researching a stored pin found.
#[derive(Debug, Default)]
pub(crate) enum Revalidated {
    /// Not asked, or `304` for the pin.
    #[default]
    Unchanged,
    /// The question failed (a `404`, `410`, `503`, a body too slow or cut short...):
    /// the pinned audio is researched all the same, and the job's event says why the
    /// host could not confirm it (outside 23b L1: it read exactly as after a `304`, so
    /// an episode removed from its host went unnoticed).
    Failed { reason: String },
    /// A `200` with the pin's bytes (a server ignoring the validators, or validators
    /// that changed while the bytes did not): `bytes` came. Its validators replace the
    /// pin's, so the next job's question can be answered `304`.
    SameBytes { bytes: u64 },
    /// A `304` naming the entity tag of `sha256`, an other rendition recorded before:
    /// the server still serves that audio (nothing new to record or count).
    StillOther { sha256: String },
    /// A `200` with other bytes that decoded whole: a new rendition.
    Changed { fetched: Fetched, duration_s: f64 },
    /// A `200` whose body fails the checks a download must pass (not decoded whole): a
    /// broken response, not a rendition.
    Broken { bytes: u64, reason: String },
}

/// A job whose earlier results were measured on one rendition found another one now
/// (the pin moved while it was held or waiting): its remaining clips are not researched
/// on other audio under the same run, which names the first (outside 23b H1).
#[derive(Debug, thiserror::Error)]
#[error("job {job}'s earlier results were measured on rendition {measured_on}, but the episode's audio is now rendition {now} (the audio changed while the job was held or waiting: the pin moved, or its earlier run was on other audio than the pin): its remaining clips are not researched on other audio under the same run. `archivist delete {job}` lets the planner plan them again in a new job, measured on the audio served now")]
pub(crate) struct RunOnOtherAudio {
    pub job: String,
    pub measured_on: String,
    pub now: String,
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
    /// logged). `Err`: the job's own copy (`dest`, in the work directory) could not be
    /// written: not the store's fault, and a download would fail on it the same way, so
    /// the job fails naming the work directory (outside 23b L2: "media store unusable",
    /// then a whole download that could not be written either).
    pub(crate) async fn pinned_from_store(
        &self,
        ctx: &JobCtx,
        url: &str,
        pin: &Pin,
        dest: &Path,
    ) -> Result<Option<(String, u64)>, String> {
        let sha = &pin.rendition.sha256;
        if pin.rendition.url != url {
            // Re-curated to other media (a wrong file fixed, a new host): the pinned
            // bytes may not be this URL's, so the episode is fetched again (the same
            // bytes keep the pin and take the new URL; others move it).
            tracing::info!(job = %ctx.job_id, episode = %ctx.episode, pinned_url = %pin.rendition.url, %url, "the episode's media URL changed since its audio was pinned; downloading");
            return Ok(None);
        }
        let key = match Key::parse(sha) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "the pinned rendition's hash is not a media key; downloading");
                return Ok(None);
            }
        };
        match self.media.get(&key, dest).await {
            Ok(Lookup::Hit { bytes }) => Ok(Some((sha.clone(), bytes))),
            Ok(Lookup::Miss) => {
                tracing::info!(job = %ctx.job_id, episode = %ctx.episode, rendition = %short(sha), "pinned rendition not in the media store; downloading");
                Ok(None)
            }
            Ok(Lookup::Corrupt { actual, .. }) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, rendition = %short(sha), %actual, "the stored pinned rendition was damaged (deleted); downloading it again");
                Ok(None)
            }
            Ok(Lookup::NotAnObject { what }) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, rendition = %short(sha), %what, "the media store held something that is not an object under the pinned rendition's name (removed); downloading it again");
                Ok(None)
            }
            Err(MediaError::Io {
                path,
                action,
                reason,
            }) if path == dest || dest.parent() == Some(path.as_path()) => Err(format!(
                "the job's copy of the episode could not be written in the work directory ({}: {action}: {reason}); nothing was downloaded",
                path.display()
            )),
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "media store unusable; downloading");
                Ok(None)
            }
        }
    }

    /// Asks the server whether the pinned rendition is still what it serves: a
    /// conditional GET listing the pin's entity tag and that of the other rendition
    /// from this URL seen last (so a server that changed, a re-upload or a revert to an
    /// earlier one, answers `304` from then on instead of the whole body). Each answer
    /// is a sighting of the rendition it names (`renditions::saw`): "what the server
    /// serves now" is the rendition seen last. Other bytes are
    /// decoded whole before they count as a rendition (the checks a download passes);
    /// the body's file is removed either way: the job researches the pin. A failure is
    /// logged and is `Unchanged`: the pinned audio is still the audio to research.
    pub(crate) async fn revalidate(
        &self,
        ctx: &JobCtx,
        url: &str,
        pin: &Pin,
        dest: &Path,
    ) -> Revalidated {
        let validators = Validators {
            etag: pin.rendition.etag.clone(),
            last_modified: pin.rendition.last_modified.clone(),
        };
        if !self.revalidate || validators.is_empty() {
            return Revalidated::Unchanged;
        }
        let other = self.latest_other(ctx, url, pin).await;
        // A host that sends no entity tags, only `Last-Modified`: after a re-upload the
        // question asks "modified since the other rendition's date?", or every later job
        // downloaded the whole new body again (outside 23c N1). Its `304` names no tag,
        // so it is taken as that rendition (the job researches the pin either way).
        let dated_other = match (&other, &pin.rendition.etag) {
            (None, None) => self.latest_dated_other(ctx, url, pin).await,
            _ => None,
        };
        let mut known = vec![validators];
        if let Some(o) = &other {
            known.push(Validators {
                etag: o.etag.clone(),
                last_modified: None,
            });
        }
        if let Some(o) = &dated_other {
            known.insert(
                0,
                Validators {
                    etag: None,
                    last_modified: o.last_modified.clone(),
                },
            );
        }
        let never = CancellationToken::new();
        let progress = |_: u64, _: Option<u64>| {};
        let answer = self
            .downloader
            .fetch_audio_if_changed(url, dest, &known, &never, &progress)
            .await;
        let pinned = pin.rendition.sha256.as_str();
        let found = match answer {
            Ok(Answer::NotModified(v)) => match (&other, v.etag) {
                (Some(o), Some(etag)) if o.etag.as_deref().is_some_and(|e| same_etag(e, &etag)) => {
                    self.saw(ctx, &o.sha256, None).await;
                    Revalidated::StillOther {
                        sha256: o.sha256.clone(),
                    }
                }
                (None, None) if dated_other.is_some() => {
                    let o = dated_other
                        .as_ref()
                        .map(|o| o.sha256.clone())
                        .unwrap_or_default();
                    self.saw(ctx, &o, None).await;
                    Revalidated::StillOther { sha256: o }
                }
                // Asked about two tags, answered with none (RFC 9110 says a `304` sends
                // its `ETag`): which audio it means is unknown, so no sighting is
                // recorded (outside 23c N4: it counted as the pin, and `status` and the
                // console stopped saying the host serves other audio). The pin is
                // researched either way.
                (Some(_), None) => Revalidated::Unchanged,
                _ => {
                    self.saw(ctx, pinned, None).await;
                    Revalidated::Unchanged
                }
            },
            Ok(Answer::Body(f)) if f.sha256 == pinned => {
                let v = &f.validators;
                let validators = (v.etag.as_deref(), v.last_modified.as_deref());
                self.saw(ctx, pinned, Some(validators)).await;
                Revalidated::SameBytes { bytes: f.bytes }
            }
            Ok(Answer::Body(f)) => self.decode_whole(ctx, url, f).await,
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "could not revalidate the pinned rendition; researching it");
                Revalidated::Failed {
                    reason: e.to_string(),
                }
            }
        };
        let _ = tokio::fs::remove_file(dest).await;
        found
    }

    /// The rendition from `url` other than the pin that was seen last, when it was seen
    /// last of all (the server's current audio) and has a `Last-Modified` but no entity
    /// tag: what a host that sends only dates is asked about ([`Worker::revalidate`]).
    async fn latest_dated_other(&self, ctx: &JobCtx, url: &str, pin: &Pin) -> Option<Rendition> {
        let seen = renditions::recently_seen(&self.db, &ctx.episode)
            .await
            .ok()?;
        let last = seen.into_iter().find(|r| r.url == url)?;
        (last.sha256 != pin.rendition.sha256 && last.etag.is_none() && last.last_modified.is_some())
            .then_some(last)
    }

    /// A sighting of a recorded rendition (a `304` naming it, a `200` with its bytes):
    /// a failure only costs `status` its "serves other audio now", so it is logged.
    async fn saw(
        &self,
        ctx: &JobCtx,
        sha256: &str,
        validators: Option<(Option<&str>, Option<&str>)>,
    ) {
        if let Err(e) = renditions::saw(&self.db, &ctx.episode, sha256, validators).await {
            tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, rendition = %short(sha256), error = %e, "could not record that the server served this rendition");
        }
    }

    /// The rendition from `url` other than the pin that was seen last, with an entity
    /// tag of its own (a server that gives every body the same tag cannot say which one
    /// it serves, so its `304` stays the pin's). Seen last, not recorded last: after
    /// A, B, C and B again, the server serves B (outside 23b M2: the question named C
    /// for ever, and every job downloaded B again).
    async fn latest_other(&self, ctx: &JobCtx, url: &str, pin: &Pin) -> Option<Rendition> {
        let pin_tag = pin.rendition.etag.as_deref();
        let own_tag = |t: &str| !pin_tag.is_some_and(|p| same_etag(p, t));
        match renditions::recently_seen(&self.db, &ctx.episode).await {
            Ok(all) => all.into_iter().find(|r| {
                r.sha256 != pin.rendition.sha256
                    && r.url == url
                    && r.etag.as_deref().is_some_and(own_tag)
            }),
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "could not list the episode's renditions; revalidating with the pin's validators only");
                None
            }
        }
    }

    /// Other bytes from a revalidation: a rendition only if they decode whole, as a
    /// download must (a truncated body is a broken response, not other audio).
    async fn decode_whole(&self, ctx: &JobCtx, url: &str, f: Fetched) -> Revalidated {
        let path = f.path.clone();
        let label = url.to_string();
        let limits = self.decode_limits;
        let decoded = tokio::task::spawn_blocking(move || {
            decode_file_with(&path, &limits)
                .map(|a| a.duration_s)
                .map_err(|e| relabel(e, &label).to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("{url}: the decode task failed: {e}")));
        match decoded {
            Ok(duration_s) => Revalidated::Changed {
                fetched: f,
                duration_s,
            },
            Err(reason) => {
                metrics::counter!("archivist_researcher_revalidation_broken_total").increment(1);
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, %url, bytes = f.bytes, %reason, "the server answered the revalidation with a broken response (not recorded as a rendition); researching the pinned audio");
                Revalidated::Broken {
                    bytes: f.bytes,
                    reason,
                }
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
        let revalidation_bytes = match &audio.revalidated {
            Revalidated::SameBytes { bytes } | Revalidated::Broken { bytes, .. } => *bytes,
            Revalidated::Changed { fetched, .. } => fetched.bytes,
            Revalidated::Unchanged
            | Revalidated::StillOther { .. }
            | Revalidated::Failed { .. } => 0,
        };
        let mut note = match audio.source {
            Source::Store if revalidation_bytes > 0 => format!(
                "rendition {} from the media store ({revalidation_bytes} episode bytes downloaded by the re-validation)",
                short(&audio.sha256)
            ),
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
        match &audio.revalidated {
            Revalidated::Changed {
                fetched: other,
                duration_s,
            } => {
                // The server serves other bytes; the job researched the pin.
                let new = rendition_of(&ctx.episode, url, other, Some(*duration_s));
                let recorded = renditions::record(&self.db, &new).await.map_err(db_error)?;
                self.report_change(
                    ctx,
                    url,
                    &audio.sha256,
                    other,
                    "kept: this job researched the pinned audio from the store",
                );
                let what = match recorded {
                    Recorded::Differs {
                        first_time: false, ..
                    } => "a rendition recorded before",
                    _ => "recorded as a new rendition",
                };
                note.push_str(&format!(
                    "; the server now serves other audio (rendition {}, {} bytes), {what}; the pin is kept",
                    short(&other.sha256),
                    other.bytes
                ));
            }
            Revalidated::StillOther { sha256 } => note.push_str(&format!(
                "; the server still serves the other audio recorded before (rendition {}: 304 Not Modified to its ETag); the pin is kept",
                short(sha256)
            )),
            Revalidated::Broken { bytes, reason } => note.push_str(&format!(
                "; the re-validation got a broken response ({bytes} bytes that do not decode whole: {reason}), not recorded as a rendition; the pin is kept"
            )),
            Revalidated::Failed { reason } => note.push_str(&format!(
                "; the re-validation failed ({reason}): the host could not confirm the pinned audio, which was researched from the store"
            )),
            Revalidated::Unchanged | Revalidated::SameBytes { .. } => {}
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
            if let Some(why) = self.keep(ctx, audio).await {
                note.push_str(&format!("; not kept in the media store: {why}"));
            } else {
                self.say_held(ctx, &audio.sha256).await;
            }
        } else if audio.source == Source::Store {
            self.say_held(ctx, &audio.sha256).await;
        }
        // A report of this job in flight was measured on the audio its run names: then
        // the run may not move to other audio, even before the recorder stores it.
        let mut in_flight = false;
        for clip in &ctx.clips {
            let report = paths::report(&paths::report_name(&ctx.job_id, clip));
            if store::exists(&ctx.session, &report).await?.is_some() {
                in_flight = true;
                break;
            }
        }
        if let Some(measured_on) = renditions::record_run(
            &self.db,
            &ctx.episode,
            &ctx.job_id,
            &audio.sha256,
            !in_flight,
        )
        .await
        .map_err(db_error)?
        {
            return Err(EngineError::daemon(RunOnOtherAudio {
                job: ctx.job_id.clone(),
                measured_on,
                now: audio.sha256.clone(),
            }));
        }
        Ok(note)
    }

    /// Affinity: this researcher's own store holds `sha256`; if that is the episode's pin,
    /// the planner leaves the episode's next jobs to it for a while (a shared S3 store is
    /// every researcher's: nothing to say). A failure costs only the hint.
    async fn say_held(&self, ctx: &JobCtx, sha256: &str) {
        if !self.own_store {
            return;
        }
        if let Err(e) = renditions::set_holder(&self.db, &ctx.episode, sha256, &self.me).await {
            tracing::debug!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "could not record that this researcher holds the episode");
        }
    }

    /// A new rendition: one log line, one metric.
    fn report_change(&self, ctx: &JobCtx, url: &str, pinned: &str, other: &Fetched, pin: &str) {
        metrics::counter!("archivist_researcher_rendition_changes_total").increment(1);
        tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, %url, pinned = %pinned, new = %other.sha256, bytes = other.bytes, "episode audio changed: the server serves a new rendition; pin {pin}");
    }

    /// Keeps a downloaded rendition in the media store; a store that fails costs only
    /// a later download, so it is logged and counted (by the store:
    /// `archivist_media_write_failures_total`), not fatal. Returns why it was not kept.
    async fn keep(&self, ctx: &JobCtx, audio: &Audio) -> Option<String> {
        let stored = match Key::parse(&audio.sha256) {
            Ok(key) => self.media.put(&key, &audio.path).await,
            Err(e) => Err(e),
        };
        match stored {
            Ok(w) if w.stored => None,
            Ok(_) => Some("it is larger than the whole store (researcher.media.max_bytes)".into()),
            Err(e) => {
                tracing::warn!(job = %ctx.job_id, episode = %ctx.episode, error = %e, "could not keep the episode in the media store; later jobs download it again");
                Some(e.to_string())
            }
        }
    }
}

/// Entity tags compared weakly (RFC 9110 section 8.8.3.2: `If-None-Match` uses the weak
/// comparison), so a `W/` prefix added or dropped by a proxy does not matter.
fn same_etag(a: &str, b: &str) -> bool {
    let strip = |t: &str| t.trim().trim_start_matches("W/").to_string();
    strip(a) == strip(b)
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
