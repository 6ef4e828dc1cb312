//! Degradations the generator applies to clips and episodes: tempo changes without a
//! pitch change (WSOLA), gains and white noise. Only test audio needs them, so they
//! live here rather than in the matcher's `dsp`.

use archivist_matcher::dsp::{rms, Rng};

/// Changes tempo by `tempo` (1.03 = 3% faster) without changing pitch, with
/// WSOLA (waveform-similarity overlap-add: 40 ms Hann frames, 50% overlap,
/// +-8 ms similarity search). The result lasts about `len / tempo` samples.
pub fn change_tempo(x: &[f32], tempo: f64, rate: u32) -> Vec<f32> {
    let n = ((0.040 * rate as f64) as usize).max(8) & !1;
    let hop = n / 2;
    let tol = (0.008 * rate as f64) as usize;
    let out_len = (x.len() as f64 / tempo).round() as usize;
    let mut out = vec![0.0f32; out_len + n];
    let mut wsum = vec![0.0f32; out_len + n];
    let win: Vec<f32> = (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / n as f32).cos())
        .collect();
    let get = |i: isize| -> f32 {
        if i >= 0 && (i as usize) < x.len() {
            x[i as usize]
        } else {
            0.0
        }
    };
    // Natural continuation of the previously copied frame (in input time).
    let mut prev_src: isize = 0;
    let mut k = 0usize;
    loop {
        let out_pos = k * hop;
        if out_pos >= out_len {
            break;
        }
        let nominal = (out_pos as f64 * tempo).round() as isize;
        let src = if k == 0 {
            0
        } else {
            // Choose the offset near `nominal` whose frame best matches the
            // natural continuation of the previous frame.
            let cont = prev_src + hop as isize;
            let mut best = nominal;
            let mut best_v = f32::NEG_INFINITY;
            for d in -(tol as isize)..=(tol as isize) {
                let cand = nominal + d;
                let mut acc = 0.0f32;
                for i in (0..hop).step_by(2) {
                    acc += get(cand + i as isize) * get(cont + i as isize);
                }
                if acc > best_v {
                    best_v = acc;
                    best = cand;
                }
            }
            best
        };
        for i in 0..n {
            out[out_pos + i] += get(src + i as isize) * win[i];
            wsum[out_pos + i] += win[i];
        }
        prev_src = src;
        k += 1;
    }
    for (o, w) in out.iter_mut().zip(&wsum) {
        if *w > 1e-3 {
            *o /= *w;
        }
    }
    out.truncate(out_len);
    out
}

/// Multiplies `x` by a gain given in dB.
pub fn apply_gain_db(x: &mut [f32], db: f32) {
    let g = 10f32.powf(db / 20.0);
    x.iter_mut().for_each(|v| *v *= g);
}

/// Adds white Gaussian noise at `snr_db` relative to the RMS of `x`.
pub fn add_noise_snr(x: &mut [f32], snr_db: f32, seed: u64) {
    let level = rms(x) / 10f32.powf(snr_db / 20.0);
    let mut rng = Rng::new(seed);
    x.iter_mut().for_each(|v| *v += level * rng.normal() as f32);
}
