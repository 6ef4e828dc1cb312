//! What the matcher answers: occurrences, per-clip results and per-clip errors.

use serde::{Deserialize, Serialize};

use crate::decode::DecodeError;

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
    /// The clip is digital silence (or nearly: RMS below -80 dBFS), or a constant (DC)
    /// offset, which holds nothing to match either.
    #[error("clip {clip}: silent (RMS {rms_db:.1} dBFS, any constant offset not counted)")]
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

/// Rounds seconds to 1 ms, the precision of every reported time.
pub(crate) fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}
