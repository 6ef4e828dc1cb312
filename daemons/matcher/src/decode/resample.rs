//! Mono at [`ANALYSIS_RATE`] from one stretch of audio at one source rate: rubato's FFT
//! resampler, its delay compensated so sample 0 of the output is time 0 of the input,
//! and the output length exactly `frames * ANALYSIS_RATE / source_rate` (rounded), so
//! segments at different rates can be joined end to end without drifting.

use rubato::{FftFixedIn, Resampler};

use super::DecodeError;
use crate::ANALYSIS_RATE;

/// Streaming mixer + resampler to mono at [`ANALYSIS_RATE`].
/// Sub-chunks per chunk handed to rubato's FFT resampler.
const SUB_CHUNKS: usize = 2;

/// The input chunk for rubato's `FftFixedIn` from `rate` to [`ANALYSIS_RATE`]: about
/// 4096 frames, chosen so its output FFT size is even. The resampler reports its delay
/// as half that size, rounded down: with an odd size (96 kHz -> 8 kHz gives 171) every
/// output sample came half a sample (62 us) late, enough to drop a whitened match's
/// confidence from 0.9 to 0.33.
fn chunk_size(rate: u32) -> usize {
    let gcd = gcd(rate as usize, ANALYSIS_RATE as usize);
    let (step_in, step_out) = (rate as usize / gcd, ANALYSIS_RATE as usize / gcd);
    let mut chunk = 4096usize;
    loop {
        // rubato: fft_chunks = ceil(chunk / sub_chunks / step_in); out = fft_chunks * step_out.
        let fft_chunks = (chunk / SUB_CHUNKS).div_ceil(step_in);
        if (fft_chunks * step_out) % 2 == 0 {
            return chunk;
        }
        chunk += SUB_CHUNKS * step_in;
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

pub(super) struct MonoResampler {
    input: String,
    rs: Option<FftFixedIn<f32>>,
    pending: Vec<f32>,
    out: Vec<f32>,
    frames_in: u64,
    source_rate: u32,
    outbuf: Vec<Vec<f32>>,
}

impl MonoResampler {
    pub(super) fn new(
        source_rate: u32,
        expected_frames: u64,
        input: &str,
    ) -> Result<Self, DecodeError> {
        let rs = if source_rate == ANALYSIS_RATE {
            None
        } else {
            Some(
                FftFixedIn::<f32>::new(
                    source_rate as usize,
                    ANALYSIS_RATE as usize,
                    chunk_size(source_rate),
                    SUB_CHUNKS,
                    1,
                )
                .map_err(|e| DecodeError::AbsurdSampleRate {
                    input: format!("{input} ({e})"),
                    rate: Some(source_rate),
                })?,
            )
        };
        let cap = (expected_frames as f64 * ANALYSIS_RATE as f64 / source_rate as f64) as usize;
        let outbuf = match &rs {
            Some(r) => vec![vec![0.0; r.output_frames_max()]],
            None => Vec::new(),
        };
        Ok(Self {
            input: input.to_owned(),
            rs,
            pending: Vec::new(),
            out: Vec::with_capacity(cap.min(1 << 27) + 16),
            frames_in: 0,
            source_rate,
            outbuf,
        })
    }

    pub(super) fn push_interleaved(&mut self, data: &[f32], nch: usize) -> Result<(), DecodeError> {
        let frames = data.len() / nch;
        self.frames_in += frames as u64;
        let target: &mut Vec<f32> = if self.rs.is_some() {
            &mut self.pending
        } else {
            &mut self.out
        };
        if nch == 1 {
            target.extend_from_slice(&data[..frames]);
        } else {
            let inv = 1.0 / nch as f32;
            target.extend(data.chunks_exact(nch).map(|f| f.iter().sum::<f32>() * inv));
        }
        self.drain(false)
    }

    fn drain(&mut self, flush: bool) -> Result<(), DecodeError> {
        let Some(rs) = self.rs.as_mut() else {
            return Ok(());
        };
        let mut pos = 0;
        loop {
            let need = rs.input_frames_next();
            if self.pending.len() - pos >= need {
                let (_, n_out) = rs
                    .process_into_buffer(&[&self.pending[pos..pos + need]], &mut self.outbuf, None)
                    .map_err(|e| DecodeError::Corrupt {
                        input: self.input.clone(),
                        reason: format!("resampler: {e}"),
                    })?;
                self.out.extend_from_slice(&self.outbuf[0][..n_out]);
                pos += need;
            } else {
                break;
            }
        }
        self.pending.drain(..pos);
        if flush {
            // Feed the remainder and then zeros until the delayed tail is out.
            let delay = rs.output_delay();
            let want = (self.frames_in as f64 * ANALYSIS_RATE as f64 / self.source_rate as f64)
                .round() as usize
                + delay;
            let mut first = true;
            while self.out.len() < want {
                let rest: Vec<f32> = if first {
                    std::mem::take(&mut self.pending)
                } else {
                    Vec::new()
                };
                first = false;
                let input: Option<&[&[f32]]> = if rest.is_empty() {
                    None
                } else {
                    Some(&[rest.as_slice()][..])
                };
                let (_, n_out) = rs
                    .process_partial_into_buffer(input, &mut self.outbuf, None)
                    .map_err(|e| DecodeError::Corrupt {
                        input: self.input.clone(),
                        reason: format!("resampler: {e}"),
                    })?;
                self.out.extend_from_slice(&self.outbuf[0][..n_out]);
            }
            self.out.truncate(want);
            self.out.drain(..delay.min(self.out.len()));
        }
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<Vec<f32>, DecodeError> {
        self.drain(true)?;
        if self.out.capacity() > self.out.len() + self.out.len() / 8 + 1024 {
            self.out.shrink_to_fit();
        }
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_fft_sizes_are_even_for_common_rates() {
        for rate in [
            8000u32, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000, 192000,
        ] {
            let g = gcd(rate as usize, ANALYSIS_RATE as usize);
            let fft_chunks = (chunk_size(rate) / SUB_CHUNKS).div_ceil(rate as usize / g);
            assert_eq!(fft_chunks * (ANALYSIS_RATE as usize / g) % 2, 0, "{rate}");
        }
    }
}
