//! Writes a deterministic test corpus: an episode with known clips placed in
//! it, the clip files and `truth.json`.
//!
//! ```text
//! archivist-corpus OUT_DIR [--seed N] [--minutes M] [--bed speech|music|mixed]
//!                  [--mp3 KBPS] [--rate HZ] [--espeak]
//! ```
//! The episode mixes every clip kind, spliced and mixed over the bed, with a
//! few degraded copies (gain, noise, speed, tempo, middle-half truncation).

use std::path::PathBuf;
use std::process::ExitCode;

use archivist_testaudio::{BedKind, ClipKind, Degrade, Placement, Scenario};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out: Option<PathBuf> = None;
    let (mut seed, mut minutes, mut bed, mut mp3, mut rate, mut espeak) =
        (1u64, 5.0f64, BedKind::Mixed, None, 8000u32, false);
    let mut i = 0;
    let val = |i: usize| args.get(i + 1).cloned().unwrap_or_default();
    while i < args.len() {
        match args[i].as_str() {
            "--seed" => {
                seed = val(i).parse().unwrap_or(seed);
                i += 1;
            }
            "--minutes" => {
                minutes = val(i).parse().unwrap_or(minutes);
                i += 1;
            }
            "--mp3" => {
                mp3 = val(i).parse().ok();
                i += 1;
            }
            "--rate" => {
                rate = val(i).parse().unwrap_or(rate);
                i += 1;
            }
            "--bed" => {
                bed = match val(i).as_str() {
                    "speech" => BedKind::Speech,
                    "music" => BedKind::Music,
                    _ => BedKind::Mixed,
                };
                i += 1;
            }
            "--espeak" => espeak = true,
            "-h" | "--help" => {
                eprintln!("usage: archivist-corpus OUT_DIR [--seed N] [--minutes M] [--bed speech|music|mixed] [--mp3 KBPS] [--rate HZ] [--espeak]");
                return ExitCode::SUCCESS;
            }
            s => out = Some(PathBuf::from(s)),
        }
        i += 1;
    }
    let Some(out) = out else {
        eprintln!("archivist-corpus: missing OUT_DIR (see --help)");
        return ExitCode::from(2);
    };
    let s = scenario(seed, minutes, bed, mp3, rate, espeak);
    match s.write_to(&out) {
        Ok(t) => {
            for n in &t.notes {
                eprintln!("note: {n}");
            }
            println!(
                "wrote {} ({:.0} s, {} clips, {} occurrences) and truth.json to {}",
                t.episode,
                t.duration_s,
                t.clips.len(),
                t.occurrences.len(),
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("archivist-corpus: cannot write {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

fn scenario(
    seed: u64,
    minutes: f64,
    bed: BedKind,
    mp3: Option<u32>,
    rate: u32,
    espeak: bool,
) -> Scenario {
    let mut s = Scenario::new(seed, minutes * 60.0, bed).with_rate(rate);
    s.episode_mp3_kbps = mp3;
    s.use_espeak = espeak;
    let kinds = [
        ("drop", ClipKind::SpokenDrop, 2.5),
        ("sting", ClipKind::Sting, 1.0),
        ("jingle", ClipKind::Jingle, 5.0),
        ("theme", ClipKind::Theme, 20.0),
    ];
    let ids: Vec<usize> = kinds
        .iter()
        .map(|(n, k, d)| s.add_clip(n, *k, *d))
        .collect();
    let _absent = s.add_clip("absent", ClipKind::Jingle, 4.0);
    let variants = [
        (Placement::Splice, Degrade::default()),
        (Placement::Mix { clip_db: -3.0 }, Degrade::default()),
        (
            Placement::Splice,
            Degrade {
                gain_db: -12.0,
                noise_snr_db: Some(10.0),
                ..Default::default()
            },
        ),
        (
            Placement::Splice,
            Degrade {
                speed: 1.03,
                ..Default::default()
            },
        ),
        (
            Placement::Splice,
            Degrade {
                tempo: 0.97,
                ..Default::default()
            },
        ),
        (
            Placement::Splice,
            Degrade {
                part: (0.25, 0.75),
                ..Default::default()
            },
        ),
    ];
    let total = minutes * 60.0;
    let mut t = 3.0;
    let mut k = 0usize;
    while t < total - 35.0 {
        let c = ids[k % ids.len()];
        let (p, d) = variants[(k / ids.len() + k) % variants.len()].clone();
        // Short clips are not used partially.
        let d = if s.clips[c].duration_s < 3.0 && d.part != (0.0, 1.0) {
            Degrade::default()
        } else {
            d
        };
        s.place_degraded(c, t, p, d);
        t += s.clips[c].duration_s + 8.0 + (k % 5) as f64 * 3.0;
        k += 1;
    }
    s
}
