//! The public matcher: configuration, results, errors and the per-clip pipeline.

use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::coarse::{self, CoarseParams, Whitener};
use crate::decode::DecodeError;
use crate::features::{self, FeatureIndex, HOP};
use crate::ncc::{self, PreparedClip};
use crate::speed;
use crate::store::{Pcm16, Samples};
use crate::ANALYSIS_RATE;

/// Which detector produced an occurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detector {
    /// Whole clip at unchanged speed, timed by full-band waveform NCC.
    Ncc,
    /// Speed/tempo-changed and/or partial use, verified by piecewise NCC on the re-timed clip.
    Warped,
}

/// One occurrence of a clip in the episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Occurrence {
    /// Episode time (s, rounded to 1 ms) where the matched part of the clip
    /// (`clip_start_s`) begins. For whole-clip matches this is where the clip starts.
    pub offset_s: f64,
    /// Confidence in [0, 1]: the NCC of the match (mean piecewise NCC for warped matches).
    pub confidence: f32,
    /// Playback speed of the clip in the episode (1.0 = unchanged; 1.03 = 3% faster/shorter).
    pub speed: f32,
    /// Start of the matched part of the clip (s, clip time).
    pub clip_start_s: f64,
    /// End of the matched part of the clip (s, clip time).
    pub clip_end_s: f64,
    /// Detector that found it.
    pub detector: Detector,
    /// Other clips of the same request with a stronger occurrence here that resembles
    /// this clip enough to explain this one's score (nested clips, a sting cut from a
    /// theme, similar stings). An annotation only: the occurrence is real audio and is
    /// reported whichever clips are matched with it; only this list depends on the batch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_explained_by: Vec<String>,
}

impl Occurrence {
    /// Where the clip's start falls in the episode (s): the offset of the matched part
    /// less the part's start, at the occurrence's speed. Two detections of one event share
    /// it, whichever part of the clip each matched.
    pub(crate) fn anchor_s(&self) -> f64 {
        self.offset_s - self.clip_start_s / f64::from(self.speed.max(0.01))
    }
}

/// All occurrences of one clip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClipResult {
    /// Occurrences sorted by `offset_s`.
    pub occurrences: Vec<Occurrence>,
    /// Duration of the clip (s).
    pub clip_duration_s: f64,
    /// Time spent matching this clip (s). For a batch in exhaustive mode this is
    /// the batch time divided by the number of clips.
    pub elapsed_s: f64,
    /// More occurrences passed the thresholds than [`MatchConfig::max_occurrences`]:
    /// only the most confident ones are in `occurrences`. Never set silently below the
    /// limit; a caller should show it (the answer is incomplete).
    #[serde(default)]
    pub limit_reached: bool,
}

/// Why a clip could not be matched. Every variant names the clip.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Serialize, Deserialize)]
pub enum MatchError {
    /// The clip has no samples.
    #[error("clip {clip}: empty (no samples)")]
    EmptyClip {
        /// Clip label.
        clip: String,
    },
    /// The clip is digital silence (or nearly: RMS below -80 dBFS).
    #[error("clip {clip}: silent (RMS {rms_db:.1} dBFS)")]
    SilentClip {
        /// Clip label.
        clip: String,
        /// Measured RMS level.
        rms_db: f32,
    },
    /// The clip is shorter than [`MatchConfig::min_clip_s`].
    #[error("clip {clip}: too short ({duration_s:.3} s < {min_s:.3} s)")]
    TooShort {
        /// Clip label.
        clip: String,
        /// Clip duration.
        duration_s: f64,
        /// Configured minimum.
        min_s: f64,
    },
    /// The clip contains NaN or infinite samples.
    #[error("clip {clip}: contains non-finite samples")]
    NonFinite {
        /// Clip label.
        clip: String,
    },
    /// The clip file could not be decoded.
    #[error("clip {clip}: {source}")]
    Decode {
        /// Clip label.
        clip: String,
        /// Decoder error.
        source: DecodeError,
    },
}

/// Matching strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// Default: whitened coarse-to-fine NCC for whole clips (band-limited
    /// envelope correlation over the whole episode, exact 8 kHz NCC at the
    /// best candidates), the extent check, the warped detector, and the
    /// cross-clip check. The most accurate mode.
    #[default]
    Full,
    /// Band-energy feature first pass whose candidates are verified by NCC,
    /// plus the warped detector: cheaper than `Full`, but misses some clips
    /// mixed under louder speech (see docs/matcher.md).
    Fast,
    /// Reference baseline: one full-resolution FFT NCC per clip over the whole
    /// episode, unchanged speed only.
    Exhaustive,
}

/// Matcher configuration. All fields have documented defaults ([`Default`]);
/// a partial JSON/YAML object deserialises with defaults for missing fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchConfig {
    /// Strategy (default [`MatchMode::Full`]).
    pub mode: MatchMode,
    /// Minimum waveform NCC for a whole-clip, unchanged-speed match (default
    /// 0.26). In `Full`/`Fast` mode the NCC is that of the whitened signals
    /// (see docs/matcher.md); `Exhaustive` uses the raw signals.
    pub threshold: f32,
    /// Minimum feature-domain correlation for a coarse candidate in `Fast`
    /// mode (default 0.12).
    pub coarse_threshold: f32,
    /// Minimum band-envelope NCC for a coarse candidate in `Full` mode
    /// (default 0.15).
    pub band_threshold: f32,
    /// Coarse candidates verified per clip, best first (default 32).
    pub max_candidates: usize,
    /// Run the warped (speed/tempo/partial) detector (default true).
    pub speed_search: bool,
    /// Largest speed/tempo deviation searched, as a fraction (default 0.04 = +-4%).
    pub max_speed_deviation: f32,
    /// Minimum feature correlation of a clip segment to vote (default 0.45).
    pub segment_threshold: f32,
    /// Minimum mean piecewise NCC for a warped/partial match (default 0.45).
    pub warped_threshold: f32,
    /// Warped candidates verified per clip, best first (default 8).
    pub max_warped_candidates: usize,
    /// Shortest matched part reported for a partial use (s, default 1.5).
    pub min_partial_s: f64,
    /// Most occurrences reported per clip (default 1000).
    pub max_occurrences: usize,
    /// Two occurrences of a clip must start at least this fraction of the clip
    /// length apart (default 0.75).
    pub min_separation: f64,
    /// Shortest accepted clip (s, default 0.25).
    pub min_clip_s: f64,
    /// Adaptive threshold: a clip's threshold is at least this many standard
    /// deviations of its NCC against clip-free audio of the episode's spectrum
    /// (default 10.0; 0 disables; not used in exhaustive mode). Calibrated on
    /// clip-free audio: see docs/matcher.md.
    pub null_sigmas: f32,
    /// A whole-clip NCC hit at least this confident is certain (default 0.6): the
    /// local check below does not test it, and the warped detector neither
    /// re-verifies nor re-times it. Weaker hits may be a speed-changed copy seen at the
    /// wrong speed and lag.
    pub sure_ncc: f32,
    /// Local check of weak hits of short clips: a hit below `sure_ncc` of a clip shorter
    /// than `local_check_max_clip_s` must be at least this many times the largest |NCC|
    /// of the clip within 10 s around it, the clip's other hits left out (default 1.35;
    /// 0 disables). Measured: true hits 1.52 or more, clip-free false positives
    /// (a tonal sting over music with its notes) 1.09-1.21.
    pub local_check_ratio: f32,
    /// Clips this long or longer (s) skip the local check (default 3.0).
    pub local_check_max_clip_s: f64,
    /// A whole-clip hit becomes a partial occurrence when the run of its 256 ms
    /// blocks that match covers less than this fraction of a clip of at least
    /// 2 x `min_partial_s` (default 0.9).
    pub whole_min_coverage: f64,
    /// Warped detector: a 64 ms piece of the re-timed clip matches when its NCC is at
    /// least this (default 0.3); the matched part is the longest run of such pieces.
    pub piece_threshold: f32,
    /// Warped detector, clips of one 2 s segment: a candidate is dropped when no point
    /// of the 1% speed grid reaches this mean piece NCC in the coarse timing pass
    /// (default 0.4; a real copy scores over 0.6, unrelated audio 0.2-0.3).
    pub short_clip_speed_threshold: f32,
    /// Warped detector: a weak whole-clip hit (below `sure_ncc`) is re-timed by the
    /// warped measurement of the same event when that scores at least this much higher
    /// (default 0.03) ...
    pub retime_margin: f32,
    /// ... at a speed at least this far from 1 (default 0.01) ...
    pub retime_min_speed_deviation: f32,
    /// ... for clips at least this long (s, default 2.0).
    pub retime_min_clip_s: f64,
}

/// A [`MatchConfig`] value out of its range.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("matcher setting {name} = {value}: {why}")]
pub struct ConfigError {
    /// The setting's field name.
    pub name: &'static str,
    /// The value given.
    pub value: String,
    /// What is allowed.
    pub why: &'static str,
}

impl MatchConfig {
    /// Checks every setting's range, so a typo in a configuration file is an error
    /// instead of a matcher that silently finds nothing (or everything).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let unit: [(&'static str, f32); 11] = [
            ("threshold", self.threshold),
            ("coarse_threshold", self.coarse_threshold),
            ("band_threshold", self.band_threshold),
            ("segment_threshold", self.segment_threshold),
            ("warped_threshold", self.warped_threshold),
            ("sure_ncc", self.sure_ncc),
            ("piece_threshold", self.piece_threshold),
            (
                "short_clip_speed_threshold",
                self.short_clip_speed_threshold,
            ),
            ("retime_margin", self.retime_margin),
            (
                "retime_min_speed_deviation",
                self.retime_min_speed_deviation,
            ),
            ("max_speed_deviation", self.max_speed_deviation),
        ];
        for (name, v) in unit {
            if !(0.0..=1.0).contains(&v) {
                return Err(ConfigError {
                    name,
                    value: v.to_string(),
                    why: "must be within 0..1",
                });
            }
        }
        let non_negative: [(&'static str, f64); 8] = [
            ("null_sigmas", f64::from(self.null_sigmas)),
            ("local_check_ratio", f64::from(self.local_check_ratio)),
            ("local_check_max_clip_s", self.local_check_max_clip_s),
            ("min_partial_s", self.min_partial_s),
            ("min_separation", self.min_separation),
            ("min_clip_s", self.min_clip_s),
            ("retime_min_clip_s", self.retime_min_clip_s),
            ("whole_min_coverage", self.whole_min_coverage),
        ];
        for (name, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ConfigError {
                    name,
                    value: v.to_string(),
                    why: "must be a finite number >= 0",
                });
            }
        }
        if self.whole_min_coverage > 1.0 {
            return Err(ConfigError {
                name: "whole_min_coverage",
                value: self.whole_min_coverage.to_string(),
                why: "must be within 0..1",
            });
        }
        for (name, v) in [
            ("max_candidates", self.max_candidates),
            ("max_warped_candidates", self.max_warped_candidates),
            ("max_occurrences", self.max_occurrences),
        ] {
            if v == 0 {
                return Err(ConfigError {
                    name,
                    value: "0".into(),
                    why: "must be at least 1",
                });
            }
        }
        Ok(())
    }
}

impl Default for MatchConfig {
    fn default() -> Self {
        Self {
            mode: MatchMode::Full,
            threshold: 0.26,
            coarse_threshold: 0.12,
            band_threshold: 0.15,
            max_candidates: 32,
            speed_search: true,
            max_speed_deviation: 0.04,
            segment_threshold: 0.45,
            warped_threshold: 0.45,
            max_warped_candidates: 8,
            min_partial_s: 1.5,
            max_occurrences: 1000,
            min_separation: 0.75,
            min_clip_s: 0.25,
            null_sigmas: 10.0,
            sure_ncc: 0.6,
            local_check_ratio: 1.35,
            local_check_max_clip_s: 3.0,
            whole_min_coverage: 0.9,
            piece_threshold: 0.3,
            short_clip_speed_threshold: 0.4,
            retime_margin: 0.03,
            retime_min_speed_deviation: 0.01,
            retime_min_clip_s: 2.0,
        }
    }
}

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

/// Local CFAR check ([`Matcher::stand_out_locally`]): half-width of the surrounding
/// stretch (s).
const LOCAL_RADIUS_S: f64 = 10.0;

/// Episode section length (samples) for the null-distribution estimate.
const SECTION: usize = 30 * ANALYSIS_RATE as usize;

pub(crate) fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

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

    /// Detection threshold for one clip: the configured threshold, raised to
    /// `null_sigmas` standard deviations of the NCC that this clip would have
    /// against the most similar (in spectrum) section of the episode. Tonal
    /// clips against music get a higher threshold, broadband ones keep the
    /// configured one (a CFAR detector with an analytic null).
    fn clip_threshold(&self, clip: &PreparedClip) -> f32 {
        self.config
            .threshold
            .max(self.config.null_sigmas * self.null_sigma(clip))
    }

    /// Largest analytic null standard deviation of the clip's NCC over the
    /// episode sections (0 when the adaptive threshold is off).
    fn null_sigma(&self, clip: &PreparedClip) -> f32 {
        if self.section_psd.is_empty() {
            return 0.0;
        }
        let p = ncc::welch_psd(&clip.samples);
        self.section_psd
            .iter()
            .map(|s| ncc::null_sigma(&p, s, clip.len()))
            .fold(0.0f32, f32::max)
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
        let rms = p.norm / (clip.len() as f64).sqrt();
        let rms_db = 20.0 * (rms.max(1e-30)).log10() as f32;
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

    /// The clip as compared with the (whitened) episode.
    fn comparable(&self, p: &PreparedClip) -> PreparedClip {
        match &self.whitener {
            Some(w) => PreparedClip::new(&w.apply(&p.samples)),
            None => p.clone(),
        }
    }

    /// Cross-clip annotation for clips that resemble each other: a weaker
    /// occurrence of clip B that overlaps a stronger occurrence of clip A is
    /// marked `also_explained_by` A when its confidence is explained by A alone,
    /// i.e. when it is not above `rho x confidence(A) + margin`, where `rho` is the
    /// NCC of clip B against clip A itself at the same relative lag. It is never
    /// removed: B's audio may really be there (a sting cut from a theme plays
    /// whenever the theme does), and a clip's answer must not depend on which other
    /// clips are matched with it (issue 20).
    fn explain_away<L: AsRef<str> + Sync, S: AsRef<[f32]> + Sync>(
        &self,
        clips: &[(L, S)],
        mut res: Vec<Result<ClipResult, MatchError>>,
    ) -> Vec<Result<ClipResult, MatchError>> {
        const MARGIN: f32 = 0.1;
        // (clip, occurrence, start, end, confidence, speed) of every occurrence.
        let mut all: Vec<(usize, usize, f64, f64, f32, f32)> = Vec::new();
        for (ci, r) in res.iter().enumerate() {
            if let Ok(r) = r {
                for (oi, o) in r.occurrences.iter().enumerate() {
                    let start = o.anchor_s();
                    let end = start + r.clip_duration_s / f64::from(o.speed.max(0.01));
                    all.push((ci, oi, start, end, o.confidence, o.speed.max(0.01)));
                }
            }
        }
        if all.len() < 2 {
            return res;
        }
        all.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        // Pairs (weak, strong) of different clips whose spans overlap by half the shorter.
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                if all[j].2 >= all[i].3 {
                    break;
                }
                let (a, b) = (&all[i], &all[j]);
                if a.0 == b.0 {
                    continue;
                }
                let ov = a.3.min(b.3) - a.2.max(b.2);
                if ov < 0.5 * (a.3 - a.2).min(b.3 - b.2) {
                    continue;
                }
                if a.4 < b.4 {
                    pairs.push((i, j));
                } else if b.4 < a.4 {
                    pairs.push((j, i));
                }
            }
        }
        if pairs.is_empty() {
            return res;
        }
        let explained: Vec<bool> = pairs
            .par_iter()
            .map(|&(w, s)| {
                let (wc, sc) = (all[w].0, all[s].0);
                let (Ok(wp), Ok(sp)) = (
                    self.validate(clips[wc].1.as_ref(), ""),
                    self.validate(clips[sc].1.as_ref(), ""),
                ) else {
                    return false;
                };
                // The weak clip as it would sound in the strong clip's own
                // timeline (both may be speed-changed copies).
                let ratio = f64::from(all[w].5) / f64::from(all[s].5);
                let wp = if (ratio - 1.0).abs() > 1e-4 {
                    PreparedClip::new(&crate::dsp::change_speed(&wp.samples, ratio))
                } else {
                    wp
                };
                let (wp, sp) = (self.comparable(&wp), self.comparable(&sp));
                // Clip A (strong) placed in silence padded by clip B's length on both sides.
                let pad = wp.len();
                let mut host = vec![0.0f32; sp.len() + 2 * pad];
                host[pad..pad + sp.len()].copy_from_slice(&sp.samples);
                let lag =
                    (all[w].2 - all[s].2) * f64::from(all[s].5) * ANALYSIS_RATE as f64 + pad as f64;
                let rho =
                    coarse::exact_ncc(&host[..], &wp, lag, 32).map_or(0.0, |p| p.ncc.max(0.0));
                all[w].4 <= rho * all[s].4 + MARGIN
            })
            .collect();
        // (weak clip, weak occurrence, strong clip) of every explained pair.
        let mut notes: Vec<(usize, usize, usize)> = pairs
            .iter()
            .zip(&explained)
            .filter(|(_, d)| **d)
            .map(|(p, _)| (all[p.0].0, all[p.0].1, all[p.1].0))
            .collect();
        notes.sort_unstable();
        notes.dedup();
        for (ci, oi, by) in notes {
            if let Some(Ok(r)) = res.get_mut(ci) {
                if let Some(o) = r.occurrences.get_mut(oi) {
                    o.also_explained_by.push(clips[by].0.as_ref().to_owned());
                }
            }
        }
        res
    }

    /// Local CFAR check of a short clip's weak whole-clip hits: a hit must stand out from
    /// the clip's own NCC over the surrounding [`LOCAL_RADIUS_S`] seconds (its other hits
    /// left out) by [`MatchConfig::local_check_ratio`]. A short tonal sting matched against music
    /// with the same notes correlates with that music all along (the hit is just the
    /// highest of many similar values); a real copy stands out from whatever plays
    /// around it. Confident hits and clips of 3 s or more are not checked.
    fn stand_out_locally(&self, clip: &PreparedClip, hits: Vec<ncc::Peak>) -> Vec<ncc::Peak> {
        let l = clip.len();
        if l as f64 >= self.config.local_check_max_clip_s * ANALYSIS_RATE as f64
            || self.config.local_check_ratio <= 0.0
        {
            return hits;
        }
        let radius = (LOCAL_RADIUS_S * ANALYSIS_RATE as f64) as usize;
        let keep: Vec<bool> = hits
            .iter()
            .map(|h| {
                if h.ncc >= self.config.sure_ncc {
                    return true;
                }
                let Some((lo, curve)) =
                    ncc::local_curve(&self.episode, clip, h.pos.round() as i64, radius)
                else {
                    return true;
                };
                let background = curve
                    .iter()
                    .enumerate()
                    .filter(|(t, _)| {
                        let at = (lo + t) as f64;
                        hits.iter().all(|o| (at - o.pos).abs() > l as f64)
                    })
                    .map(|(_, v)| v.abs())
                    .fold(0.0f32, f32::max);
                h.ncc >= self.config.local_check_ratio * background
            })
            .collect();
        hits.into_iter()
            .zip(keep)
            .filter_map(|(h, k)| k.then_some(h))
            .collect()
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
                let thr = self.clip_threshold(&p);
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
                let (hits, capped) = verify_in_batches(cands, cfg, p.len(), list_full, |c| {
                    // The band envelope of a tonal clip has several lobes (beats
                    // between its partials): search a few of them (short clips,
                    // mostly tonal stings, over +-40 ms: their FFTs are small).
                    let r = (c.width as usize).max(verify_radius(p.len()));
                    ncc::local_ncc(&self.episode, &p, c.pos.round() as i64, r)
                        .filter(|k| k.ncc >= thr)
                });
                let hits = self.stand_out_locally(&p, hits);
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
                        "{}: {} coarse candidates, threshold {thr:.3}, sigma {:.4}, verify {:.3} s, warped {:.3} s",
                        label.as_ref(),
                        ncands,
                        self.null_sigma(&p),
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
                let thr = self.clip_threshold(&p);
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
                let (hits, c) = verify_in_batches(cands, cfg, p.len(), list_full, |c| {
                    let center = (c.pos.round() as i64) * HOP as i64;
                    if let Some((a, pc)) = &probe {
                        match ncc::local_ncc(&self.episode, pc, center + *a as i64, 2 * HOP) {
                            Some(pk) if pk.ncc >= 0.5 * thr => {}
                            _ => return None,
                        }
                    }
                    ncc::local_ncc(&self.episode, &p, center, 2 * HOP).filter(|pk| pk.ncc >= thr)
                });
                capped = c;
                occ.extend(
                    hits.into_iter()
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

/// Length of a clip's ranked coarse candidate list: enough to reach
/// `max_occurrences` hits with one batch of misses to spare.
fn max_kept(cfg: &MatchConfig) -> usize {
    cfg.max_occurrences
        .saturating_add(cfg.max_candidates.max(1))
}

/// Verifies coarse candidates best first, in batches of `max_candidates`: the first
/// batch always, each further batch only while the previous one found an occurrence,
/// until more than `max_occurrences` distinct hits are found. A clip played 120 times
/// gets its 120 copies verified; a clip played once costs one batch, as before (the
/// old matcher stopped after one batch: at most 32 whole-clip hits per clip). Returns
/// the hits (suppressed to one per `min_separation` clip lengths, sorted by position)
/// and whether the search stopped at the end of a full candidate list while still
/// finding occurrences (the answer may be incomplete: reported as the limit).
fn verify_in_batches<F>(
    mut cands: Vec<ncc::Peak>,
    cfg: &MatchConfig,
    len: usize,
    list_full: bool,
    verify: F,
) -> (Vec<ncc::Peak>, bool)
where
    F: Fn(&ncc::Peak) -> Option<ncc::Peak>,
{
    cands.sort_by(|a, b| b.ncc.total_cmp(&a.ncc).then(a.pos.total_cmp(&b.pos)));
    let batch = cfg.max_candidates.max(1);
    let mut hits: Vec<ncc::Peak> = Vec::new();
    let (mut verified, mut last_found) = (0usize, false);
    for chunk in cands.chunks(batch) {
        let before = hits.len();
        hits.extend(chunk.iter().filter_map(&verify));
        verified += chunk.len();
        last_found = hits.len() > before;
        if !last_found {
            break;
        }
        let distinct = ncc::nms(
            hits.clone(),
            len,
            cfg.min_separation,
            cfg.max_occurrences.saturating_add(1),
        );
        if distinct.len() > cfg.max_occurrences {
            break;
        }
    }
    let capped = list_full && verified == cands.len() && last_found;
    (ncc::nms(hits, len, cfg.min_separation, usize::MAX), capped)
}

/// Applies `max_occurrences`: when more occurrences were found, the most confident
/// are kept (ties: the earlier) and the limit is reported. Sorted by offset.
fn keep_most_confident(
    mut occ: Vec<Occurrence>,
    max_occurrences: usize,
    capped: bool,
) -> (Vec<Occurrence>, bool) {
    let over = occ.len() > max_occurrences;
    if over {
        occ.sort_by(|a, b| {
            b.confidence
                .total_cmp(&a.confidence)
                .then(a.offset_s.total_cmp(&b.offset_s))
        });
        occ.truncate(max_occurrences);
    }
    occ.sort_by(|a, b| a.offset_s.total_cmp(&b.offset_s));
    (occ, over || capped)
}

fn unreachable_index() -> &'static FeatureIndex {
    // Fast mode always builds the index in `from_samples`.
    static EMPTY: std::sync::OnceLock<FeatureIndex> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| FeatureIndex::new(&[]))
}

/// Checks which part of the clip really matches at a whole-clip NCC hit
/// (piecewise NCC at the found lag). A hit whose matching run covers less than
/// 90% of the clip becomes a partial occurrence (re-timed by NCC of that part),
/// or is dropped if the run is shorter than `min_partial_s`.
fn refine_extent<S: Samples + ?Sized>(
    episode: &S,
    clip: &PreparedClip,
    pos: f64,
    ncc_v: f32,
    cfg: &MatchConfig,
) -> Option<Occurrence> {
    use speed::{norm_of, piece_ncc, PIECE};
    let l = clip.len();
    let dur = l as f64 / ANALYSIS_RATE as f64;
    const BLK: usize = 4 * PIECE;
    if dur < 2.0 * cfg.min_partial_s || l < 4 * BLK {
        return Some(whole(pos, ncc_v, dur));
    }
    let positions: Vec<usize> = (0..=l - BLK).step_by(BLK).collect();
    let norms: Vec<f64> = positions
        .iter()
        .map(|&p| norm_of(&clip.samples[p..p + BLK]))
        .collect();
    let mut sorted = norms.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = sorted[sorted.len() / 2];
    let good_thr = (0.35 * ncc_v).max(0.1);
    // +1 good, -1 bad, 0 quiet.
    let marks: Vec<i8> = positions
        .iter()
        .zip(&norms)
        .map(|(&cp, &n)| {
            if n < 0.3 * median || n <= 0.0 {
                return 0;
            }
            match piece_ncc(episode, &clip.samples[cp..cp + BLK], n, pos + cp as f64, 4) {
                Some((_, v)) if v >= good_thr => 1,
                _ => -1,
            }
        })
        .collect();
    // Longest run of good blocks tolerating single bad blocks.
    let (mut best, mut start, mut last_good, mut bad) =
        ((0usize, 0usize), None::<usize>, 0usize, 0usize);
    for (j, m) in marks.iter().enumerate() {
        match m {
            1 => {
                start.get_or_insert(j);
                last_good = j;
                bad = 0;
            }
            -1 => {
                bad += 1;
                if bad > 1 {
                    start = None;
                }
            }
            _ => {}
        }
        if let Some(s) = start {
            if last_good + 1 - s > best.1 - best.0 {
                best = (s, last_good + 1);
            }
        }
    }
    if best.1 <= best.0 {
        return None;
    }
    // Quiet pieces next to the run belong to it.
    while best.0 > 0 && marks[best.0 - 1] == 0 {
        best.0 -= 1;
    }
    while best.1 < marks.len() && marks[best.1] == 0 {
        best.1 += 1;
    }
    let a = positions[best.0];
    let b = if best.1 == positions.len() {
        l
    } else {
        positions[best.1 - 1] + BLK
    };
    let a = if best.0 == 0 { 0 } else { a };
    if (b - a) as f64 >= cfg.whole_min_coverage * l as f64 {
        return Some(whole(pos, ncc_v, dur));
    }
    let part_s = (b - a) as f64 / ANALYSIS_RATE as f64;
    if part_s < cfg.min_partial_s {
        return None;
    }
    let sub = PreparedClip::new(&clip.samples[a..b]);
    let pk = ncc::local_ncc(episode, &sub, (pos + a as f64).round() as i64, 16)?;
    if pk.ncc < cfg.threshold {
        return None;
    }
    Some(Occurrence {
        offset_s: round_ms(pk.pos / ANALYSIS_RATE as f64),
        confidence: pk.ncc.clamp(0.0, 1.0),
        speed: 1.0,
        clip_start_s: round_ms(a as f64 / ANALYSIS_RATE as f64),
        clip_end_s: round_ms(b as f64 / ANALYSIS_RATE as f64),
        detector: Detector::Ncc,
        also_explained_by: Vec::new(),
    })
}

fn whole(pos: f64, ncc: f32, dur: f64) -> Occurrence {
    Occurrence {
        offset_s: round_ms(pos / ANALYSIS_RATE as f64),
        confidence: ncc.clamp(0.0, 1.0),
        speed: 1.0,
        clip_start_s: 0.0,
        clip_end_s: round_ms(dur),
        detector: Detector::Ncc,
        also_explained_by: Vec::new(),
    }
}

/// Merges detections of the same event by different detectors (the whole-clip NCC and
/// the warped detector can both report one occurrence, a few ms apart): two occurrences
/// whose whole-clip anchors (where the clip's start falls in the episode) are closer than
/// `min_separation` x the clip's duration are one event, and the more confident is kept.
fn merge_same_events(mut occ: Vec<Occurrence>, dur: f64, min_separation: f64) -> Vec<Occurrence> {
    // A warped detection at unchanged speed of an event the whole-clip NCC
    // also found is that event measured piecewise (its mean piece NCC is
    // higher than the whole-clip NCC, its extent shorter under noise): the
    // whole-clip NCC measurement is kept.
    let class =
        |o: &Occurrence| u8::from(o.detector == Detector::Warped && (o.speed - 1.0).abs() < 0.005);
    occ.sort_by(|a, b| {
        class(a)
            .cmp(&class(b))
            .then(b.confidence.total_cmp(&a.confidence))
            .then(a.offset_s.total_cmp(&b.offset_s))
    });
    let mut kept: Vec<Occurrence> = Vec::with_capacity(occ.len());
    for o in occ {
        if kept
            .iter()
            .all(|k| (k.anchor_s() - o.anchor_s()).abs() >= min_separation * dur)
        {
            kept.push(o);
        }
    }
    kept
}
