//! Peak memory (VmHWM) after each stage of matching one episode:
//! `cargo run --release -p archivist-matcher --example memstages -- EPISODE CLIP...`
use archivist_matcher::decode::decode_file;
use archivist_matcher::{MatchConfig, Matcher};
use std::path::Path;

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

fn stage(name: &str) {
    println!(
        "{name:>14}: peak {:6.0} MB, now {:6.0} MB",
        vm("VmHWM:"),
        vm("VmRSS:")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((episode, clips)) = args.split_first() else {
        eprintln!("usage: memstages EPISODE CLIP...");
        std::process::exit(2);
    };
    stage("start");
    let d = decode_file(Path::new(episode)).expect("decode episode");
    stage("decoded");
    let mut config = MatchConfig::default();
    if std::env::var_os("NO_SPEED").is_some() {
        config.speed_search = false;
    }
    let m = Matcher::from_samples(d.samples, config);
    stage("matcher built");
    let clips: Vec<(String, Vec<f32>)> = clips
        .iter()
        .map(|c| {
            (
                c.clone(),
                decode_file(Path::new(c))
                    .map(|d| d.samples)
                    .unwrap_or_default(),
            )
        })
        .collect();
    stage("clips decoded");
    let found: usize = m
        .find_all(&clips)
        .iter()
        .map(|r| r.as_ref().map_or(0, |r| r.occurrences.len()))
        .sum();
    stage("matched");
    println!(
        "occurrences: {found}, matcher heap {:.0} MB",
        m.heap_bytes() as f64 / 1e6
    );
}
