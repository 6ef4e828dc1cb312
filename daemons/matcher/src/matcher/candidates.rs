//! Verifying coarse candidates: batches until the occurrence limit, the local CFAR
//! check of short clips' weak hits, and the `max_occurrences` limit.

use super::{MatchConfig, Matcher, Occurrence};
use crate::ncc::{self, PreparedClip};
use crate::ANALYSIS_RATE;

/// Local CFAR check ([`Matcher::stand_out_locally`]): half-width of the surrounding
/// stretch (s).
const LOCAL_RADIUS_S: f64 = 10.0;

/// How far around a hit its own NCC curve is looked at for a stronger start
/// ([`Matcher::not_sidelobes`]): half the clip, at most this (s).
const SIDELOBE_RADIUS_MAX_S: f64 = 2.0;
/// A value this close to the hit (s) is the hit's own peak, not another start.
const SIDELOBE_OWN_PEAK_S: f64 = 0.02;
/// How much higher (NCC) a nearby value must be to make the hit a sidelobe.
const SIDELOBE_MARGIN: f32 = 0.02;

impl Matcher {
    /// Drops a hit that is a sidelobe of a suppressed start: its own NCC curve, within
    /// half a clip of it, is higher elsewhere (more than [`SIDELOBE_OWN_PEAK_S`] away),
    /// at a place a stronger hit's `min_separation` window covers. Two
    /// copies of a clip closer than `min_separation`: the coarse search kept the
    /// stronger one and suppressed the other's peak, and a sidelobe of the suppressed
    /// copy just outside the window was verified and reported, 88 to 500 ms before the
    /// true start, where no copy begins (outside 18l H1). Measured on held-out split B
    /// against its absence in one build (docs/matcher.md, run K).
    pub(super) fn not_sidelobes(
        &self,
        clip: &PreparedClip,
        hits: Vec<ncc::Peak>,
    ) -> Vec<ncc::Peak> {
        if !self.config.sidelobe_check {
            return hits;
        }
        let rate = ANALYSIS_RATE as f64;
        let radius = (clip.len() / 2).min((SIDELOBE_RADIUS_MAX_S * rate) as usize);
        let sep = (clip.len() as f64 * self.config.min_separation).max(1.0);
        let own = SIDELOBE_OWN_PEAK_S * rate;
        let keep: Vec<bool> = hits
            .iter()
            .map(|h| {
                // Only a hit with a stronger one near enough can be such a sidelobe: an
                // isolated hit (almost all) costs no curve.
                let reach = sep + radius as f64;
                let crowded = hits.iter().any(|o| {
                    o.ncc > h.ncc && (o.pos - h.pos).abs() > own && (o.pos - h.pos).abs() < reach
                });
                if !crowded {
                    return true;
                }
                let Some((lo, curve)) =
                    ncc::local_curve(&self.episode, clip, h.pos.round() as i64, radius)
                else {
                    return true;
                };
                // Higher elsewhere, where a stronger kept hit suppressed that start:
                // the hit stands for the suppressed copy at the wrong place. (Higher
                // elsewhere with no such neighbour is the broad peak of a changed
                // copy, a tempo change say, and stays.)
                !curve.iter().enumerate().any(|(t, v)| {
                    let at = (lo + t) as f64;
                    (at - h.pos).abs() > own
                        && *v > h.ncc + SIDELOBE_MARGIN
                        && hits.iter().any(|o| {
                            o.ncc > h.ncc && (o.pos - at).abs() < sep && (o.pos - h.pos).abs() > own
                        })
                })
            })
            .collect();
        hits.into_iter()
            .zip(keep)
            .filter_map(|(h, k)| k.then_some(h))
            .collect()
    }

    /// Local CFAR check of a short clip's weak whole-clip hits: a hit must stand out from
    /// the clip's own NCC over the surrounding [`LOCAL_RADIUS_S`] seconds (its other hits
    /// left out) by [`MatchConfig::local_check_ratio`]. A short tonal sting matched against music
    /// with the same notes correlates with that music all along (the hit is just the
    /// highest of many similar values); a real copy stands out from whatever plays
    /// around it. Confident hits and clips of 3 s or more are not checked.
    pub(super) fn stand_out_locally(
        &self,
        clip: &PreparedClip,
        hits: Vec<ncc::Peak>,
    ) -> Vec<ncc::Peak> {
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
}

/// Length of a clip's ranked coarse candidate list: enough to reach
/// `max_occurrences` hits with one batch of misses to spare.
pub(super) fn max_kept(cfg: &MatchConfig) -> usize {
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
pub(super) fn verify_in_batches<F>(
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
    (ncc::nms_verified(hits, len, cfg.min_separation), capped)
}

/// Applies `max_occurrences`: when more occurrences were found, the most confident
/// are kept (ties: the earlier) and the limit is reported. Sorted by offset.
pub(super) fn keep_most_confident(
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
