//! Archivist clip matcher: finds every occurrence of known short audio clips
//! (drops, jingles, stings, themes; 1-30 s) inside long episodes.
//!
//! Pipeline (see `docs/matcher.md` for the design and measurements):
//!
//! 1. [`decode`]: any supported file (MP3, AAC/M4A, Ogg Vorbis, FLAC, WAV)
//!    is decoded with symphonia (gapless on), all channels are mixed to mono
//!    and resampled to [`ANALYSIS_RATE`] (8 kHz).
//! 2. [`Matcher::new`] analyses the episode once: it computes a compact
//!    band-energy feature matrix (62.5 frames/s, for the warped detector),
//!    fits a whitening (linear-prediction error) filter on the episode and
//!    keeps the whitened 8 kHz samples as 16-bit integers (half the memory
//!    of f32; the detectors read the stretches they need as f32).
//! 3. [`Matcher::find`] / [`Matcher::find_all`] run, per clip (whitened with
//!    the same filter), a coarse pass (the correlation envelope in the
//!    clip's strongest frequency band, from episode block spectra shared by
//!    all clips) whose best candidates are verified and timed by the exact
//!    energy-normalised waveform cross-correlation (NCC) at 8 kHz, plus a
//!    segment-voting detector that survives speed/tempo changes of a few
//!    percent and partial (truncated) uses of a clip, verified by piecewise
//!    NCC on the re-timed clip. `find_all` finally drops detections that a
//!    stronger detection of a similar clip explains.
//!    [`MatchMode::Exhaustive`] instead runs one full-resolution FFT NCC per
//!    clip on the raw signals (the reference baseline).
//! 4. [`report`] renders the results as a table or JSON.
//!
//! Everything is deterministic: the same inputs give the same outputs
//! (parallel work is merged in a fixed order).
#![deny(missing_docs)]

mod coarse;
pub mod decode;
pub mod dsp;
mod features;
mod matcher;
mod ncc;
pub mod report;
mod speed;
mod store;

pub use matcher::{
    ClipResult, ConfigError, Detector, MatchConfig, MatchError, MatchMode, Matcher, Occurrence,
};

/// Sample rate (Hz) of all analysis signals: episodes and clips are mono f32 at this rate.
pub const ANALYSIS_RATE: u32 = 8000;
