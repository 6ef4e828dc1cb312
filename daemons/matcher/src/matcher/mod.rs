//! The public matcher: the per-episode analysis and the per-clip pipeline. Its
//! parts: [`results`] and [`config`] (the public types), [`candidates`] (verifying
//! coarse candidates), [`null`] (a clip's threshold, its own copies censored),
//! [`extent`] (which part of a clip matched) and [`cross_check`] (occurrences a similar
//! clip explains).

mod candidates;
mod config;
mod cross_check;
mod extent;
mod null;
mod results;

use std::time::Instant;

use rayon::prelude::*;

use crate::coarse::{self, CoarseParams, Whitener};
use crate::features::{self, FeatureIndex, HOP};
use crate::ncc::{self, PreparedClip};
use crate::speed;
use crate::store::{Pcm16, Samples};
use crate::ANALYSIS_RATE;

use candidates::{keep_most_confident, max_kept};
pub use config::{ConfigError, MatchConfig, MatchMode};
use extent::{merge_same_events, refine_extent, whole};
pub(crate) use results::round_ms;
pub use results::{ClipResult, Detector, MatchError, Occurrence};

/// A matcher built once per episode and shared by all clips.
pub struct Matcher {
    /// The whitened episode (raw in exhaustive mode), 16-bit.
    episode: Pcm16,
    config: MatchConfig,
    index: Option<FeatureIndex>,
    /// Whitening filter fitted on the episode (applied to the stored episode
    /// and to every clip; `None` in exhaustive mode).
    whitener: Option<Whitener>,
    /// Normalised PSD of each episode section (for the adaptive threshold).
    section_psd: Vec<Vec<f32>>,
}

/// Lag radius (samples) of the exact NCC around a coarse candidate: 16 ms,
/// 40 ms for clips under 3 s.
fn verify_radius(len: usize) -> usize {
    if len < 3 * ANALYSIS_RATE as usize {
        320
    } else {
        128
    }
}

/// Episode section length (samples) for the null-distribution estimate.
const SECTION: usize = 30 * ANALYSIS_RATE as usize;

impl Matcher {
    /// Builds a matcher for `episode` (mono f32 at [`ANALYSIS_RATE`]); copies the samples.
    pub fn new(episode: &[f32], config: MatchConfig) -> Self {
        Self::from_samples(episode.to_vec(), config)
    }

    /// Builds a matcher taking ownership of the samples (no copy: use this for
    /// long episodes to keep memory low).
    pub fn from_samples(mut episode: Vec<f32>, config: MatchConfig) -> Self {
        episode.iter_mut().for_each(|v| {
            if !v.is_finite() {
                *v = 0.0
            }
        });
        let index = match config.mode {
            MatchMode::Fast | MatchMode::Full => Some(FeatureIndex::new(&episode)),
            MatchMode::Exhaustive => None,
        };
        // The band-energy features above are computed on the raw audio; every
        // waveform comparison uses the whitened episode.
        let whitener = (config.mode != MatchMode::Exhaustive).then(|| {
            let w = Whitener::fit(&episode);
            w.apply_in_place(&mut episode);
            w
        });
        let section_psd = if config.mode == MatchMode::Exhaustive || config.null_sigmas <= 0.0 {
            Vec::new()
        } else {
            episode
                .par_chunks(SECTION)
                .filter(|c| c.len() >= ncc::PSD_N)
                .map(ncc::welch_psd)
                .collect()
        };
        Self {
            episode: Pcm16::from_f32(episode),
            config,
            index,
            whitener,
            section_psd,
        }
    }

    /// Episode duration (s).
    pub fn episode_duration_s(&self) -> f64 {
        self.episode.len() as f64 / ANALYSIS_RATE as f64
    }

    /// The configuration in use.
    pub fn config(&self) -> &MatchConfig {
        &self.config
    }

    /// Approximate heap memory held by the matcher (bytes).
    pub fn heap_bytes(&self) -> usize {
        self.episode.heap_bytes() + self.index.as_ref().map_or(0, |i| i.heap_bytes())
    }

    fn validate(&self, clip: &[f32], label: &str) -> Result<PreparedClip, MatchError> {
        if clip.is_empty() {
            return Err(MatchError::EmptyClip {
                clip: label.to_owned(),
            });
        }
        if clip.iter().any(|v| !v.is_finite()) {
            return Err(MatchError::NonFinite {
                clip: label.to_owned(),
            });
        }
        let dur = clip.len() as f64 / ANALYSIS_RATE as f64;
        if dur < self.config.min_clip_s {
            return Err(MatchError::TooShort {
                clip: label.to_owned(),
                duration_s: dur,
                min_s: self.config.min_clip_s,
            });
        }
        let p = PreparedClip::new(clip);
        let rms_db = 20.0 * signal_rms(&p.samples).max(1e-30).log10() as f32;
        if rms_db < -80.0 {
            return Err(MatchError::SilentClip {
                clip: label.to_owned(),
                rms_db,
            });
        }
        Ok(p)
    }

    /// Finds every occurrence of one clip (mono f32 at [`ANALYSIS_RATE`]).
    pub fn find(&self, clip: &[f32], label: &str) -> Result<ClipResult, MatchError> {
        self.find_all(&[(label, clip)]).pop().unwrap_or_else(|| {
            Err(MatchError::EmptyClip {
                clip: label.to_owned(),
            })
        })
    }

    /// Finds every occurrence of each clip; one result per clip, in order.
    /// A bad clip yields an error in its slot and does not stop the others.
    pub fn find_all<L: AsRef<str> + Sync, S: AsRef<[f32]> + Sync>(
        &self,
        clips: &[(L, S)],
    ) -> Vec<Result<ClipResult, MatchError>> {
        let res = match self.config.mode {
            MatchMode::Exhaustive => return self.find_all_exhaustive(clips),
            MatchMode::Full => self.find_all_full(clips),
            MatchMode::Fast => clips
                .par_iter()
                .map(|(label, clip)| self.find_fast(clip.as_ref(), label.as_ref()))
                .collect(),
        };
        self.explain_away(clips, res)
    }

    /// Default mode: coarse-to-fine whitened NCC for whole clips, then the
    /// extent check and the warped detector.
    fn find_all_full<L: AsRef<str> + Sync, S: AsRef<[f32]> + Sync>(
        &self,
        clips: &[(L, S)],
    ) -> Vec<Result<ClipResult, MatchError>> {
        let t0 = Instant::now();
        let cfg = &self.config;
        // Clips are checked here and whitened where they are used (the coarse pass,
        // one chunk of clips at a time, then each clip's fine pass): 1,000 clips
        // are never all held as whitened copies at once (the raw samples stay with
        // the caller).
        let lens: Vec<Result<usize, MatchError>> = clips
            .par_iter()
            .map(|(l, c)| self.validate(c.as_ref(), l.as_ref()).map(|p| p.len()))
            .collect();
        let ok: Vec<usize> = (0..clips.len()).filter(|&i| lens[i].is_ok()).collect();
        let ok_lens: Vec<usize> = lens
            .iter()
            .filter_map(|l| l.as_ref().ok().copied())
            .collect();
        let prepare = |k: usize| self.comparable(&PreparedClip::new(clips[ok[k]].1.as_ref()));
        let cands = coarse::coarse_fine(
            &self.episode,
            &ok_lens,
            &prepare,
            &CoarseParams {
                threshold: cfg.band_threshold,
                max_kept: max_kept(cfg),
                min_sep_frac: cfg.min_separation,
            },
        );
        let per = t0.elapsed().as_secs_f64() / ok.len().max(1) as f64;
        if std::env::var_os("ARCHIVIST_MATCHER_DEBUG").is_some() {
            eprintln!(
                "coarse pass: {:.3} s for {} clips",
                t0.elapsed().as_secs_f64(),
                ok.len()
            );
        }
        let mut it = cands.into_iter();
        let with_cands: Vec<Result<Vec<ncc::Peak>, MatchError>> = lens
            .into_iter()
            .map(|l| {
                l?;
                Ok(it.next().unwrap_or_default())
            })
            .collect();
        with_cands
            .into_par_iter()
            .zip(clips.par_iter())
            .map(|(r, (label, raw))| {
                let cands = r?;
                let p = self.comparable(&PreparedClip::new(raw.as_ref()));
                let t1 = Instant::now();
                let dur = p.len() as f64 / ANALYSIS_RATE as f64;
                if std::env::var("ARCHIVIST_MATCHER_TRACE").is_ok_and(|v| v == label.as_ref()) {
                    for c in &cands {
                        let r = (c.width as usize).max(verify_radius(p.len()));
                        let v = ncc::local_ncc(&self.episode, &p, c.pos.round() as i64, r);
                        eprintln!(
                            "TRACE {} cand {:.4} s score {:.3} width {} -> {:?}",
                            label.as_ref(),
                            c.pos / ANALYSIS_RATE as f64,
                            c.ncc,
                            c.width,
                            v.map(|v| (v.pos / ANALYSIS_RATE as f64, v.ncc))
                        );
                    }
                }
                let ncands = cands.len();
                let list_full = ncands >= max_kept(cfg);
                let first_threshold = (std::env::var_os("ARCHIVIST_MATCHER_DEBUG").is_some())
                    .then(|| self.threshold_for(&ncc::welch_psd(&p.samples), p.len(), &[]));
                let verified = self.verify_censored(&p, cands, list_full, |c, thr| {
                    // The band envelope of a tonal clip has several lobes (beats
                    // between its partials): search a few of them (short clips,
                    // mostly tonal stings, over +-40 ms: their FFTs are small).
                    let r = (c.width as usize).max(verify_radius(p.len()));
                    ncc::local_ncc(&self.episode, &p, c.pos.round() as i64, r)
                        .filter(|k| k.ncc >= thr)
                });
                let (hits, capped, thr) = (verified.hits, verified.capped, verified.threshold);
                let hits = self.stand_out_locally(&p, hits);
                let hits = self.not_sidelobes(&p, hits);
                let mut occ: Vec<Occurrence> = hits
                    .into_iter()
                    .filter_map(|k| refine_extent(&self.episode, &p, k.pos, k.ncc, cfg))
                    .collect();
                let t2 = Instant::now();
                if cfg.speed_search {
                    if let Some(index) = &self.index {
                        let qf = features::compute(raw.as_ref());
                        if qf.frames > 0 {
                            let rt = speed::Retimer {
                                raw: self.whitener.as_ref().map(|w| (raw.as_ref(), w)),
                            };
                            let warped = speed::detect(
                                &self.episode,
                                index,
                                &p,
                                &rt,
                                &qf,
                                cfg,
                                &mut occ,
                            );
                            occ.extend(warped);
                        }
                    }
                }
                if std::env::var_os("ARCHIVIST_MATCHER_DEBUG").is_some() {
                    eprintln!(
                        "{}: {} coarse candidates, threshold {thr:.3} (before censoring its copies {:.3}), verify {:.3} s, warped {:.3} s",
                        label.as_ref(),
                        ncands,
                        first_threshold.unwrap_or(thr),
                        (t2 - t1).as_secs_f64(),
                        t2.elapsed().as_secs_f64()
                    );
                }
                let occ = merge_same_events(occ, dur, cfg.min_separation);
                let (occ, limit_reached) = keep_most_confident(occ, cfg.max_occurrences, capped);
                Ok(ClipResult {
                    occurrences: occ,
                    clip_duration_s: dur,
                    elapsed_s: per + t1.elapsed().as_secs_f64(),
                    limit_reached,
                })
            })
            .collect()
    }

    fn find_all_exhaustive<L: AsRef<str> + Sync, S: AsRef<[f32]> + Sync>(
        &self,
        clips: &[(L, S)],
    ) -> Vec<Result<ClipResult, MatchError>> {
        let t0 = Instant::now();
        let prepared: Vec<Result<PreparedClip, MatchError>> = clips
            .iter()
            .map(|(l, c)| self.validate(c.as_ref(), l.as_ref()))
            .collect();
        let ok: Vec<&PreparedClip> = prepared.iter().filter_map(|p| p.as_ref().ok()).collect();
        let peaks = ncc::exhaustive(
            &self.episode,
            &ok,
            self.config.threshold,
            self.config.min_separation,
            self.config.max_occurrences.saturating_add(1),
        );
        let per = t0.elapsed().as_secs_f64() / ok.len().max(1) as f64;
        let mut it = peaks.into_iter();
        prepared
            .into_iter()
            .map(|p| {
                let p = p?;
                let peaks = it.next().unwrap_or_default();
                let dur = p.len() as f64 / ANALYSIS_RATE as f64;
                let occ = peaks
                    .into_iter()
                    .map(|k| whole(k.pos, k.ncc, dur))
                    .collect();
                let (occ, limit_reached) =
                    keep_most_confident(occ, self.config.max_occurrences, false);
                Ok(ClipResult {
                    occurrences: occ,
                    clip_duration_s: dur,
                    elapsed_s: per,
                    limit_reached,
                })
            })
            .collect()
    }

    fn find_fast(&self, clip: &[f32], label: &str) -> Result<ClipResult, MatchError> {
        let t0 = Instant::now();
        let p = self.comparable(&self.validate(clip, label)?);
        let cfg = &self.config;
        let dur = p.len() as f64 / ANALYSIS_RATE as f64;
        let index = match &self.index {
            Some(i) => i,
            None => unreachable_index(),
        };
        let qf = features::compute(clip);
        let mut occ: Vec<Occurrence> = Vec::new();
        let mut capped = false;
        if p.len() <= self.episode.len() {
            if qf.frames > features::MAX_QUERY || qf.frames == 0 {
                // Very long clip: full-resolution NCC for this one.
                let pk = ncc::exhaustive(
                    &self.episode,
                    &[&p],
                    cfg.threshold,
                    cfg.min_separation,
                    cfg.max_occurrences.saturating_add(1),
                );
                occ.extend(pk.into_iter().flatten().map(|k| whole(k.pos, k.ncc, dur)));
            } else {
                let curve = index.correlate(&qf);
                let cands = ncc::pick_peaks(
                    &curve,
                    0,
                    cfg.coarse_threshold,
                    qf.frames,
                    cfg.min_separation,
                    max_kept(cfg),
                );
                let list_full = cands.len() >= max_kept(cfg);
                // Cheap pre-check on the loudest second of the clip.
                let probe_len = ANALYSIS_RATE as usize;
                let probe = (p.len() > 3 * probe_len).then(|| {
                    let mut best = (0usize, -1.0f64);
                    for a in (0..=p.len() - probe_len).step_by(probe_len / 2) {
                        let e = speed::norm_of(&p.samples[a..a + probe_len]);
                        if e > best.1 {
                            best = (a, e);
                        }
                    }
                    (
                        best.0,
                        PreparedClip::new(&p.samples[best.0..best.0 + probe_len]),
                    )
                });
                let verified = self.verify_censored(&p, cands, list_full, |c, thr| {
                    let center = (c.pos.round() as i64) * HOP as i64;
                    if let Some((a, pc)) = &probe {
                        match ncc::local_ncc(&self.episode, pc, center + *a as i64, 2 * HOP) {
                            Some(pk) if pk.ncc >= 0.5 * thr => {}
                            _ => return None,
                        }
                    }
                    ncc::local_ncc(&self.episode, &p, center, 2 * HOP).filter(|pk| pk.ncc >= thr)
                });
                capped = verified.capped;
                occ.extend(
                    verified
                        .hits
                        .into_iter()
                        .filter_map(|k| refine_extent(&self.episode, &p, k.pos, k.ncc, cfg)),
                );
            }
        }
        if cfg.speed_search && qf.frames > 0 {
            let tw = Instant::now();
            let rt = speed::Retimer {
                raw: self.whitener.as_ref().map(|w| (clip, w)),
            };
            let warped = speed::detect(&self.episode, index, &p, &rt, &qf, cfg, &mut occ);
            if std::env::var_os("ARCHIVIST_MATCHER_DEBUG").is_some() {
                eprintln!(
                    "{label}: {:.1} s clip, whole-clip pass {:.3} s, warped pass {:.3} s",
                    dur,
                    (tw - t0).as_secs_f64(),
                    tw.elapsed().as_secs_f64()
                );
            }
            occ.extend(warped);
        }
        let occ = merge_same_events(occ, dur, cfg.min_separation);
        let (occ, limit_reached) = keep_most_confident(occ, cfg.max_occurrences, capped);
        Ok(ClipResult {
            occurrences: occ,
            clip_duration_s: dur,
            elapsed_s: t0.elapsed().as_secs_f64(),
            limit_reached,
        })
    }
}

fn unreachable_index() -> &'static FeatureIndex {
    // Fast mode always builds the index in `from_samples`.
    static EMPTY: std::sync::OnceLock<FeatureIndex> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| FeatureIndex::new(&[]))
}

/// Samples at each end of a clip left out of [`signal_rms`]: the resampler's and the
/// analysis band filter's ringing where a clip starts or stops abruptly (the band filter
/// is 255 taps long), 50 ms at 8 kHz.
const EDGE_SAMPLES: usize = 400;

/// The RMS of a mean-removed clip away from its edges ([`EDGE_SAMPLES`]): what it holds
/// besides a constant offset. A pure-DC clip (2 s of constant +8000) decodes to a constant
/// with ringing at its two ends; its whole-clip RMS passed the silence test, the clip
/// matched nothing, and "not found" was stored where the clip could not be matched at
/// all. Clips too short to have an interior are measured whole.
fn signal_rms(centred: &[f32]) -> f64 {
    let inner = if centred.len() > 4 * EDGE_SAMPLES {
        &centred[EDGE_SAMPLES..centred.len() - EDGE_SAMPLES]
    } else {
        centred
    };
    // The interior's own mean removed too (the edges' ringing moved the whole clip's).
    let n = inner.len().max(1) as f64;
    let mean = inner.iter().map(|v| f64::from(*v)).sum::<f64>() / n;
    (inner
        .iter()
        .map(|v| (f64::from(*v) - mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt()
}
