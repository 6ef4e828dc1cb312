//! Energy-normalised waveform cross-correlation (NCC) at the analysis rate:
//! NCC(t) = sum_i x[t+i] c[i] / (|c| * sqrt(sum_i x[t+i]^2)).
//!
//! * [`exhaustive`]: one full-resolution overlap-save FFT correlation per clip
//!   over the whole episode. Episode block spectra are computed once per block
//!   and shared by all clips of the same FFT size (the blocks are streamed, so
//!   memory stays at a few blocks per thread).
//! * [`local_ncc`]: NCC over a small lag range around a candidate (used to
//!   verify and time the candidates of the cheap passes).

use std::cell::RefCell;
use std::sync::Arc;

use rayon::prelude::*;
use realfft::num_complex::Complex32;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use crate::store::Samples;

thread_local! {
    static PLANNER: RefCell<RealFftPlanner<f32>> = RefCell::new(RealFftPlanner::new());
}

/// Forward/inverse real FFT plans of size `n` (cached per thread).
pub(crate) fn plans(n: usize) -> (Arc<dyn RealToComplex<f32>>, Arc<dyn ComplexToReal<f32>>) {
    PLANNER.with(|p| {
        let mut p = p.borrow_mut();
        (p.plan_fft_forward(n), p.plan_fft_inverse(n))
    })
}

/// A clip prepared for correlation: DC removed, norm precomputed.
#[derive(Clone, Debug)]
pub(crate) struct PreparedClip {
    pub samples: Vec<f32>,
    pub norm: f64,
}

impl PreparedClip {
    pub fn new(x: &[f32]) -> Self {
        let mean = x.iter().map(|v| *v as f64).sum::<f64>() / x.len().max(1) as f64;
        let samples: Vec<f32> = x.iter().map(|v| (*v as f64 - mean) as f32).collect();
        let norm = samples
            .iter()
            .map(|v| (*v as f64) * (*v as f64))
            .sum::<f64>()
            .sqrt();
        Self { samples, norm }
    }
    pub fn len(&self) -> usize {
        self.samples.len()
    }
}

/// Welch PSD size used by the null-distribution estimate.
pub(crate) const PSD_N: usize = 4096;

/// Normalised Welch power spectrum (sums to 1) of `x`, `PSD_N` bins (PSD_N/2+1 kept).
pub(crate) fn welch_psd(x: &[f32]) -> Vec<f32> {
    welch_psd_censored(x, &[])
}

/// [`welch_psd`] of `x` without the frames that overlap any of the `censored` sample
/// ranges (`lo..hi`, indices into `x`): the spectrum of what plays around them. All zero
/// when every frame is censored.
pub(crate) fn welch_psd_censored(x: &[f32], censored: &[(usize, usize)]) -> Vec<f32> {
    let n = PSD_N;
    let (fwd, _) = plans(n);
    let win: Vec<f32> = (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / n as f32).cos())
        .collect();
    let mut acc = vec![0.0f64; n / 2 + 1];
    let mut buf = vec![0.0f32; n];
    let mut spec = fwd.make_output_vec();
    let mut start = 0usize;
    loop {
        let end = (start + n).min(x.len());
        if !censored.iter().any(|&(lo, hi)| lo < end && start < hi) {
            buf.iter_mut().for_each(|v| *v = 0.0);
            for (i, v) in x[start..end].iter().enumerate() {
                buf[i] = v * win[i];
            }
            let _ = fwd.process(&mut buf, &mut spec);
            for (a, c) in acc.iter_mut().zip(&spec) {
                *a += c.norm_sqr() as f64;
            }
        }
        if end >= x.len() {
            break;
        }
        start += n / 2;
    }
    let total: f64 = acc.iter().sum();
    acc.iter()
        .map(|v| if total > 0.0 { (v / total) as f32 } else { 0.0 })
        .collect()
}

/// Standard deviation of the NCC of a clip (normalised PSD `clip_psd`,
/// `len` samples) against stationary audio with normalised PSD `bed_psd`:
/// var = (M / L) * sum_k p_c(k) p_x(k) (1/L for white noise).
pub(crate) fn null_sigma(clip_psd: &[f32], bed_psd: &[f32], len: usize) -> f32 {
    let dot: f64 = clip_psd
        .iter()
        .zip(bed_psd)
        .map(|(a, b)| *a as f64 * *b as f64)
        .sum();
    // Half-spectrum bins stand for two bins each (except DC/Nyquist): M_eff = PSD_N / 2.
    ((PSD_N as f64 / 2.0) * dot / len.max(1) as f64)
        .sqrt()
        .min(1.0) as f32
}

/// A correlation peak: episode position (fractional samples) and NCC value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Peak {
    pub pos: f64,
    pub ncc: f32,
    /// Uncertainty of `pos` (samples; coarse candidates only, else 0).
    pub width: f32,
}

/// FFT size used by the overlap-save correlation of a clip of `len` samples.
pub(crate) fn block_size(len: usize) -> usize {
    (2 * (2 * len).next_power_of_two()).max(8192)
}

/// Minimum energy (sum of squares) of a window for its NCC to count, per sample.
const MIN_WINDOW_POWER: f64 = 1e-10;

/// Full-resolution NCC of every clip over the whole episode; returns, per
/// clip, the peaks with NCC >= `threshold` after non-maximum suppression
/// (peaks of one clip closer than `min_sep_frac * len` keep only the best).
pub(crate) fn exhaustive<S: Samples + ?Sized>(
    episode: &S,
    clips: &[&PreparedClip],
    threshold: f32,
    min_sep_frac: f64,
    max_peaks: usize,
) -> Vec<Vec<Peak>> {
    let mut out: Vec<Vec<Peak>> = vec![Vec::new(); clips.len()];
    // Group clips by FFT size.
    let mut sizes: Vec<usize> = clips.iter().map(|c| block_size(c.len())).collect();
    sizes.sort_unstable();
    sizes.dedup();
    // Clips of one FFT size are processed in chunks so that their spectra
    // (n/2+1 complex values each) stay within a fixed memory budget (~64 MB).
    let mut chunks: Vec<(usize, Vec<usize>)> = Vec::new();
    for n in sizes {
        let all: Vec<usize> = (0..clips.len())
            .filter(|&i| block_size(clips[i].len()) == n && clips[i].len() <= episode.len())
            .collect();
        let per_chunk = ((64usize << 20) / (4 * n)).clamp(1, 64);
        for c in all.chunks(per_chunk) {
            chunks.push((n, c.to_vec()));
        }
    }
    for (n, idx) in chunks {
        if idx.is_empty() {
            continue;
        }
        let lmax = idx.iter().map(|&i| clips[i].len()).max().unwrap_or(1);
        let hop = n - lmax + 1;
        let (fwd, inv) = plans(n);
        // Conjugated clip spectra, scaled by 1/n (realfft is unnormalised).
        let spectra: Vec<Vec<Complex32>> = idx
            .par_iter()
            .map(|&i| {
                let (fwd, _) = plans(n);
                let mut buf = vec![0.0f32; n];
                buf[..clips[i].len()].copy_from_slice(&clips[i].samples);
                let mut spec = fwd.make_output_vec();
                let _ = fwd.process(&mut buf, &mut spec);
                let s = 1.0 / n as f32;
                spec.iter_mut().for_each(|c| *c = c.conj() * s);
                spec
            })
            .collect();
        drop((fwd, inv));
        let last_start = episode.len() - idx.iter().map(|&i| clips[i].len()).min().unwrap_or(1);
        let nblocks = last_start / hop + 1;
        let per_block: Vec<Vec<Vec<Peak>>> = (0..nblocks)
            .into_par_iter()
            .map(|b| {
                let p = b * hop;
                let (fwd, inv) = plans(n);
                let end = (p + n).min(episode.len());
                let mut xb = vec![0.0f32; n];
                episode.copy_into(p, &mut xb[..end - p]);
                // Block-local prefix energy.
                let mut pre = Vec::with_capacity(n + 1);
                pre.push(0.0f64);
                let mut acc = 0.0f64;
                for v in &xb {
                    acc += (*v as f64) * (*v as f64);
                    pre.push(acc);
                }
                let mut xs = fwd.make_output_vec();
                let mut tmp = xb.clone();
                let _ = fwd.process(&mut tmp, &mut xs);
                let mut prod = inv.make_input_vec();
                let mut y = vec![0.0f32; n];
                let mut res = Vec::with_capacity(idx.len());
                for (k, &ci) in idx.iter().enumerate() {
                    let clip = clips[ci];
                    let l = clip.len();
                    for ((o, a), b) in prod.iter_mut().zip(&xs).zip(&spectra[k]) {
                        *o = a * b;
                    }
                    let _ = inv.process(&mut prod, &mut y);
                    // Valid lags in this block: t in [0, hop), p + t + l <= len.
                    let valid = hop
                        .min((episode.len() - l + 1).saturating_sub(p))
                        .min(n - l + 1);
                    res.push(peaks_from_corr(
                        &y[..valid + 1],
                        &pre,
                        clip.norm,
                        l,
                        valid,
                        p,
                        threshold,
                        min_sep_frac,
                        max_peaks,
                    ));
                }
                res
            })
            .collect();
        for (k, &ci) in idx.iter().enumerate() {
            let all: Vec<Peak> = per_block
                .iter()
                .flat_map(|r| r[k].iter().copied())
                .collect();
            out[ci] = nms(all, clips[ci].len(), min_sep_frac, max_peaks);
        }
    }
    out
}

/// Peaks of the NCC computed from a raw correlation `y` (lags 0..valid) and the
/// block-local prefix energy: a multiply-only test rejects almost every lag, the
/// exact NCC is computed only around lags that pass.
#[allow(clippy::too_many_arguments)]
fn peaks_from_corr(
    y: &[f32],
    pre: &[f64],
    norm: f64,
    l: usize,
    valid: usize,
    offset: usize,
    threshold: f32,
    min_sep_frac: f64,
    max_peaks: usize,
) -> Vec<Peak> {
    let min_e = MIN_WINDOW_POWER * l as f64;
    let k = (threshold as f64 * norm).powi(2);
    let ncc_at = |t: usize| -> f32 {
        if t >= valid {
            return f32::NEG_INFINITY;
        }
        let e = pre[t + l] - pre[t];
        if e > min_e {
            (y[t] as f64 / (norm * e.sqrt())) as f32
        } else {
            0.0
        }
    };
    let mut cands = Vec::new();
    for t in 0..valid {
        let yt = y[t];
        if yt <= 0.0 {
            continue;
        }
        let e = pre[t + l] - pre[t];
        if (yt as f64) * (yt as f64) < k * e || e <= min_e {
            continue;
        }
        let v = ncc_at(t);
        let lv = if t > 0 {
            ncc_at(t - 1)
        } else {
            f32::NEG_INFINITY
        };
        let rv = ncc_at(t + 1);
        if v >= lv && v > rv {
            let mut d = 0.0f64;
            if lv.is_finite() && rv.is_finite() {
                let den = (lv - 2.0 * v + rv) as f64;
                if den < 0.0 {
                    d = (0.5 * (lv - rv) as f64 / den).clamp(-0.5, 0.5);
                }
            }
            cands.push(Peak {
                pos: (offset + t) as f64 + d,
                ncc: v.min(1.0),
                width: 0.0,
            });
        }
    }
    nms(cands, l, min_sep_frac, max_peaks)
}

/// Local maxima >= threshold of an NCC curve starting at episode sample `offset`,
/// with parabolic sub-sample refinement, then suppression.
pub(crate) fn pick_peaks(
    ncc: &[f32],
    offset: usize,
    threshold: f32,
    len: usize,
    min_sep_frac: f64,
    max_peaks: usize,
) -> Vec<Peak> {
    let mut cands = Vec::new();
    for t in 0..ncc.len() {
        let v = ncc[t];
        if v < threshold {
            continue;
        }
        let l = if t > 0 { ncc[t - 1] } else { f32::NEG_INFINITY };
        let r = if t + 1 < ncc.len() {
            ncc[t + 1]
        } else {
            f32::NEG_INFINITY
        };
        if v >= l && v > r {
            let mut d = 0.0f64;
            if l.is_finite() && r.is_finite() {
                let den = (l - 2.0 * v + r) as f64;
                if den < 0.0 {
                    d = (0.5 * (l - r) as f64 / den).clamp(-0.5, 0.5);
                }
            }
            cands.push(Peak {
                pos: (offset + t) as f64 + d,
                ncc: v.min(1.0),
                width: 0.0,
            });
        }
    }
    nms(cands, len, min_sep_frac, max_peaks)
}

/// Greedy non-maximum suppression, deterministic (ties broken by position);
/// the result is sorted by position. O(n log n): the kept peaks are held in
/// position order, so each candidate is checked against its two kept neighbours
/// only (the old all-pairs check was quadratic once hundreds of peaks are kept).
pub(crate) fn nms(
    mut cands: Vec<Peak>,
    len: usize,
    min_sep_frac: f64,
    max_peaks: usize,
) -> Vec<Peak> {
    use std::collections::BTreeMap;
    use std::ops::Bound::{Excluded, Unbounded};
    cands.sort_by(|a, b| b.ncc.total_cmp(&a.ncc).then(a.pos.total_cmp(&b.pos)));
    let sep = (len as f64 * min_sep_frac).max(1.0);
    // Kept peaks by position (positions are finite and >= 0 here; the key orders
    // them like the f64 values, ties keep the first).
    let key = |p: f64| (p * 1024.0).round() as i64;
    let mut kept: BTreeMap<i64, Peak> = BTreeMap::new();
    for c in cands {
        if kept.len() >= max_peaks {
            break;
        }
        let k = key(c.pos);
        let below = kept.range(..=k).next_back().map(|(_, p)| p.pos);
        let above = kept
            .range((Excluded(k), Unbounded))
            .next()
            .map(|(_, p)| p.pos);
        if below.is_some_and(|p| (c.pos - p).abs() < sep)
            || above.is_some_and(|p| (c.pos - p).abs() < sep)
        {
            continue;
        }
        kept.insert(k, c);
    }
    kept.into_values().collect()
}

/// Suppression of verified hits ([`nms`]), where a hit is also dropped when a stronger
/// hit, kept or itself suppressed, lies within half a clip of it: that is a sidelobe of
/// a true start, not a start. Two copies of a clip closer than `min_sep_frac` clip
/// lengths: the stronger is kept and the other suppressed, and before, a sidelobe of
/// the suppressed copy just outside the window was reported in its place, 88 to 500 ms
/// before the true start where no copy begins (outside 18l H1). Dropping it costs at
/// most an occurrence that could not be reported anyway; it never moves one.
pub(crate) fn nms_verified(mut hits: Vec<Peak>, len: usize, min_sep_frac: f64) -> Vec<Peak> {
    hits.sort_by(|a, b| b.ncc.total_cmp(&a.ncc).then(a.pos.total_cmp(&b.pos)));
    let sidelobe = (len as f64 * 0.5).max(1.0);
    let mut stronger: Vec<f64> = Vec::new();
    let mut genuine = Vec::new();
    for h in hits {
        let pos = h.pos;
        if stronger.iter().all(|p| (pos - p).abs() >= sidelobe) {
            genuine.push(h);
        }
        stronger.push(pos);
    }
    nms(genuine, len, min_sep_frac, usize::MAX)
}

/// The NCC curve of `clip` for starts `[center - radius, center + radius]` (clamped to
/// the episode), with the first start.
pub(crate) fn local_curve<S: Samples + ?Sized>(
    episode: &S,
    clip: &PreparedClip,
    center: i64,
    radius: usize,
) -> Option<(usize, Vec<f32>)> {
    let l = clip.len();
    if l == 0 || l > episode.len() {
        return None;
    }
    let lo = (center - radius as i64).max(0) as usize;
    let hi = ((center + radius as i64).max(0) as usize).min(episode.len() - l);
    if lo > hi {
        return None;
    }
    let nlags = hi - lo + 1;
    let seg = episode.segment(lo, hi + l);
    let seg: &[f32] = &seg;
    let n = (seg.len() + 1).next_power_of_two();
    let (fwd, inv) = plans(n);
    let mut a = vec![0.0f32; n];
    a[..seg.len()].copy_from_slice(seg);
    let mut b = vec![0.0f32; n];
    b[..l].copy_from_slice(&clip.samples);
    let mut sa = fwd.make_output_vec();
    let mut sb = fwd.make_output_vec();
    let _ = fwd.process(&mut a, &mut sa);
    let _ = fwd.process(&mut b, &mut sb);
    let s = 1.0 / n as f32;
    for (x, y) in sa.iter_mut().zip(&sb) {
        *x = *x * y.conj() * s;
    }
    let mut y = vec![0.0f32; n];
    let _ = inv.process(&mut sa, &mut y);
    let mut pre = Vec::with_capacity(seg.len() + 1);
    pre.push(0.0f64);
    let mut acc = 0.0;
    for v in seg {
        acc += (*v as f64) * (*v as f64);
        pre.push(acc);
    }
    let min_e = MIN_WINDOW_POWER * l as f64;
    Some((
        lo,
        (0..nlags)
            .map(|t| {
                let e = pre[t + l] - pre[t];
                if e > min_e && clip.norm > 0.0 {
                    (y[t] as f64 / (clip.norm * e.sqrt())) as f32
                } else {
                    0.0
                }
            })
            .collect(),
    ))
}

/// NCC of `clip` against `episode` for start positions in
/// `[center - radius, center + radius]`; returns the best peak (sub-sample).
pub(crate) fn local_ncc<S: Samples + ?Sized>(
    episode: &S,
    clip: &PreparedClip,
    center: i64,
    radius: usize,
) -> Option<Peak> {
    let (lo, ncc) = local_curve(episode, clip, center, radius)?;
    let (bt, bv, d) = crate::dsp::parabolic_peak(&ncc);
    Some(Peak {
        pos: (lo + bt) as f64 + d,
        ncc: bv.min(1.0),
        width: 0.0,
    })
}
