use archivist_matcher::{MatchConfig, MatchMode, Matcher};
use archivist_testaudio::{synth_bed, synth_clip, BedKind, ClipKind};
use std::time::Instant;
fn main() {
    let mins: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60.0);
    let n: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let t = Instant::now();
    let ep = synth_bed(BedKind::Mixed, mins * 60.0, 7, 8000);
    eprintln!("synth {:.2}s", t.elapsed().as_secs_f64());
    let clips: Vec<(String, Vec<f32>)> = (0..n)
        .map(|i| {
            let kind = [
                ClipKind::Sting,
                ClipKind::SpokenDrop,
                ClipKind::Jingle,
                ClipKind::Theme,
            ][i % 4];
            let d = [1.0, 2.0, 5.0, 20.0][i % 4];
            (
                format!("c{i}"),
                synth_clip(kind, d, 1000 + i as u64, 8000, false),
            )
        })
        .collect();
    for mode in [MatchMode::Fast, MatchMode::Exhaustive] {
        let t = Instant::now();
        let m = Matcher::new(
            &ep,
            MatchConfig {
                mode,
                ..Default::default()
            },
        );
        let tb = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let r = m.find_all(&clips);
        let tm = t.elapsed().as_secs_f64();
        let occ: usize = r
            .iter()
            .map(|r| r.as_ref().map(|c| c.occurrences.len()).unwrap_or(0))
            .sum();
        for (c, x) in clips.iter().zip(&r) {
            if let Ok(x) = x {
                for o in &x.occurrences {
                    eprintln!("  {} {:?}", c.0, o);
                }
            }
        }
        eprintln!(
            "{mode:?}: build {tb:.2}s match {tm:.2}s ({:.3} s/clip wall) occ {occ}",
            tm / n as f64
        );
    }
}
