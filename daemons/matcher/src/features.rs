//! Coarse pass: band-energy features (16 log-spaced bands, 125-3875 Hz,
//! 32 ms frames every 16 ms) compressed with a cube root, correlated with a
//! clip's (or clip segment's) features through overlap-save FFTs whose episode
//! block spectra are computed once per episode and shared by all clips.
//!
//! Episode features are centred per band by a 2 s running mean; query
//! features are centred per band over the query, so the numerator equals the
//! covariance with the episode window; the denominator uses the running-mean
//! centred window energy (a close, cheap stand-in for the window variance).

use rayon::prelude::*;
use realfft::num_complex::Complex32;

use crate::ncc::plans;

/// STFT frame length (samples at 8 kHz).
pub(crate) const FRAME: usize = 256;
/// STFT hop (samples at 8 kHz): 16 ms.
pub(crate) const HOP: usize = 128;
/// Number of bands.
pub(crate) const BANDS: usize = 16;
/// Feature-domain FFT block size (frames) for long episodes.
const BLOCK: usize = 16384;
/// Longest query (frames) the coarse pass handles; longer clips go exhaustive.
pub(crate) const MAX_QUERY: usize = 4096;
/// Half-width (frames) of the running mean used to centre episode features.
const CENTER_HALF: usize = 62;

fn band_edges() -> [usize; BANDS + 1] {
    let mut e = [0usize; BANDS + 1];
    let (lo, hi) = (125.0f64, 3875.0f64);
    let bin_hz = 8000.0 / FRAME as f64;
    for (i, v) in e.iter_mut().enumerate() {
        let f = lo * (hi / lo).powf(i as f64 / BANDS as f64);
        *v = (f / bin_hz).round() as usize;
    }
    for i in 1..=BANDS {
        if e[i] <= e[i - 1] {
            e[i] = e[i - 1] + 1;
        }
    }
    e
}

/// Band-major feature matrix: `data[b * frames + t]`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Features {
    pub frames: usize,
    pub data: Vec<f32>,
}

impl Features {
    pub fn band(&self, b: usize) -> &[f32] {
        &self.data[b * self.frames..(b + 1) * self.frames]
    }
}

/// Raw (uncentred) cube-root band energies of `x`.
pub(crate) fn compute(x: &[f32]) -> Features {
    if x.len() < FRAME {
        return Features::default();
    }
    let frames = (x.len() - FRAME) / HOP + 1;
    let edges = band_edges();
    let win: Vec<f32> = (0..FRAME)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / FRAME as f32).cos())
        .collect();
    const CHUNK: usize = 4096;
    let chunks: Vec<Vec<[f32; BANDS]>> = (0..frames.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let (fwd, _) = plans(FRAME);
            let mut buf = vec![0.0f32; FRAME];
            let mut spec = fwd.make_output_vec();
            let t0 = c * CHUNK;
            let t1 = (t0 + CHUNK).min(frames);
            (t0..t1)
                .map(|t| {
                    let s = t * HOP;
                    for (o, (v, w)) in buf.iter_mut().zip(x[s..s + FRAME].iter().zip(&win)) {
                        *o = v * w;
                    }
                    let _ = fwd.process(&mut buf, &mut spec);
                    let mut row = [0.0f32; BANDS];
                    for (b, r) in row.iter_mut().enumerate() {
                        let e: f32 = spec[edges[b]..edges[b + 1]]
                            .iter()
                            .map(|c| c.norm_sqr())
                            .sum();
                        *r = e.cbrt();
                    }
                    row
                })
                .collect()
        })
        .collect();
    let mut data = vec![0.0f32; frames * BANDS];
    let mut t = 0;
    for ch in chunks {
        for row in ch {
            for (b, v) in row.iter().enumerate() {
                data[b * frames + t] = *v;
            }
            t += 1;
        }
    }
    Features { frames, data }
}

/// Subtracts a centred running mean per band (episode side).
fn center_running(f: &mut Features) {
    let n = f.frames;
    for b in 0..BANDS {
        let row = &mut f.data[b * n..(b + 1) * n];
        let mut pre = Vec::with_capacity(n + 1);
        pre.push(0.0f64);
        let mut acc = 0.0;
        for v in row.iter() {
            acc += *v as f64;
            pre.push(acc);
        }
        for (t, v) in row.iter_mut().enumerate() {
            let lo = t.saturating_sub(CENTER_HALF);
            let hi = (t + CENTER_HALF + 1).min(n);
            *v -= ((pre[hi] - pre[lo]) / (hi - lo) as f64) as f32;
        }
    }
}

/// Episode-side feature index: centred features, per-frame energy prefix sums
/// and per-band block spectra for the overlap-save correlation.
pub(crate) struct FeatureIndex {
    pub frames: usize,
    /// FFT block size (frames) and hop.
    block: usize,
    hop: usize,
    /// prefix[t] = sum over frames < t of sum_b x_b(t)^2.
    prefix: Vec<f64>,
    /// blocks[k][b] = spectrum of band b of block k (BLOCK/2+1 bins).
    blocks: Vec<Vec<Vec<Complex32>>>,
}

impl FeatureIndex {
    pub fn new(episode: &[f32]) -> Self {
        let mut f = compute(episode);
        center_running(&mut f);
        let n = f.frames;
        let mut prefix = Vec::with_capacity(n + 1);
        prefix.push(0.0f64);
        let mut acc = 0.0;
        for t in 0..n {
            for b in 0..BANDS {
                let v = f.data[b * n + t] as f64;
                acc += v * v;
            }
            prefix.push(acc);
        }
        // Short episodes use one small block; long ones overlap-save blocks.
        let block = BLOCK.min((2 * n).next_power_of_two()).max(64);
        let hop = if block < BLOCK {
            block - n.min(block / 2) + 1
        } else {
            BLOCK - MAX_QUERY + 1
        };
        let nblocks = if n == 0 { 0 } else { (n - 1) / hop + 1 };
        let blocks: Vec<Vec<Vec<Complex32>>> = (0..nblocks)
            .into_par_iter()
            .map(|k| {
                let (fwd, _) = plans(block);
                let p = k * hop;
                let end = (p + block).min(n);
                (0..BANDS)
                    .map(|b| {
                        let mut buf = vec![0.0f32; block];
                        buf[..end - p].copy_from_slice(&f.band(b)[p..end]);
                        let mut spec = fwd.make_output_vec();
                        let _ = fwd.process(&mut buf, &mut spec);
                        spec
                    })
                    .collect()
            })
            .collect();
        Self {
            frames: n,
            block,
            hop,
            prefix,
            blocks,
        }
    }

    /// Approximate heap size in bytes.
    pub fn heap_bytes(&self) -> usize {
        self.prefix.len() * 8 + self.blocks.len() * BANDS * (self.block / 2 + 1) * 8
    }

    /// Normalised feature correlation of `query` (raw features, any number of
    /// frames <= MAX_QUERY) at every episode frame lag; returns the curve.
    pub fn correlate(&self, query: &Features) -> Vec<f32> {
        let t = query.frames;
        let (block, hop) = (self.block, self.hop);
        if t == 0 || t > MAX_QUERY || t > self.frames || t > block - hop + 1 {
            return Vec::new();
        }
        let (fwd, inv) = plans(block);
        // Centre the query per band, compute its norm and spectra.
        let mut qnorm = 0.0f64;
        let mut qspec: Vec<Vec<Complex32>> = Vec::with_capacity(BANDS);
        let mut buf = vec![0.0f32; block];
        for b in 0..BANDS {
            let row = query.band(b);
            let mean = row.iter().map(|v| *v as f64).sum::<f64>() / t as f64;
            buf.iter_mut().for_each(|v| *v = 0.0);
            for (o, v) in buf.iter_mut().zip(row) {
                *o = (*v as f64 - mean) as f32;
                qnorm += (*o as f64) * (*o as f64);
            }
            let mut spec = fwd.make_output_vec();
            let _ = fwd.process(&mut buf, &mut spec);
            let s = 1.0 / block as f32;
            spec.iter_mut().for_each(|c| *c = c.conj() * s);
            qspec.push(spec);
        }
        let qnorm = qnorm.sqrt();
        let nlags = self.frames - t + 1;
        let mut out = vec![0.0f32; nlags];
        if qnorm <= 1e-12 {
            return out;
        }
        let mut prod = inv.make_input_vec();
        let mut y = vec![0.0f32; block];
        for (k, blk) in self.blocks.iter().enumerate() {
            let p = k * hop;
            if p >= nlags {
                break;
            }
            prod.iter_mut().for_each(|c| *c = Complex32::new(0.0, 0.0));
            for b in 0..BANDS {
                for ((o, x), q) in prod.iter_mut().zip(&blk[b]).zip(&qspec[b]) {
                    *o += x * q;
                }
            }
            let _ = inv.process(&mut prod, &mut y);
            let valid = hop.min(nlags - p);
            for (i, yi) in y.iter().enumerate().take(valid) {
                let lag = p + i;
                let e = self.prefix[lag + t] - self.prefix[lag];
                out[lag] = if e > 1e-12 {
                    (*yi as f64 / (qnorm * e.sqrt())) as f32
                } else {
                    0.0
                };
            }
        }
        out
    }
}

/// Sub-matrix of frames [t0, t1).
pub(crate) fn slice(f: &Features, t0: usize, t1: usize) -> Features {
    let t1 = t1.min(f.frames);
    let n = t1.saturating_sub(t0);
    let mut data = Vec::with_capacity(n * BANDS);
    for b in 0..BANDS {
        data.extend_from_slice(&f.band(b)[t0..t1]);
    }
    Features { frames: n, data }
}
