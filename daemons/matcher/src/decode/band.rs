//! The analysis band: every decoded signal (episode or clip, whatever its source rate)
//! is low-passed at [`ANALYSIS_BAND_HZ`] after resampling to 8 kHz.
//!
//! Why: above ~3.5 kHz the signals at 8 kHz differ by how they got there, not by what
//! they are. rubato's resampler cuts at 0.92-0.97 of 4 kHz depending on the source
//! rate, an 8 kHz file carries whatever its encoder left up to 4 kHz (LAME cuts 8 kHz MP3
//! near 3 kHz), and the matcher's whitening filter lifts exactly that sparse top band.
//! Measured before this filter (8 kHz WAV clips against one episode): 1.00 confidence at
//! 8 kHz, 0.90 at 22-48 kHz, 0.47 for an 8 kHz VBR MP3. One linear-phase band for all
//! makes them agree.
//!
//! The filter is a 255-tap windowed sinc (Blackman), applied by FFT overlap-add with
//! realfft (already a dependency); its delay is removed, so offsets do not move.

use realfft::num_complex::Complex32;
use realfft::RealFftPlanner;

use crate::ANALYSIS_RATE;

/// Upper edge of the analysis band (Hz): the -6 dB point of the low-pass.
pub const ANALYSIS_BAND_HZ: f32 = 3400.0;

/// Filter length (odd, so the delay is a whole number of samples).
const TAPS: usize = 255;
/// FFT size of the overlap-add.
const FFT: usize = 8192;

fn taps() -> Vec<f32> {
    let fc = ANALYSIS_BAND_HZ as f64 / ANALYSIS_RATE as f64;
    let m = (TAPS - 1) as f64;
    let mut h: Vec<f64> = (0..TAPS)
        .map(|n| {
            let t = n as f64 - m / 2.0;
            let sinc = if t == 0.0 {
                2.0 * fc
            } else {
                (2.0 * std::f64::consts::PI * fc * t).sin() / (std::f64::consts::PI * t)
            };
            let w = 0.42 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / m).cos()
                + 0.08 * (4.0 * std::f64::consts::PI * n as f64 / m).cos();
            sinc * w
        })
        .collect();
    let sum: f64 = h.iter().sum();
    h.iter_mut().for_each(|v| *v /= sum);
    h.into_iter().map(|v| v as f32).collect()
}

/// Low-passes `x` to the analysis band in place (same length, no delay).
pub fn band_limit(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let mut planner = RealFftPlanner::<f32>::new();
    let r2c = planner.plan_fft_forward(FFT);
    let c2r = planner.plan_fft_inverse(FFT);
    let mut buf = r2c.make_input_vec();
    buf[..TAPS].copy_from_slice(&taps());
    let mut h = r2c.make_output_vec();
    if r2c.process(&mut buf, &mut h).is_err() {
        return;
    }
    let scale = 1.0 / FFT as f32;
    h.iter_mut().for_each(|c| *c *= scale);
    let block = FFT - TAPS + 1;
    let delay = (TAPS - 1) / 2;
    let n = x.len();
    let mut spec: Vec<Complex32> = r2c.make_output_vec();
    let mut time = c2r.make_output_vec();
    // In place, with only the overlap carried: after the block at `start`, the filter's
    // output up to `start + len` is final, and output sample p is y[p - delay], which
    // lies before every input sample a later block still reads.
    let mut carry = vec![0.0f32; TAPS - 1];
    let mut start = 0;
    while start < n {
        let len = block.min(n - start);
        buf.iter_mut().for_each(|v| *v = 0.0);
        buf[..len].copy_from_slice(&x[start..start + len]);
        if r2c.process(&mut buf, &mut spec).is_err() {
            return;
        }
        spec.iter_mut().zip(&h).for_each(|(s, f)| *s *= f);
        // A real signal's spectrum: DC and Nyquist are real.
        spec[0].im = 0.0;
        if let Some(last) = spec.last_mut() {
            last.im = 0.0;
        }
        if c2r.process(&mut spec, &mut time).is_err() {
            return;
        }
        time.iter_mut().zip(&carry).for_each(|(t, c)| *t += c);
        for (k, v) in time[..len].iter().enumerate() {
            if let Some(i) = (start + k).checked_sub(delay) {
                x[i] = *v;
            }
        }
        carry.copy_from_slice(&time[len..len + TAPS - 1]);
        start += len;
    }
    // The last `delay` outputs are in the carry.
    for (k, v) in carry.iter().enumerate().take(delay) {
        if let Some(i) = (n + k).checked_sub(delay) {
            x[i] = *v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (2.0 * std::f32::consts::PI * hz * i as f32 / ANALYSIS_RATE as f32).sin())
            .collect()
    }

    fn rms(x: &[f32]) -> f32 {
        (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt()
    }

    #[test]
    fn passes_the_band_stops_the_top_and_keeps_time() {
        let n = 20_000;
        let mut low = tone(1000.0, n);
        let orig = low.clone();
        band_limit(&mut low);
        // In band: unchanged, not shifted (compare away from the edges).
        let err: f32 = low[500..n - 500]
            .iter()
            .zip(&orig[500..n - 500])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(err < 0.01, "{err}");
        let mut high = tone(3800.0, n);
        band_limit(&mut high);
        assert!(rms(&high[500..n - 500]) < 0.01, "{}", rms(&high));
    }
}
