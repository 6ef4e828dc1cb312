//! Where the matcher keeps an episode's samples, and how its detectors read them.
//!
//! A 2-hour episode at [`crate::ANALYSIS_RATE`] is 57.6 million samples: 230 MB as f32.
//! The matcher keeps its whitened episode as 16-bit integers with one scale
//! ([`Pcm16`], 115 MB) and the detectors read the stretch they need as f32
//! ([`Samples::segment`], [`Samples::copy_into`]): every detector works block by block or
//! around a candidate anyway. The quantisation step is about 1/500 of the episode's RMS
//! (some 65 dB below it), far below anything that moves an NCC.

use std::borrow::Cow;

/// Read access to mono samples, whatever their storage.
pub(crate) trait Samples: Sync {
    /// Number of samples.
    fn len(&self) -> usize;

    /// Samples `lo..hi` as f32 (borrowed when stored as f32).
    fn segment(&self, lo: usize, hi: usize) -> Cow<'_, [f32]>;

    /// Copies samples `lo..lo + out.len()` into `out`.
    fn copy_into(&self, lo: usize, out: &mut [f32]) {
        out.copy_from_slice(&self.segment(lo, lo + out.len()));
    }
}

impl Samples for [f32] {
    fn len(&self) -> usize {
        <[f32]>::len(self)
    }

    fn segment(&self, lo: usize, hi: usize) -> Cow<'_, [f32]> {
        Cow::Borrowed(&self[lo..hi])
    }

    fn copy_into(&self, lo: usize, out: &mut [f32]) {
        out.copy_from_slice(&self[lo..lo + out.len()]);
    }
}

impl Samples for Vec<f32> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn segment(&self, lo: usize, hi: usize) -> Cow<'_, [f32]> {
        self.as_slice().segment(lo, hi)
    }

    fn copy_into(&self, lo: usize, out: &mut [f32]) {
        self.as_slice().copy_into(lo, out)
    }
}

/// log2 of the samples per chunk of a [`Pcm16`] (4 Mi samples, 8 MB).
const CHUNK_BITS: u32 = 22;
const CHUNK: usize = 1 << CHUNK_BITS;

/// Peak of the kept range, in mean absolute values of the whole signal (about 64 RMS
/// for Gaussian-like audio; the mean absolute value, unlike the RMS, is not dominated by
/// a few clicks): samples beyond it saturate instead of coarsening the step for
/// everything else.
const HEADROOM_MEAN_ABS: f64 = 80.0;

/// Samples as 16-bit integers times one scale, in fixed-size chunks.
pub(crate) struct Pcm16 {
    chunks: Vec<Vec<i16>>,
    len: usize,
    scale: f32,
}

impl Pcm16 {
    /// Converts `x`, releasing its memory as it goes: the last chunk is converted, then
    /// cut off the f32 buffer (a large allocation shrinks in place), so the peak is the
    /// f32 samples plus one chunk, not both copies.
    pub fn from_f32(mut x: Vec<f32>) -> Pcm16 {
        let len = x.len();
        let (sum_abs, peak) = x.iter().fold((0.0f64, 0.0f32), |(s, p), v| {
            (s + f64::from(v.abs()), p.max(v.abs()))
        });
        let mean_abs = sum_abs / len.max(1) as f64;
        let range = (f64::from(peak)).min(HEADROOM_MEAN_ABS * mean_abs);
        let scale = if range > 0.0 {
            (range / f64::from(i16::MAX)) as f32
        } else {
            1.0
        };
        let inv = 1.0 / scale;
        let mut chunks = Vec::with_capacity(len.div_ceil(CHUNK));
        while !x.is_empty() {
            let start = ((x.len() - 1) >> CHUNK_BITS) << CHUNK_BITS;
            let chunk: Vec<i16> = x[start..]
                .iter()
                .map(|v| {
                    (v * inv)
                        .round()
                        .clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i16
                })
                .collect();
            chunks.push(chunk);
            x.truncate(start);
            x.shrink_to_fit();
        }
        chunks.reverse();
        Pcm16 { chunks, len, scale }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity() * 2).sum()
    }
}

impl Samples for Pcm16 {
    fn len(&self) -> usize {
        self.len
    }

    fn segment(&self, lo: usize, hi: usize) -> Cow<'_, [f32]> {
        let mut out = vec![0.0f32; hi - lo];
        self.copy_into(lo, &mut out);
        Cow::Owned(out)
    }

    fn copy_into(&self, lo: usize, out: &mut [f32]) {
        assert!(lo + out.len() <= self.len, "segment beyond the episode");
        let mut pos = lo;
        let mut done = 0;
        while done < out.len() {
            let chunk = &self.chunks[pos >> CHUNK_BITS];
            let at = pos & (CHUNK - 1);
            let n = (chunk.len() - at).min(out.len() - done);
            for (o, v) in out[done..done + n].iter_mut().zip(&chunk[at..at + n]) {
                *o = f32::from(*v) * self.scale;
            }
            done += n;
            pos += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as f32 * 0.37).sin() + 0.3 * (i as f32 * 0.011).cos()) * 0.2)
            .collect()
    }

    #[test]
    fn segments_across_chunk_edges_match_the_f32_samples() {
        let x = signal(2 * CHUNK + 1234);
        let p = Pcm16::from_f32(x.clone());
        assert_eq!(Samples::len(&p), x.len());
        let rms = (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt();
        for (lo, hi) in [
            (0, 10),
            (CHUNK - 5, CHUNK + 5),
            (2 * CHUNK - 3, x.len()),
            (77, 77),
        ] {
            let seg = p.segment(lo, hi);
            assert_eq!(seg.len(), hi - lo);
            for (a, b) in seg.iter().zip(&x[lo..hi]) {
                assert!((a - b).abs() <= rms / 500.0, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn a_rare_click_saturates_instead_of_coarsening_the_step() {
        let mut x = signal(100_000);
        x[500] = 1000.0;
        let p = Pcm16::from_f32(x.clone());
        let seg = p.segment(0, 1000);
        let rms = 0.15;
        let worst = seg
            .iter()
            .zip(&x[..1000])
            .enumerate()
            .filter(|(i, _)| *i != 500)
            .map(|(_, (a, b))| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < rms / 100.0, "step too coarse: {worst}");
        assert!(seg[500] > 1.0 && seg[500] < 1000.0, "the click saturates");
    }

    #[test]
    fn silence_stays_silent() {
        let p = Pcm16::from_f32(vec![0.0; 1000]);
        assert!(p.segment(0, 1000).iter().all(|v| *v == 0.0));
    }
}
