//! Small DSP helpers shared by the matcher, the test-audio generator
//! (`archivist-testaudio`) and tests: resampling (rubato), speed changes, levels,
//! peak interpolation and a deterministic random generator.

use rubato::{
    Resampler, SincFixedIn, SincInterpolationParameters, SincInterpolationType, WindowFunction,
};

/// Resamples `x` by `ratio` (output rate / input rate) with a windowed-sinc
/// resampler (rubato). The output has `round(len * ratio)` samples and is
/// time-aligned with the input (the resampler delay is removed).
pub fn resample(x: &[f32], ratio: f64) -> Vec<f32> {
    let out_len = (x.len() as f64 * ratio).round() as usize;
    if x.is_empty() || out_len == 0 {
        return Vec::new();
    }
    if (ratio - 1.0).abs() < 1e-12 {
        return x.to_vec();
    }
    let params = SincInterpolationParameters {
        sinc_len: 128,
        f_cutoff: 0.92,
        interpolation: SincInterpolationType::Cubic,
        oversampling_factor: 128,
        window: WindowFunction::BlackmanHarris2,
    };
    let chunk = 4096usize;
    let mut rs = match SincFixedIn::<f32>::new(ratio, 1.0, params, chunk, 1) {
        Ok(r) => r,
        Err(_) => return linear_resample(x, ratio),
    };
    let delay = rs.output_delay();
    let want = out_len + delay;
    let mut out = Vec::with_capacity(want + chunk * 2);
    let mut outbuf = vec![vec![0.0f32; rs.output_frames_max()]];
    let zeros = vec![0.0f32; chunk];
    let mut pos = 0usize;
    while out.len() < want {
        let slice: &[f32] = if pos + chunk <= x.len() {
            &x[pos..pos + chunk]
        } else if pos < x.len() {
            &x[pos..]
        } else {
            &zeros
        };
        pos += chunk;
        let res = if slice.len() == chunk {
            rs.process_into_buffer(&[slice], &mut outbuf, None)
        } else {
            rs.process_partial_into_buffer(Some(&[slice]), &mut outbuf, None)
        };
        match res {
            Ok((_, n)) => out.extend_from_slice(&outbuf[0][..n]),
            Err(_) => return linear_resample(x, ratio),
        }
    }
    out.truncate(want);
    out.drain(..delay);
    out
}

/// Resamples between two integer rates with rubato's FFT resampler (fast for
/// long signals); output has `round(len * to / from)` samples, delay removed.
pub fn resample_fixed(x: &[f32], from: u32, to: u32) -> Vec<f32> {
    use rubato::FftFixedIn;
    let out_len = (x.len() as f64 * to as f64 / from as f64).round() as usize;
    if from == to {
        return x.to_vec();
    }
    let Ok(mut rs) = FftFixedIn::<f32>::new(from as usize, to as usize, 8192, 2, 1) else {
        return resample(x, to as f64 / from as f64);
    };
    let delay = rs.output_delay();
    let want = out_len + delay;
    let mut out = Vec::with_capacity(want + 16384);
    let mut outbuf = vec![vec![0.0f32; rs.output_frames_max()]];
    let mut pos = 0usize;
    while out.len() < want {
        let need = rs.input_frames_next();
        let res = if pos + need <= x.len() {
            let r = rs.process_into_buffer(&[&x[pos..pos + need]], &mut outbuf, None);
            pos += need;
            r
        } else if pos < x.len() {
            let r = rs.process_partial_into_buffer(Some(&[&x[pos..]]), &mut outbuf, None);
            pos = x.len();
            r
        } else {
            rs.process_partial_into_buffer(None::<&[&[f32]]>, &mut outbuf, None)
        };
        match res {
            Ok((_, n)) => out.extend_from_slice(&outbuf[0][..n]),
            Err(_) => return resample(x, to as f64 / from as f64),
        }
    }
    out.truncate(want);
    out.drain(..delay);
    out
}

fn linear_resample(x: &[f32], ratio: f64) -> Vec<f32> {
    let out_len = (x.len() as f64 * ratio).round() as usize;
    (0..out_len)
        .map(|i| {
            let t = i as f64 / ratio;
            let i0 = t.floor() as usize;
            let f = (t - i0 as f64) as f32;
            let a = x.get(i0).copied().unwrap_or(0.0);
            let b = x.get(i0 + 1).copied().unwrap_or(0.0);
            a + (b - a) * f
        })
        .collect()
}

/// Plays `x` `speed` times faster (pitch changes too, like a tape or a
/// resampled file): the result lasts `len / speed` samples.
pub fn change_speed(x: &[f32], speed: f64) -> Vec<f32> {
    resample(x, 1.0 / speed)
}

/// Root-mean-square level of `x` (0 for an empty slice).
pub fn rms(x: &[f32]) -> f32 {
    if x.is_empty() {
        return 0.0;
    }
    (x.iter().map(|v| (*v as f64) * (*v as f64)).sum::<f64>() / x.len() as f64).sqrt() as f32
}

/// The highest value of `vals` (the first on ties) and its sub-sample offset from a
/// parabola through it and its two neighbours, in [-0.5, 0.5] (0 at an edge, on a flat
/// top, or for an empty slice, whose value is `-inf`). Every detector times its peaks
/// this way.
pub fn parabolic_peak(vals: &[f32]) -> (usize, f32, f64) {
    let (bi, bv) = vals
        .iter()
        .enumerate()
        .fold((0usize, f32::NEG_INFINITY), |(bi, bv), (i, v)| {
            if *v > bv {
                (i, *v)
            } else {
                (bi, bv)
            }
        });
    let mut d = 0.0;
    if bi > 0 && bi + 1 < vals.len() {
        let (l, r) = (vals[bi - 1], vals[bi + 1]);
        let den = (l - 2.0 * bv + r) as f64;
        if den < 0.0 {
            d = (0.5 * (l - r) as f64 / den).clamp(-0.5, 0.5);
        }
    }
    (bi, bv, d)
}

/// Deterministic xorshift64* generator (no external RNG, stable across versions).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeds the generator (any seed, 0 included).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03 | 1)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
    /// Uniform integer in [0, n) (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n.max(1)
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}
