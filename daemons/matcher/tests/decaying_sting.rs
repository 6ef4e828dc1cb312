//! A sting whose loud attack is followed by a long, quiet, decaying tonal tail, played
//! 2-3% slow, is found by the warped detector (issue 20, held-out split A: every
//! speed-changed copy of the Yaru `desktop-login` sound was missed). The tail's 2 s
//! feature segments correlate broadly and peak 100-250 ms from the attack's estimate, so
//! the segments' votes met only at the edge of the speed grid, at a wrong start, and the
//! candidate failed verification. Needs the Yaru sound theme (`yaru-theme-sound`, in `scripts/deps.sh`).
//! Not yet: in this episode (white noise, no music) the copies played 2-3% *fast* are
//! still missed: the retry ranks the right speed on the 1% grid (pass-1 score 0.87-0.89)
//! but its full verification fails (docs/matcher.md, run J).

use std::path::Path;

use archivist_matcher::decode::decode_file;
use archivist_matcher::dsp::Rng;
use archivist_matcher::{MatchConfig, Matcher};

const RATE: usize = archivist_matcher::ANALYSIS_RATE as usize;
const STING: &str = "/usr/share/sounds/Yaru/stereo/desktop-login.oga";

/// `x` played at `speed` (pitch changes), by linear interpolation.
fn played_at(x: &[f32], speed: f64) -> Vec<f32> {
    let n = ((x.len() - 1) as f64 / speed) as usize;
    (0..n)
        .map(|i| {
            let t = i as f64 * speed;
            let k = t as usize;
            let f = (t - k as f64) as f32;
            x[k] * (1.0 - f) + x[(k + 1).min(x.len() - 1)] * f
        })
        .collect()
}

#[test]
fn a_decaying_sting_is_found_at_changed_speed() {
    assert!(
        Path::new(STING).exists(),
        "{STING} missing: install yaru-theme-sound (scripts/matcher-deps.sh)"
    );
    let clip = decode_file(Path::new(STING)).expect("decodes").samples;
    let rms = (clip.iter().map(|v| v * v).sum::<f32>() / clip.len() as f32).sqrt();
    let mut rng = Rng::new(3);
    let mut ep: Vec<f32> = (0..90 * RATE)
        .map(|_| 0.1 * rms * rng.normal() as f32)
        .collect();
    let placed = [(10.0, 0.97), (30.0, 0.98)];
    for (at, speed) in placed {
        let start = (at * RATE as f64) as usize;
        for (i, v) in played_at(&clip, speed).into_iter().enumerate() {
            ep[start + i] += v;
        }
    }
    let r = Matcher::new(&ep, MatchConfig::default())
        .find(&clip, "desktop-login")
        .expect("matches");
    for (at, speed) in placed {
        let hit = r.occurrences.iter().find(|o| {
            let anchor = o.offset_s - o.clip_start_s / f64::from(o.speed);
            (anchor - at).abs() <= 0.02 && (f64::from(o.speed) - speed).abs() < 0.01
        });
        assert!(
            hit.is_some(),
            "copy at {at} s, speed {speed}: not found within 20 ms: {:?}",
            r.occurrences
        );
    }
}
