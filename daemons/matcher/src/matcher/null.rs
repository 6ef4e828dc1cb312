//! A clip's whole-clip threshold (a CFAR detector with an analytic null), and the
//! verification of its candidates against it with its own copies censored.
//!
//! The null of a clip is the NCC it would have against clip-free audio of each 30 s
//! section's spectrum. A section that holds a copy of the clip is not clip-free: a 1 s
//! tonal sting spliced at full level into 30 s of music puts its partials into the
//! section's spectrum, and the null sigma of the sting against that section rose to
//! 0.08-0.11, a threshold of 0.83-1.07: the sting's other copy, mixed 3 dB under music
//! (NCC 0.66), was lost, and the answer for one copy depended on whether the episode held
//! another (`archivist sample`, seed 11: 12 of 16 episodes; outside test 17h, F1). So the
//! sure copies (NCC at least `sure_ncc`, verified even where the threshold is above that)
//! are censored from the estimate (the frames of their sections that overlap them are
//! left out) and the threshold is taken again, until no new sure copy is found: the threshold a weak copy faces is the one it would
//! face in the episode without the clip's clear copies. Weak hits are not censored: on
//! held-out split A, censoring them let two near-identical stings of one sound theme
//! lower each other's thresholds in turn (each reported at the other's copies).

use super::{candidates::verify_in_batches, MatchConfig, Matcher, SECTION};
use crate::ncc::{self, PreparedClip};
use crate::store::Samples;
use crate::ANALYSIS_RATE;

/// Most threshold re-estimates per clip (each censors the copies found so far; the
/// threshold only falls, so this bounds the cost, not the answer in practice: two or
/// three rounds settle it).
const MAX_ROUNDS: usize = 6;

/// Hits of one clip's whole-clip verification.
pub(super) struct Verified {
    /// The hits (suppressed, sorted by position).
    pub hits: Vec<ncc::Peak>,
    /// The candidate list ran out while batches were still finding copies.
    pub capped: bool,
    /// The threshold the hits passed.
    pub threshold: f32,
}

impl Matcher {
    /// The fixed floor of a clip's whole-clip threshold: `long_clip_threshold` for
    /// clips of at least `long_clip_min_s`, else `threshold`.
    pub(super) fn floor(&self, len: usize) -> f32 {
        let cfg = &self.config;
        if len as f64 >= cfg.long_clip_min_s * ANALYSIS_RATE as f64 {
            cfg.long_clip_threshold
        } else {
            cfg.threshold
        }
    }

    /// Largest analytic null standard deviation of the clip's NCC (normalised PSD
    /// `clip_psd`, `len` samples) over the episode sections, the sample ranges
    /// `censored` left out of them (0 when the adaptive threshold is off).
    pub(super) fn null_sigma(
        &self,
        clip_psd: &[f32],
        len: usize,
        censored: &[(usize, usize)],
    ) -> f32 {
        self.section_psd
            .iter()
            .enumerate()
            .map(|(i, psd)| {
                let (lo, hi) = (i * SECTION, ((i + 1) * SECTION).min(self.episode.len()));
                let inside: Vec<(usize, usize)> = censored
                    .iter()
                    .filter(|&&(a, b)| a < hi && lo < b)
                    .map(|&(a, b)| (a.saturating_sub(lo), b.min(hi) - lo))
                    .collect();
                if inside.is_empty() {
                    ncc::null_sigma(clip_psd, psd, len)
                } else {
                    let section = self.episode.segment(lo, hi);
                    ncc::null_sigma(clip_psd, &ncc::welch_psd_censored(&section, &inside), len)
                }
            })
            .fold(0.0f32, f32::max)
    }

    /// Detection threshold for a clip (normalised PSD `clip_psd`, `len` samples): its
    /// floor ([`Self::floor`]), raised to `null_sigmas` standard deviations of the NCC
    /// it would have against the most similar (in spectrum) section of the episode,
    /// the `censored` ranges left out. Tonal clips against music get a higher
    /// threshold, broadband ones keep the floor.
    pub(super) fn threshold_for(
        &self,
        clip_psd: &[f32],
        len: usize,
        censored: &[(usize, usize)],
    ) -> f32 {
        if self.section_psd.is_empty() {
            return self.floor(len);
        }
        self.floor(len)
            .max(self.config.null_sigmas * self.null_sigma(clip_psd, len, censored))
    }

    /// Verifies a clip's coarse candidates (`verify(candidate, threshold)`, best first in
    /// batches: [`verify_in_batches`]) against its threshold, re-estimated with the sure
    /// copies found censored until it finds no new one (see the module doc).
    pub(super) fn verify_censored<F>(
        &self,
        clip: &PreparedClip,
        cands: Vec<ncc::Peak>,
        list_full: bool,
        verify: F,
    ) -> Verified
    where
        F: Fn(&ncc::Peak, f32) -> Option<ncc::Peak>,
    {
        let cfg: &MatchConfig = &self.config;
        let len = clip.len();
        let floor = self.floor(len);
        let psd = (!self.section_psd.is_empty()).then(|| ncc::welch_psd(&clip.samples));
        let mut threshold = psd
            .as_ref()
            .map_or(floor, |p| self.threshold_for(p, len, &[]));
        let mut round = 0;
        loop {
            round += 1;
            // Sure copies (`sure_ncc`) are verified even under a threshold above them (a
            // tonal sting's section holding its own spliced copy gave thresholds over 1):
            // they are what gets censored. Only sure copies are: a weak hit may be a
            // similar clip (a sting of the same sound theme) whose audio belongs in the null.
            let (peaks, capped) = verify_in_batches(cands.clone(), cfg, len, list_full, |c| {
                verify(c, threshold.min(cfg.sure_ncc))
            });
            let censored: Vec<(usize, usize)> = peaks
                .iter()
                .filter(|h| h.ncc >= cfg.sure_ncc)
                .map(|h| {
                    let at = h.pos.round().max(0.0) as usize;
                    (at, at + len)
                })
                .collect();
            let next = match &psd {
                Some(p) if !censored.is_empty() && threshold > floor && round < MAX_ROUNDS => {
                    self.threshold_for(p, len, &censored)
                }
                _ => threshold,
            };
            let hits: Vec<ncc::Peak> = peaks.into_iter().filter(|h| h.ncc >= threshold).collect();
            if std::env::var_os("ARCHIVIST_MATCHER_DEBUG").is_some() {
                eprintln!(
                    "threshold round {round}: {threshold:.3} -> {} hits; re-estimated {next:.3}",
                    hits.len()
                );
            }
            if next >= threshold {
                return Verified {
                    hits,
                    capped,
                    threshold,
                };
            }
            threshold = next;
        }
    }
}
