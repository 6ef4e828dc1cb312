//! Cross-clip check: marks an occurrence that a stronger occurrence of a similar clip
//! explains (`also_explained_by`), without removing it.

use rayon::prelude::*;

use super::{ClipResult, MatchError, Matcher};
use crate::coarse;
use crate::ncc::PreparedClip;
use crate::ANALYSIS_RATE;

impl Matcher {
    /// The clip as compared with the (whitened) episode.
    pub(super) fn comparable(&self, p: &PreparedClip) -> PreparedClip {
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
    pub(super) fn explain_away<L: AsRef<str> + Sync, S: AsRef<[f32]> + Sync>(
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
}
