//! The matcher's settings: mode, thresholds and limits, with their ranges.

use serde::{Deserialize, Serialize};

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
    /// Floor of the whole-clip threshold for clips of at least `long_clip_min_s`
    /// (default 0.2), used instead of `threshold` (the adaptive threshold still
    /// applies). The 0.26 floor guards short tonal clips against music sharing their
    /// notes; a clip of several seconds mixed 6 dB under music of the same
    /// synthesiser scores 0.22-0.24 whitened (20+ sigma of its null) and was lost
    /// under it (issue 20, split A). Calibrated on split A: see docs/matcher.md.
    pub long_clip_threshold: f32,
    /// Clips this long or longer (s) use `long_clip_threshold` (default 3.0).
    pub long_clip_min_s: f64,
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
    /// Drop a whole-clip hit that is not the highest point of its own NCC curve within
    /// half a clip: a sidelobe of a stronger (possibly suppressed) copy, never a start
    /// (default true; `false` only to measure the rule against its absence in one run).
    pub sidelobe_check: bool,
    /// Shortest accepted clip (s, default 0.25).
    pub min_clip_s: f64,
    /// Adaptive threshold: a clip's threshold is at least this many standard
    /// deviations of its NCC against clip-free audio of the episode's spectrum
    /// (default 10.0; 0 disables; not used in exhaustive mode). Calibrated on
    /// clip-free audio: see docs/matcher.md.
    pub null_sigmas: f32,
    /// A whole-clip NCC hit at least this confident is certain (default 0.6): the
    /// local check below does not test it, and the warped detector neither
    /// re-verifies nor re-times it; its stretch is left out of the clip's adaptive
    /// threshold (`null_sigmas`: a section holding the clip is not clip-free audio).
    /// Weaker hits may be a speed-changed copy seen at the wrong speed and lag.
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
        let unit: [(&'static str, f32); 12] = [
            ("threshold", self.threshold),
            ("long_clip_threshold", self.long_clip_threshold),
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
        let non_negative: [(&'static str, f64); 9] = [
            ("long_clip_min_s", self.long_clip_min_s),
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
            long_clip_threshold: 0.2,
            long_clip_min_s: 3.0,
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
            sidelobe_check: true,
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
