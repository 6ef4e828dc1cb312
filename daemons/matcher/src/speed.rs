//! Warped detector: speed/tempo changes of a few percent and partial
//! (truncated) uses of a clip.
//!
//! 1. The clip is cut into consecutive 2 s feature segments (a short clip is one
//!    segment). Each segment is correlated with the episode features (shared
//!    block spectra); segments are short enough that a +-4% warp drifts them
//!    by at most +-2.5 frames, so they still correlate.
//! 2. Segment hits vote in a Hough space (clip start time, speed) over a
//!    0.5% speed grid; consistent chains become candidates with a speed
//!    estimate and the covered part of the clip.
//! 3. Each candidate is verified by piecewise NCC at 8 kHz on the re-timed
//!    clip: 64 ms pieces, first a +-100 ms search on a few pieces to fit the
//!    exact time line (offset, speed) robustly, then a +-3 ms search on every
//!    piece along that line. Two hypotheses are tried: *speed* (the clip is
//!    resampled, pitch changes) and *tempo* (pieces keep their pitch, as with
//!    WSOLA/time-stretching). The matched part of the clip is the longest run
//!    of matching pieces; the confidence is the energy-weighted mean piece NCC
//!    over that run.

use std::collections::BTreeMap;

use crate::coarse::Whitener;
use crate::features::{slice, FeatureIndex, Features, HOP};
use crate::matcher::{round_ms, Detector, MatchConfig, Occurrence};
use crate::ncc::{self, PreparedClip};
use crate::store::Samples;
use crate::ANALYSIS_RATE;

/// Segment length and hop (frames).
const SEG: usize = 125;
const SEG_HOP: usize = 125;
/// Most segments correlated per clip.
const MAX_SEGS: usize = 4;
/// Piece length (samples) for piecewise NCC.
pub(crate) const PIECE: usize = 512;
/// Pass-1 search radius (samples) and number of pieces.
const R1: usize = 800;
/// Pass-1 search radius (samples) for short (single-segment) clips, whose
/// start estimate from the feature correlation is less precise.
const R1_SHORT: usize = 1600;
const PASS1_PIECES: usize = 24;
/// Pass-2 search radius (samples).
const R2: usize = 24;

#[derive(Clone, Debug)]
struct Cand {
    /// Episode frame of clip frame 0 under the hypothesis.
    t0: f64,
    speed: f64,
    /// Covered clip frames [lo, hi).
    lo: usize,
    hi: usize,
    score: f32,
    /// The clip is a single segment: the speed is unknown.
    single: bool,
    /// Frames by which the voted part is widened on each side for verification.
    widen: usize,
    /// Spread of the segments' start estimates (frames): smallest at the right speed.
    spread: f64,
}

/// Resampled pieces of a clip as they would look in the (whitened) episode:
/// the raw clip is resampled first and whitened after, like a speed-changed
/// copy in the episode (whitening then resampling would shift the clip's
/// partials against the whitening filter's response).
pub(crate) struct Retimer<'a> {
    /// Raw clip samples and the episode's whitening filter (None: no whitening).
    pub raw: Option<(&'a [f32], &'a Whitener)>,
}

impl Retimer<'_> {
    fn piece(&self, white: &[f32], start: f64, step: f64, n: usize) -> Vec<f32> {
        match self.raw {
            Some((raw, w)) => {
                let pre = w.order();
                let mut y = retime(raw, start - pre as f64 * step, step, n + pre);
                w.apply_in_place(&mut y);
                y.drain(..pre);
                y
            }
            None => retime(white, start, step, n),
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn detect<S: Samples + ?Sized>(
    episode: &S,
    index: &FeatureIndex,
    clip: &PreparedClip,
    rt: &Retimer<'_>,
    qf: &Features,
    cfg: &MatchConfig,
    found: &mut [Occurrence],
) -> Vec<Occurrence> {
    let nf = qf.frames;
    let segs: Vec<usize> = if nf <= SEG + SEG / 2 {
        vec![0]
    } else {
        let mut v: Vec<usize> = (0..)
            .map(|k| k * SEG_HOP)
            .take_while(|o| o + SEG <= nf)
            .collect();
        if v.last().is_some_and(|&o| o + SEG < nf) {
            v.push(nf - SEG);
        }
        if v.len() > MAX_SEGS {
            // Long clips: evenly spaced segments (each costs one correlation
            // over the whole episode); a partial use of half the clip still
            // covers several of them.
            let n = v.len();
            v = (0..MAX_SEGS)
                .map(|i| v[i * (n - 1) / (MAX_SEGS - 1)])
                .collect();
        }
        v
    };
    let widen = segs
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or(SEG_HOP)
        .max(SEG_HOP);
    let seg_len = if segs.len() == 1 { nf } else { SEG };
    let dev = cfg.max_speed_deviation.clamp(0.0, 0.2) as f64;
    let nspeeds = (dev / 0.005).round() as i64;
    // Votes: (speed index, T0 bin) -> per segment best (score, T0).
    let mut votes: BTreeMap<(i64, i64), BTreeMap<usize, (f32, f64)>> = BTreeMap::new();
    for (k, &o) in segs.iter().enumerate() {
        let q = slice(qf, o, o + seg_len);
        let curve = index.correlate(&q);
        // Enough peaks for every copy of a clip used up to `max_occurrences` times.
        let max_peaks = cfg.max_occurrences.saturating_add(64);
        let peaks = ncc::pick_peaks(&curve, 0, cfg.segment_threshold, seg_len, 0.5, max_peaks);
        for p in peaks {
            let range = if segs.len() == 1 {
                0..=0
            } else {
                -nspeeds..=nspeeds
            };
            for si in range {
                let s = 1.0 + si as f64 * 0.005;
                let t0 = p.pos - o as f64 / s;
                // 2-frame bins; each vote also goes to the nearer neighbouring bin,
                // so two segments of one copy whose start estimates straddle a bin
                // edge still meet (a copy starting on an odd frame lost one of its
                // two segments' votes and was never a candidate).
                let x = t0 / 2.0;
                let bin = x.round() as i64;
                let other = if x >= bin as f64 { bin + 1 } else { bin - 1 };
                for b in [bin, other] {
                    let e = votes
                        .entry((si, b))
                        .or_default()
                        .entry(k)
                        .or_insert((f32::NEG_INFINITY, t0));
                    if p.ncc > e.0 {
                        *e = (p.ncc, t0);
                    }
                }
            }
        }
    }
    let min_segs = segs.len().min(2);
    let mut cands: Vec<Cand> = votes
        .into_iter()
        .filter(|(_, m)| m.len() >= min_segs)
        .map(|((si, bin), m)| {
            let lo = m.keys().next().map_or(0, |&k| segs[k]);
            let hi = m.keys().last().map_or(nf, |&k| segs[k] + seg_len).min(nf);
            let t0s = m.values().map(|v| v.1);
            let (lo_t, hi_t) = t0s.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), t| {
                (a.min(t), b.max(t))
            });
            let _ = bin;
            // The strongest segment's start (the sharpest peak: a sting's attack, not
            // its tail); the mean of the two extremes before.
            let best_t = m
                .values()
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map_or(0.5 * (lo_t + hi_t), |v| v.1);
            Cand {
                t0: best_t,
                speed: 1.0 + si as f64 * 0.005,
                lo,
                hi,
                score: m.values().map(|v| v.0).sum(),
                single: segs.len() == 1,
                widen,
                spread: hi_t - lo_t,
            }
        })
        .collect();
    // The same segment peaks vote at several neighbouring speeds with the same score:
    // the speed at which their start estimates agree best is the candidate's.
    cands.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.spread.total_cmp(&b.spread))
            .then(a.t0.total_cmp(&b.t0))
            .then(a.speed.total_cmp(&b.speed))
    });
    let clip_s = clip.len() as f64 / ANALYSIS_RATE as f64;
    let frame_s = HOP as f64 / ANALYSIS_RATE as f64;
    // Short clips (one segment) rank their candidates poorly (similar stings
    // elsewhere in the episode): they get batches 1.5 times as large.
    let batch = if segs.len() == 1 {
        cfg.max_warped_candidates + cfg.max_warped_candidates / 2
    } else {
        cfg.max_warped_candidates
    }
    .max(1);
    let mut chosen: Vec<Cand> = Vec::new();
    for c in cands {
        if chosen.len() >= cfg.max_occurrences.saturating_add(batch) {
            break;
        }
        let start_s = c.t0 * frame_s;
        let near = |x: f64| (x - start_s).abs() < 0.5 * clip_s;
        if chosen.iter().any(|d| near(d.t0 * frame_s)) {
            continue;
        }
        // A weak whole-clip NCC hit may be a warped copy seen at the wrong
        // speed (wrong offset too): only confident hits are not re-verified.
        if found
            .iter()
            .any(|o| o.confidence >= cfg.sure_ncc && near(o.offset_s - o.clip_start_s))
        {
            continue;
        }
        chosen.push(c);
    }
    let mut out: Vec<Occurrence> = Vec::new();
    let mut retimed: Vec<(usize, Occurrence)> = Vec::new();
    // Verified best first in batches: the first always, each further one only while
    // the previous batch found (or re-timed) an occurrence, so every copy of a clip
    // played many times at a changed speed is verified (the old detector stopped
    // after one batch: at most 8, or 12, warped occurrences per clip).
    for chunk in chosen.chunks(batch) {
        let before = out.len() + retimed.len();
        for c in chunk {
            verify_candidate(episode, clip, rt, c, cfg, found, &mut out, &mut retimed);
        }
        if out.len() + retimed.len() == before || out.len() > cfg.max_occurrences {
            break;
        }
    }
    for (i, o) in retimed {
        found[i] = o;
    }
    out
}

/// Verifies one warped candidate: a new occurrence goes to `out`, a re-timing of a
/// weak whole-clip hit (index into `found`) to `retimed`.
#[allow(clippy::too_many_arguments)]
fn verify_candidate<S: Samples + ?Sized>(
    episode: &S,
    clip: &PreparedClip,
    rt: &Retimer<'_>,
    c: &Cand,
    cfg: &MatchConfig,
    found: &[Occurrence],
    out: &mut Vec<Occurrence>,
    retimed: &mut Vec<(usize, Occurrence)>,
) {
    let clip_s = clip.len() as f64 / ANALYSIS_RATE as f64;
    let frame_s = HOP as f64 / ANALYSIS_RATE as f64;
    // A weak whole-clip hit here may be a speed-changed copy measured at the wrong
    // speed and lag (its NCC just clears the threshold at a compromise lag). The
    // event is already established, so the warped measurement needs no acceptance
    // threshold of its own to re-time it: only to be at a clearly different speed,
    // to start where that hit starts, and to score higher than it did.
    let start_s = c.t0 * frame_s;
    let weak = found
        .iter()
        .enumerate()
        .filter(|(_, o)| {
            clip_s >= cfg.retime_min_clip_s
                && o.confidence < cfg.sure_ncc
                && (o.anchor_s() - start_s).abs() < 0.5 * clip_s
        })
        .max_by(|a, b| {
            a.1.confidence
                .total_cmp(&b.1.confidence)
                .then(b.0.cmp(&a.0))
        })
        .map(|(i, o)| (i, o.anchor_s(), o.confidence));
    let normal_run = cfg.min_partial_s.min(0.8 * clip_s);
    let (accept, min_run) = match weak {
        Some((_, _, conf)) => (cfg.warped_threshold.min(conf + cfg.retime_margin), 0.0),
        None => (cfg.warped_threshold, normal_run),
    };
    let o = verify(episode, clip, rt, c, cfg, accept, min_run).or_else(|| {
        // The segments' votes can agree on a wrong (start, speed): a sting's quiet,
        // decaying tail correlates broadly and its peak lands 100-250 ms off, so the
        // only speed at which its vote meets the attack's is the edge of the grid
        // (split A: every speed-changed copy of two 4 s Yaru stings). Try again as a
        // clip without speed estimate, from the strongest segment's start.
        (!c.single).then_some(())?;
        let again = Cand {
            single: true,
            ..c.clone()
        };
        verify(episode, clip, rt, &again, cfg, accept, min_run)
    });
    let Some(o) = o else {
        return;
    };
    let run = o.clip_end_s - o.clip_start_s;
    let verified = if o.confidence >= cfg.warped_threshold && run >= normal_run {
        Some(o)
    } else {
        if let Some((i, at, conf)) = weak {
            let a = o.anchor_s();
            if o.confidence >= conf + cfg.retime_margin
                && (o.speed - 1.0).abs() >= cfg.retime_min_speed_deviation
                && (a - at).abs() < 0.25 * clip_s
            {
                // The weak hit, re-timed in place: the whole clip from the warped
                // anchor at the warped speed. Its extent and confidence stay the
                // whole-clip hit's (the warped run may be a short stretch of it), so
                // the cross-clip check judges it as before.
                retimed.push((
                    i,
                    Occurrence {
                        offset_s: round_ms(a),
                        clip_start_s: 0.0,
                        clip_end_s: round_ms(clip_s),
                        confidence: conf,
                        ..o
                    },
                ));
            }
        }
        None
    };
    if let Some(o) = verified {
        let start = o.anchor_s();
        let clash = out
            .iter()
            .chain(found.iter().filter(|o| o.confidence >= cfg.sure_ncc))
            .any(|p| (p.anchor_s() - start).abs() < 0.5 * clip_s);
        if !clash {
            out.push(o);
        }
    }
}

const TAPS: usize = 16;
const PHASES: usize = 256;

/// Polyphase table of a Hann-windowed sinc (cutoff 0.9 x Nyquist), 2*TAPS taps.
fn sinc_table() -> &'static [f32] {
    static T: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = vec![0.0f32; (PHASES + 1) * 2 * TAPS];
        for ph in 0..=PHASES {
            let frac = ph as f64 / PHASES as f64;
            let row = &mut t[ph * 2 * TAPS..(ph + 1) * 2 * TAPS];
            let mut sum = 0.0;
            for (i, v) in row.iter_mut().enumerate() {
                let d = i as f64 - (TAPS as f64 - 1.0) - frac;
                let arg = std::f64::consts::PI * d * 0.9;
                let sinc = if arg.abs() < 1e-9 {
                    1.0
                } else {
                    arg.sin() / arg
                };
                let w = 0.5 + 0.5 * (std::f64::consts::PI * d / (TAPS as f64 + 1.0)).cos();
                *v = (sinc * w) as f32;
                sum += sinc * w;
            }
            row.iter_mut().for_each(|v| *v /= sum as f32);
        }
        t
    })
}

/// Windowed-sinc interpolation of `x` at positions `start + i * step`.
fn retime(x: &[f32], start: f64, step: f64, n: usize) -> Vec<f32> {
    let table = sinc_table();
    (0..n)
        .map(|i| {
            let t = start + i as f64 * step;
            let c = t.floor() as i64;
            let ph = ((t - c as f64) * PHASES as f64).round() as usize;
            let row = &table[ph * 2 * TAPS..(ph + 1) * 2 * TAPS];
            let first = c - (TAPS as i64 - 1);
            if first >= 0 && (first as usize + 2 * TAPS) <= x.len() {
                let f = first as usize;
                x[f..f + 2 * TAPS].iter().zip(row).map(|(a, b)| a * b).sum()
            } else {
                row.iter()
                    .enumerate()
                    .map(|(k, h)| {
                        let j = first + k as i64;
                        if j >= 0 && (j as usize) < x.len() {
                            x[j as usize] * h
                        } else {
                            0.0
                        }
                    })
                    .sum()
            }
        })
        .collect()
}

/// Direct NCC of `piece` against episode starts in [center - r, center + r].
pub(crate) fn piece_ncc<S: Samples + ?Sized>(
    episode: &S,
    piece: &[f32],
    norm: f64,
    center: f64,
    r: usize,
) -> Option<(f64, f32)> {
    let l = piece.len();
    let c = center.round() as i64;
    let lo = (c - r as i64).max(0);
    let hi = (c + r as i64).min(episode.len() as i64 - l as i64);
    if lo > hi || norm <= 0.0 {
        return None;
    }
    let (lo, hi) = (lo as usize, hi as usize);
    // The stretch every lag reads, indexed from `lo`.
    let seg = episode.segment(lo, hi + l);
    let mut e: f64 = seg[..l].iter().map(|v| (*v as f64) * (*v as f64)).sum();
    let mut vals = Vec::with_capacity(hi - lo + 1);
    for t in 0..=hi - lo {
        if t > 0 {
            let a = seg[t - 1] as f64;
            let b = seg[t + l - 1] as f64;
            e += b * b - a * a;
        }
        let dot: f32 = seg[t..t + l].iter().zip(piece).map(|(a, b)| a * b).sum();
        let v = if e > 1e-10 * l as f64 {
            (dot as f64 / (norm * e.max(0.0).sqrt())) as f32
        } else {
            0.0
        };
        vals.push(v);
    }
    let (bi, bv, d) = crate::dsp::parabolic_peak(&vals);
    Some(((lo + bi) as f64 + d, bv))
}

pub(crate) fn norm_of(x: &[f32]) -> f64 {
    x.iter()
        .map(|v| (*v as f64) * (*v as f64))
        .sum::<f64>()
        .sqrt()
}

/// Weighted least squares fit y = a + b x.
fn fit_line(pts: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let sw: f64 = pts.iter().map(|p| p.2).sum();
    if pts.len() < 2 || sw <= 0.0 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0 * p.2).sum::<f64>() / sw;
    let my = pts.iter().map(|p| p.1 * p.2).sum::<f64>() / sw;
    let sxx: f64 = pts.iter().map(|p| p.2 * (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| p.2 * (p.0 - mx) * (p.1 - my)).sum();
    let b = if sxx > 1e-9 { sxy / sxx } else { 0.0 };
    Some((my - b * mx, b))
}

struct Verified {
    /// Episode position (samples) of clip sample 0 and samples per clip sample.
    t0: f64,
    slope: f64,
    run: (usize, usize),
    score: f32,
}

/// Verifies one candidate under one hypothesis (`resample`: speed, else tempo).
#[allow(clippy::too_many_arguments)]
fn verify_hyp<S: Samples + ?Sized>(
    episode: &S,
    clip: &[f32],
    rt: &Retimer<'_>,
    c: &Cand,
    resample: bool,
    pass1_pieces: usize,
    r1: usize,
    cfg: &MatchConfig,
) -> Option<Verified> {
    let l = clip.len();
    let piece_at = |cpos: usize, slope: f64| -> Vec<f32> {
        if resample {
            // Episode sample i of the piece = clip position cpos + i / slope.
            rt.piece(clip, cpos as f64, 1.0 / slope, PIECE)
        } else {
            clip[cpos..(cpos + PIECE).min(l)].to_vec()
        }
    };
    // Clip range to examine: the voted part, widened by one segment each side.
    let lo = c.lo.saturating_sub(c.widen) * HOP;
    let hi = ((c.hi + c.widen) * HOP).min(l);
    if hi < lo + PIECE {
        return None;
    }
    let positions: Vec<usize> = (lo..=hi - PIECE).step_by(PIECE).collect();
    let norms: Vec<f64> = positions
        .iter()
        .map(|&p| norm_of(&clip[p..p + PIECE]))
        .collect();
    let mut sorted = norms.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = sorted[sorted.len() / 2];
    let loud: Vec<usize> = (0..positions.len())
        .filter(|&j| norms[j] >= 0.3 * median && norms[j] > 0.0)
        .collect();
    if loud.is_empty() {
        return None;
    }
    let mut slope = 1.0 / c.speed;
    let mut t0 = c.t0 * HOP as f64;
    // Pass 1: a few loud pieces, wide search, robust line fit.
    let step = (loud.len() as f64 / pass1_pieces as f64).max(1.0);
    let mut pts = Vec::new();
    let mut k = 0.0;
    while (k as usize) < loud.len() {
        let j = loud[k as usize];
        let cp = positions[j];
        let piece = PreparedClip::new(&piece_at(cp, slope));
        let center = (t0 + cp as f64 * slope).round() as i64;
        if let Some(pk) = ncc::local_ncc(episode, &piece, center, r1) {
            let (pos, v) = (pk.pos, pk.ncc);
            if v >= 0.4 {
                pts.push((cp as f64, pos - cp as f64 * slope - t0, (v - 0.3) as f64));
            }
        }
        k += step;
    }
    let tried = (loud.len() as f64 / step).ceil().max(1.0);
    if (pts.len() as f64) < (0.3 * tried).max(2.0) {
        return None;
    }
    let mut line = fit_line(&pts)?;
    for tol in [80.0, 24.0, 8.0] {
        let kept: Vec<(f64, f64, f64)> = pts
            .iter()
            .copied()
            .filter(|p| (p.1 - (line.0 + line.1 * p.0)).abs() <= tol)
            .collect();
        if kept.len() < 2 {
            return None;
        }
        line = fit_line(&kept)?;
    }
    t0 += line.0;
    slope += line.1;
    let speed = 1.0 / slope;
    if (speed - 1.0).abs() > cfg.max_speed_deviation as f64 + 0.005 {
        return None;
    }
    // Pass 2: every piece, narrow search along the line.
    let mut res: Vec<(f32, f64, f64)> = Vec::with_capacity(positions.len()); // (ncc, weight, lag)
    for (j, &cp) in positions.iter().enumerate() {
        if norms[j] < 0.3 * median || norms[j] <= 0.0 {
            res.push((f32::NAN, 0.0, 0.0));
            continue;
        }
        let piece = piece_at(cp, slope);
        let n = norm_of(&piece);
        let exp = t0 + cp as f64 * slope;
        match piece_ncc(episode, &piece, n, exp, R2) {
            Some((pos, v)) => res.push((v, norms[j], pos - exp)),
            None => res.push((0.0, norms[j], 0.0)),
        }
    }
    // Longest run of matching pieces (quiet pieces are neutral, gaps of <= 2 allowed).
    let mut best = (0usize, 0usize);
    let mut start: Option<usize> = None;
    let mut last_good = 0usize;
    for (j, r) in res.iter().enumerate() {
        let good = r.0.is_nan() || r.0 >= cfg.piece_threshold;
        if good && !r.0.is_nan() {
            if start.is_none() {
                start = Some(j);
            }
            last_good = j;
        } else if !good {
            if let Some(s) = start {
                if j - last_good > 2 {
                    if last_good + 1 - s > best.1 - best.0 {
                        best = (s, last_good + 1);
                    }
                    start = None;
                }
            }
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
    // Quiet pieces next to the run (a sting's decaying tail) belong to it.
    while best.0 > 0 && res[best.0 - 1].0.is_nan() {
        best.0 -= 1;
    }
    while best.1 < res.len() && res[best.1].0.is_nan() {
        best.1 += 1;
    }
    let run = &res[best.0..best.1];
    let (mut num, mut den) = (0.0f64, 0.0f64);
    let mut lag_pts = Vec::new();
    for (j, r) in run.iter().enumerate() {
        if r.0.is_nan() {
            continue;
        }
        num += r.0 as f64 * r.1;
        den += r.1;
        if r.0 >= cfg.piece_threshold {
            lag_pts.push((positions[best.0 + j] as f64, r.2, r.0 as f64));
        }
    }
    if den <= 0.0 {
        return None;
    }
    if let Some((a, b)) = fit_line(&lag_pts) {
        if a.abs() < R2 as f64 && b.abs() < 0.01 {
            t0 += a;
            slope += b;
        }
    }
    Some(Verified {
        t0,
        slope,
        run: (
            positions[best.0],
            if best.1 == positions.len() {
                hi
            } else {
                (positions[best.1 - 1] + PIECE).min(l)
            },
        ),
        score: (num / den) as f32,
    })
}

/// Mean best NCC of a few loud resampled pieces of the clip at `speed`
/// (pass-1 search only): ranks the points of the speed grid of a short clip.
fn pass1_score<S: Samples + ?Sized>(
    episode: &S,
    clip: &[f32],
    rt: &Retimer<'_>,
    c: &Cand,
    speed: f64,
    pieces: usize,
) -> f32 {
    let l = clip.len();
    if l < PIECE {
        return 0.0;
    }
    let positions: Vec<usize> = (0..=l - PIECE).step_by(PIECE).collect();
    let mut by_norm: Vec<(f64, usize)> = positions
        .iter()
        .map(|&p| (norm_of(&clip[p..p + PIECE]), p))
        .collect();
    by_norm.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let slope = 1.0 / speed;
    let t0 = c.t0 * HOP as f64;
    let mut sum = 0.0f32;
    let mut n = 0usize;
    for &(nm, cp) in by_norm.iter().take(pieces) {
        if nm <= 0.0 {
            continue;
        }
        let piece = PreparedClip::new(&rt.piece(clip, cp as f64, speed, PIECE));
        let center = (t0 + cp as f64 * slope).round() as i64;
        if let Some(pk) = ncc::local_ncc(episode, &piece, center, R1_SHORT) {
            sum += pk.ncc.max(0.0);
        }
        n += 1;
    }
    if n == 0 {
        0.0
    } else {
        sum / n as f32
    }
}

/// Verifies a candidate; `accept` is the lowest piecewise score accepted and
/// `min_run_s` the shortest matching run of the clip.
fn verify<S: Samples + ?Sized>(
    episode: &S,
    clip: &PreparedClip,
    rt: &Retimer<'_>,
    c: &Cand,
    cfg: &MatchConfig,
    accept: f32,
    min_run_s: f64,
) -> Option<Occurrence> {
    // Speed hypothesis: a short clip (one segment) has no speed estimate and
    // an uncertain start: the 1% grid is ranked by a wide pass-1 search
    // (+-200 ms), then the best point is refined on a 0.25% grid (a 0.5% pitch
    // error decorrelates the 64 ms pieces of tonal clips).
    let dev = cfg.max_speed_deviation.clamp(0.0, 0.2) as f64;
    let speeds: Vec<f64> = if c.single {
        let k = (dev / 0.01).round() as i64;
        let coarse: Vec<f64> = (-k..=k).map(|i| 1.0 + i as f64 * 0.01).collect();
        let mut best = (1.0f64, f32::NEG_INFINITY);
        for &s in &coarse {
            let v = pass1_score(episode, &clip.samples, rt, c, s, PASS1_PIECES / 6);
            if v > best.1 {
                best = (s, v);
            }
        }
        if best.1 < cfg.short_clip_speed_threshold {
            // No speed of the grid lines the loud pieces up: not this clip.
            return None;
        }
        (-2..=2)
            .map(|i| best.0 + i as f64 * 0.0025)
            .filter(|s| (s - 1.0).abs() <= dev + 1e-9)
            .collect()
    } else {
        vec![c.speed]
    };
    let r1 = if c.single { R1_SHORT } else { R1 };
    let mut best: Option<Verified> = None;
    let grid = speeds.len() > 1;
    for s in speeds {
        let cs = Cand {
            speed: s,
            ..c.clone()
        };
        let n1 = if grid { PASS1_PIECES / 3 } else { PASS1_PIECES };
        if let Some(v) = verify_hyp(episode, &clip.samples, rt, &cs, true, n1, r1, cfg) {
            if best.as_ref().is_none_or(|b| v.score > b.score) {
                best = Some(v);
            }
        }
    }
    if let Some(v) = verify_hyp(episode, &clip.samples, rt, c, false, PASS1_PIECES, r1, cfg) {
        if best.as_ref().is_none_or(|b| v.score > b.score) {
            best = Some(v);
        }
    }
    if std::env::var_os("ARCHIVIST_MATCHER_TRACE_WARP").is_some() {
        eprintln!(
            "WARP cand t0 {:.3} s speed {:.3} single {} -> {:?}",
            c.t0 * HOP as f64 / ANALYSIS_RATE as f64,
            c.speed,
            c.single,
            best.as_ref()
                .map(|v| (v.t0 / ANALYSIS_RATE as f64, 1.0 / v.slope, v.score, v.run))
        );
    }
    let v = best?;
    let rate = ANALYSIS_RATE as f64;
    let dur = (v.run.1 - v.run.0) as f64 / rate;
    if v.score < accept || dur < min_run_s {
        return None;
    }
    let speed = 1.0 / v.slope;
    Some(Occurrence {
        offset_s: round_ms((v.t0 + v.run.0 as f64 * v.slope) / rate),
        confidence: v.score.clamp(0.0, 1.0),
        speed: ((speed * 1000.0).round() / 1000.0) as f32,
        clip_start_s: round_ms(v.run.0 as f64 / rate),
        clip_end_s: round_ms(v.run.1 as f64 / rate),
        detector: Detector::Warped,
        also_explained_by: Vec::new(),
    })
}
