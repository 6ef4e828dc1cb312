//! Which part of a clip an occurrence covers: whole, partial (re-timed) or dropped,
//! and merging of one event reported by both detectors.

use super::{round_ms, Detector, MatchConfig, Occurrence};
use crate::ncc::{self, PreparedClip};
use crate::store::Samples;
use crate::ANALYSIS_RATE;

/// Checks which part of the clip really matches at a whole-clip NCC hit
/// (piecewise NCC at the found lag). A hit whose matching run covers less than
/// 90% of the clip becomes a partial occurrence (re-timed by NCC of that part),
/// or is dropped if the run is shorter than `min_partial_s`.
pub(super) fn refine_extent<S: Samples + ?Sized>(
    episode: &S,
    clip: &PreparedClip,
    pos: f64,
    ncc_v: f32,
    cfg: &MatchConfig,
) -> Option<Occurrence> {
    use crate::speed::{norm_of, piece_ncc, PIECE};
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

pub(super) fn whole(pos: f64, ncc: f32, dur: f64) -> Occurrence {
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
pub(super) fn merge_same_events(
    mut occ: Vec<Occurrence>,
    dur: f64,
    min_separation: f64,
) -> Vec<Occurrence> {
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
