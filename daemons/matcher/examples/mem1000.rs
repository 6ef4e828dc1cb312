//! Peak memory (VmHWM) and wall time of matching N clips (default 1,000) against one
//! synthetic episode (default 60 min), all in-process (no MP3: the episode is rendered
//! at 8 kHz by the corpus generator, the clips are the benchmark library's kinds, 25%
//! each of stings, drops, jingles and themes):
//! `cargo run --release -p archivist-matcher --example mem1000 -- [CLIPS] [MINUTES]`
use std::time::Instant;

use archivist_matcher::{MatchConfig, Matcher};
use archivist_testaudio::{synth_bed, synth_clip, BedKind, ClipKind};

fn vm(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn stage(name: &str, t: Instant) {
    println!(
        "{name:>14}: peak {:6.0} MB, now {:6.0} MB, {:7.2} s",
        vm("VmHWM:"),
        vm("VmRSS:"),
        t.elapsed().as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let minutes: f64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(60.0);
    let t = Instant::now();
    stage("start", t);
    let clips: Vec<(String, Vec<f32>)> = (0..n)
        .map(|i| {
            let (kind, dur) = match i % 4 {
                0 => (ClipKind::Sting, 0.8 + 0.7 * ((i * 37 % 100) as f64 / 100.0)),
                1 => (
                    ClipKind::SpokenDrop,
                    1.5 + 2.5 * ((i * 53 % 100) as f64 / 100.0),
                ),
                2 => (
                    ClipKind::Jingle,
                    3.0 + 5.0 * ((i * 71 % 100) as f64 / 100.0),
                ),
                _ => (
                    ClipKind::Theme,
                    10.0 + 20.0 * ((i * 29 % 100) as f64 / 100.0),
                ),
            };
            (
                format!("c{i:04}"),
                synth_clip(kind, dur, 5000 + i as u64, 8000, false),
            )
        })
        .collect();
    let clip_mb: f64 = clips.iter().map(|c| c.1.len() * 4).sum::<usize>() as f64 / 1e6;
    println!("{n} clips, {clip_mb:.0} MB of f32 samples");
    stage("clips", t);
    let episode = synth_bed(BedKind::Mixed, minutes * 60.0, 77, 8000);
    stage("episode", t);
    let t1 = Instant::now();
    let m = Matcher::from_samples(episode, MatchConfig::default());
    stage("built", t);
    let res = m.find_all(&clips);
    let occ: usize = res
        .iter()
        .map(|r| r.as_ref().map_or(0, |r| r.occurrences.len()))
        .sum();
    stage("matched", t);
    println!(
        "PEAK_MB={:.0} match_wall_s={:.2} occurrences={occ}",
        vm("VmHWM:"),
        t1.elapsed().as_secs_f64()
    );
}
