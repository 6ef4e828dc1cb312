//! Pre-whitening and the coarse-to-fine whole-clip NCC detector.
//!
//! * [`Whitener`]: a linear-prediction (LPC) error filter fitted on the
//!   episode and applied to the episode and to every clip. Correlating
//!   whitened signals is the matched filter for a clip in coloured
//!   background noise: it weights each frequency by the inverse of the
//!   episode's average power there, which narrows the correlation peaks of
//!   tonal clips and lowers the NCC that similar-sounding but different audio
//!   reaches (measured: the highest NCC of a tonal sting on an hour of
//!   clip-free music and speech falls from 0.41 to 0.31).
//! * [`coarse_fine`]: for every clip, the band-limited correlation envelope in
//!   the 500 Hz band that holds most of the (whitened) clip's energy is
//!   computed over the whole episode from the shared episode block spectra at
//!   1 kHz lag resolution (a complex inverse FFT 1/8 of the size of the
//!   full-resolution one, over 1/16 of the spectrum); the best peaks are
//!   verified and timed by the exact 8 kHz NCC at +-12 samples around them.

use rayon::prelude::*;
use realfft::num_complex::Complex32;
use rustfft::{Fft, FftPlanner};
use std::cell::RefCell;
use std::sync::Arc;

use crate::ncc::{block_size, nms, plans, Peak, PreparedClip};
use crate::store::Samples;

/// LPC order of the whitening filter.
const ORDER: usize = 32;
/// Regularisation: the predictor is fitted as if white noise 30 dB below the
/// episode's power were added (limits the gain in empty spectral regions,
/// e.g. above the resampler's cutoff).
const FLOOR: f64 = 1e-3;

/// LPC prediction-error (whitening) filter `y[n] = sum_k a[k] x[n-k]`, `a[0] = 1`.
#[derive(Clone, Debug)]
pub(crate) struct Whitener {
    a: Vec<f32>,
}

impl Whitener {
    /// Fits the filter on `x` (autocorrelation method, Levinson-Durbin).
    pub fn fit(x: &[f32]) -> Self {
        const CH: usize = 1 << 16;
        let r: Vec<f64> = x
            .par_chunks(CH)
            .enumerate()
            .map(|(ci, c)| {
                let mut r = vec![0.0f64; ORDER + 1];
                let base = ci * CH;
                for (lag, rv) in r.iter_mut().enumerate() {
                    // Products x[n] x[n - lag] with n in this chunk (n >= lag).
                    let start = lag.saturating_sub(base);
                    let mut acc = 0.0f64;
                    for (i, v) in c.iter().enumerate().skip(start) {
                        acc += *v as f64 * x[base + i - lag] as f64;
                    }
                    *rv = acc;
                }
                r
            })
            .collect::<Vec<Vec<f64>>>()
            .into_iter()
            // Summed in chunk order: the same input gives the same filter
            // whatever the thread scheduling (a parallel reduce would not).
            .fold(vec![0.0f64; ORDER + 1], |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            });
        Self { a: levinson(&r) }
    }

    /// Filter order (samples of history each output depends on).
    pub fn order(&self) -> usize {
        self.a.len() - 1
    }

    /// The identity filter (no whitening).
    #[cfg(test)]
    pub fn identity() -> Self {
        Self { a: vec![1.0] }
    }

    /// Filters `x` (zero history before the first sample).
    pub fn apply(&self, x: &[f32]) -> Vec<f32> {
        let mut y = x.to_vec();
        self.apply_in_place(&mut y);
        y
    }

    /// Filters `x` in place (parallel over chunks; zero history).
    pub fn apply_in_place(&self, x: &mut [f32]) {
        let p = self.a.len() - 1;
        const CH: usize = 1 << 16;
        // History of each chunk: the p input samples before it.
        let hist: Vec<Vec<f32>> = (0..x.len().div_ceil(CH))
            .map(|ci| {
                let s = ci * CH;
                x[s.saturating_sub(p)..s].to_vec()
            })
            .collect();
        let a = &self.a;
        x.par_chunks_mut(CH).zip(hist).for_each(|(c, h)| {
            // Backwards in place: y[n] needs x[n-k] (k >= 0), not yet overwritten.
            for n in (0..c.len()).rev() {
                let mut acc = 0.0f32;
                for (k, ak) in a.iter().enumerate() {
                    let v = if n >= k {
                        c[n - k]
                    } else {
                        let j = h.len() as isize - (k - n) as isize;
                        if j >= 0 {
                            h[j as usize]
                        } else {
                            0.0
                        }
                    };
                    acc += ak * v;
                }
                c[n] = acc;
            }
        });
    }
}

/// Levinson-Durbin recursion: prediction-error filter from autocorrelation `r`.
fn levinson(r: &[f64]) -> Vec<f32> {
    let p = r.len() - 1;
    if r[0] <= 0.0 || !r[0].is_finite() {
        return vec![1.0];
    }
    let mut r = r.to_vec();
    r[0] *= 1.0 + FLOOR;
    let mut a = vec![0.0f64; p + 1];
    a[0] = 1.0;
    let mut err = r[0];
    for i in 1..=p {
        let mut acc = r[i];
        for j in 1..i {
            acc += a[j] * r[i - j];
        }
        let k = -acc / err;
        let prev = a.clone();
        for j in 1..i {
            a[j] = prev[j] + k * prev[i - j];
        }
        a[i] = k;
        err *= 1.0 - k * k;
        if err <= 0.0 {
            break;
        }
    }
    a.iter().map(|v| *v as f32).collect()
}

/// Decimation of the coarse lag grid (samples per coarse lag) for a clip of
/// `len` samples: the band searched is `4 kHz / step` wide, so that its
/// time-bandwidth product (how well it tells the clip from other audio)
/// stays above ~1,500 for short clips: 2 kHz for clips under 1.5 s, 1 kHz
/// under 3 s, 500 Hz above. Cost per clip is roughly proportional to 1/step.
fn decimation(len: usize) -> usize {
    let dur = len as f64 / crate::ANALYSIS_RATE as f64;
    if dur < 1.5 {
        2
    } else if dur < 3.0 {
        4
    } else {
        8
    }
}
/// Largest envelope half-width (coarse lags) measured around a peak.
const MAX_WIDTH: usize = 64;
/// Oversampling of the band envelope (coarse lag rate / band width).
const OVERSAMPLE: usize = 2;

thread_local! {
    static CPLAN: RefCell<FftPlanner<f32>> = RefCell::new(FftPlanner::new());
}

fn cplan(m: usize) -> Arc<dyn Fft<f32>> {
    CPLAN.with(|p| p.borrow_mut().plan_fft_inverse(m))
}

/// Coarse-pass parameters.
pub(crate) struct CoarseParams {
    /// Minimum band-envelope NCC of a candidate.
    pub threshold: f32,
    /// Candidates kept per clip (best first): the caller verifies them in batches
    /// while the batches keep finding occurrences.
    pub max_kept: usize,
    /// Peak separation as a fraction of the clip length.
    pub min_sep_frac: f64,
}

/// Coarse candidates of every clip (band envelope NCC, positions in samples;
/// `ncc` is the coarse score). Clips longer than the episode get none.
pub(crate) fn coarse_fine<S: Samples + ?Sized>(
    episode: &S,
    lens: &[usize],
    prepare: &(dyn Fn(usize) -> PreparedClip + Sync),
    params: &CoarseParams,
) -> Vec<Vec<Peak>> {
    let mut out: Vec<Vec<Peak>> = vec![Vec::new(); lens.len()];
    let key = |l: usize| (block_size(l), decimation(l));
    let mut sizes: Vec<(usize, usize)> = lens.iter().map(|&l| key(l)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut chunks: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for (n, step) in sizes {
        let all: Vec<usize> = (0..lens.len())
            .filter(|&i| key(lens[i]) == (n, step) && lens[i] <= episode.len())
            .collect();
        // Clip band spectra are small (n/(2 step) bins); the budget is generous.
        let per_chunk = ((64usize << 20) / (n / 2)).clamp(1, 256);
        for c in all.chunks(per_chunk) {
            chunks.push((n, step, c.to_vec()));
        }
    }
    for (n, step, idx) in chunks {
        if idx.is_empty() {
            continue;
        }
        let m = n / step; // complex samples per block
                          // Short (wide-band) clips: critical sampling of the envelope (their
                          // tonal content has smooth envelopes); others: 2x oversampled.
        let over = if step <= 2 { 1 } else { OVERSAMPLE };
        let step = step * (OVERSAMPLE / over);
        let m = if over == 1 { m / OVERSAMPLE } else { m };
        let nb = m / over; // bins per band
        let band_hop = nb / 2;
        let nbands = (n / 2 + 1 - nb) / band_hop + 1;
        // Clip band spectra (conjugated, scaled 1/n), band index and band energy.
        let specs: Vec<(usize, Vec<Complex32>, f64)> = idx
            .par_iter()
            .map(|&i| {
                let (fwd, _) = plans(n);
                let mut buf = vec![0.0f32; n];
                // The clip is prepared (whitened) here and dropped with this chunk:
                // 1,000 clips are not all held as whitened copies at once.
                let c = prepare(i);
                buf[..c.len()].copy_from_slice(&c.samples);
                let mut spec = fwd.make_output_vec();
                let _ = fwd.process(&mut buf, &mut spec);
                let pw: Vec<f64> = spec.iter().map(|c| c.norm_sqr() as f64).collect();
                let mut best = (0usize, -1.0f64);
                for b in 0..nbands {
                    let e: f64 = pw[b * band_hop..b * band_hop + nb].iter().sum();
                    if e > best.1 {
                        best = (b, e);
                    }
                }
                let k0 = best.0 * band_hop;
                let s = 1.0 / n as f32;
                let cb: Vec<Complex32> = spec[k0..k0 + nb].iter().map(|c| c.conj() * s).collect();
                // Energy of the real band-limited clip (Parseval).
                let ec = 2.0 * best.1 / n as f64;
                (best.0, cb, ec)
            })
            .collect();
        let mut used: Vec<usize> = specs.iter().map(|s| s.0).collect();
        used.sort_unstable();
        used.dedup();
        let lmax = idx.iter().map(|&i| lens[i]).max().unwrap_or(1);
        let hop = ((n - lmax + 1) / step).max(1) * step;
        let last_start = episode.len() - idx.iter().map(|&i| lens[i]).min().unwrap_or(1);
        let nblocks = last_start / hop + 1;
        let thr2 = (params.threshold as f64).powi(2);
        let per_block: Vec<Vec<Vec<Peak>>> = (0..nblocks)
            .into_par_iter()
            .map(|b| {
                let p = b * hop;
                let (fwd, _) = plans(n);
                let inv = cplan(m);
                let end = (p + n).min(episode.len());
                let mut xb = vec![0.0f32; n];
                episode.copy_into(p, &mut xb[..end - p]);
                let mut xs = fwd.make_output_vec();
                let _ = fwd.process(&mut xb, &mut xs);
                let mut scratch = vec![Complex32::new(0.0, 0.0); inv.get_inplace_scratch_len()];
                // Band energy prefix sums of the episode block, per used band.
                let s = 1.0 / n as f32;
                let mut buf = vec![Complex32::new(0.0, 0.0); m];
                let band_pre: Vec<(usize, Vec<f64>)> = used
                    .iter()
                    .map(|&bi| {
                        let k0 = bi * band_hop;
                        buf.iter_mut().for_each(|c| *c = Complex32::new(0.0, 0.0));
                        for (o, x) in buf.iter_mut().zip(&xs[k0..k0 + nb]) {
                            *o = x * s;
                        }
                        inv.process_with_scratch(&mut buf, &mut scratch);
                        let mut pre = Vec::with_capacity(m + 1);
                        pre.push(0.0f64);
                        let mut acc = 0.0f64;
                        for z in &buf {
                            acc += 2.0 * step as f64 * z.norm_sqr() as f64;
                            pre.push(acc);
                        }
                        (bi, pre)
                    })
                    .collect();
                let mut res = Vec::with_capacity(idx.len());
                let mut env = vec![0.0f32; m];
                for (k, &ci) in idx.iter().enumerate() {
                    let l = lens[ci];
                    let (bi, cb, ec) = &specs[k];
                    let k0 = bi * band_hop;
                    let pre = match band_pre.iter().find(|(b, _)| b == bi) {
                        Some((_, pre)) => pre,
                        None => {
                            res.push(Vec::new());
                            continue;
                        }
                    };
                    buf.iter_mut().for_each(|c| *c = Complex32::new(0.0, 0.0));
                    for ((o, x), c) in buf.iter_mut().zip(&xs[k0..k0 + nb]).zip(cb) {
                        *o = x * c;
                    }
                    inv.process_with_scratch(&mut buf, &mut scratch);
                    // Valid lags t = p + j*STEP with t + l <= episode length, j*STEP < hop.
                    let lm = l.div_ceil(step);
                    let valid_t = hop
                        .min((episode.len() - l + 1).saturating_sub(p))
                        .min(n - l + 1);
                    let valid = valid_t.div_ceil(step).min(m.saturating_sub(lm));
                    let min_e = 1e-10 * l as f64;
                    for (j, e) in env.iter_mut().enumerate().take(valid) {
                        let ex = pre[j + lm] - pre[j];
                        let y2 = 4.0 * buf[j].norm_sqr() as f64;
                        *e = if ex > min_e && y2 >= thr2 * ec * ex {
                            (y2 / (ec * ex)).sqrt() as f32
                        } else {
                            0.0
                        };
                    }
                    let mut cands = Vec::new();
                    for j in 0..valid {
                        let v = env[j];
                        if v <= 0.0 {
                            continue;
                        }
                        let lv = if j > 0 { env[j - 1] } else { 0.0 };
                        let rv = if j + 1 < valid { env[j + 1] } else { 0.0 };
                        if v >= lv && v > rv {
                            let mut d = 0.0f64;
                            let den = (lv - 2.0 * v + rv) as f64;
                            if lv > 0.0 && rv > 0.0 && den < 0.0 {
                                d = (0.5 * (lv - rv) as f64 / den).clamp(-0.5, 0.5);
                            }
                            // Half-width of the envelope peak (tonal clips have broad ones).
                            let lim = 0.8 * v;
                            let mut wl = 0usize;
                            while j > wl && env[j - wl - 1] >= lim && wl < MAX_WIDTH {
                                wl += 1;
                            }
                            let mut wr = 0usize;
                            while j + wr + 1 < valid && env[j + wr + 1] >= lim && wr < MAX_WIDTH {
                                wr += 1;
                            }
                            cands.push(Peak {
                                pos: (p as f64) + (j as f64 + d) * step as f64,
                                ncc: v.min(1.0),
                                width: ((wl.max(wr) + 1) * step) as f32,
                            });
                        }
                    }
                    res.push(nms(cands, l, params.min_sep_frac, params.max_kept));
                }
                res
            })
            .collect();
        for (k, &ci) in idx.iter().enumerate() {
            let all: Vec<Peak> = per_block
                .iter()
                .flat_map(|r| r[k].iter().copied())
                .collect();
            out[ci] = nms(all, lens[ci], params.min_sep_frac, params.max_kept);
        }
    }
    out
}

/// Dot product with 8 independent accumulators (vectorises).
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Exact NCC of `clip` at episode starts `[center - r, center + r]` (direct
/// dot products); the best lag with parabolic sub-sample refinement.
pub(crate) fn exact_ncc<S: Samples + ?Sized>(
    episode: &S,
    clip: &PreparedClip,
    center: f64,
    r: usize,
) -> Option<Peak> {
    let l = clip.len();
    if l == 0 || l > episode.len() || clip.norm <= 0.0 {
        return None;
    }
    let c = center.round() as i64;
    let lo = (c - r as i64).max(0);
    let hi = (c + r as i64).min((episode.len() - l) as i64);
    if lo > hi {
        return None;
    }
    let (lo, hi) = (lo as usize, hi as usize);
    // The stretch every lag reads, indexed from `lo`.
    let seg = episode.segment(lo, hi + l);
    let mut e: f64 = seg[..l].iter().map(|v| (*v as f64) * (*v as f64)).sum();
    let min_e = 1e-10 * l as f64;
    let mut vals = Vec::with_capacity(hi - lo + 1);
    for t in 0..=hi - lo {
        if t > 0 {
            let a = seg[t - 1] as f64;
            let b = seg[t + l - 1] as f64;
            e += b * b - a * a;
        }
        let d = dot(&seg[t..t + l], &clip.samples) as f64;
        vals.push(if e > min_e {
            (d / (clip.norm * e.max(0.0).sqrt())) as f32
        } else {
            0.0
        });
    }
    let (bi, bv, d) = crate::dsp::parabolic_peak(&vals);
    Some(Peak {
        pos: (lo + bi) as f64 + d,
        ncc: bv.min(1.0),
        width: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsp::Rng;

    #[test]
    fn whitening_in_place_matches_direct_filter() {
        let mut rng = Rng::new(3);
        let mut x: Vec<f32> = (0..200_000).map(|_| rng.normal() as f32).collect();
        // Colour it.
        for i in (1..x.len()).rev() {
            x[i] += 0.9 * x[i - 1];
        }
        let w = Whitener::fit(&x);
        let direct: Vec<f32> = (0..x.len())
            .map(|n| {
                w.a.iter()
                    .enumerate()
                    .map(|(k, a)| if n >= k { a * x[n - k] } else { 0.0 })
                    .sum()
            })
            .collect();
        let y = w.apply(&x);
        let max_err = y
            .iter()
            .zip(&direct)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max_err < 1e-4, "max error {max_err}");
        // The first-order colouring is removed: lag-1 correlation near 0.
        let r1: f64 = y.windows(2).map(|p| p[0] as f64 * p[1] as f64).sum::<f64>()
            / y.iter().map(|v| (*v as f64).powi(2)).sum::<f64>();
        assert!(r1.abs() < 0.05, "lag-1 correlation {r1}");
        assert_eq!(Whitener::identity().apply(&x[..10]), x[..10].to_vec());
    }

    #[test]
    fn coarse_pass_finds_planted_clip() {
        let mut rng = Rng::new(9);
        let ep: Vec<f32> = (0..400_000).map(|_| rng.normal() as f32).collect();
        let mut ep2 = ep.clone();
        let clip: Vec<f32> = (0..8000).map(|_| rng.normal() as f32).collect();
        for (i, v) in clip.iter().enumerate() {
            ep2[123_457 + i] += 0.5 * v;
        }
        let p = PreparedClip::new(&clip);
        let params = CoarseParams {
            threshold: 0.1,
            max_kept: 4,
            min_sep_frac: 0.75,
        };
        let c = coarse_fine(&ep2, &[p.len()], &|_| p.clone(), &params);
        let best = c[0]
            .iter()
            .max_by(|a, b| a.ncc.total_cmp(&b.ncc))
            .copied()
            .expect("a candidate");
        assert!((best.pos - 123_457.0).abs() <= 12.0, "{best:?}");
        let f = exact_ncc(&ep2, &p, best.pos, 12).expect("exact");
        assert!((f.pos - 123_457.0).abs() < 0.5, "{f:?}");
        assert!(f.ncc > 0.4, "{f:?}");
        // Nothing above a high threshold on the clip-free episode.
        let params = CoarseParams {
            threshold: 0.3,
            ..params
        };
        assert!(coarse_fine(&ep, &[p.len()], &|_| p.clone(), &params)[0].is_empty());
    }
}
