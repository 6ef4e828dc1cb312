//! Held-out benchmark (issue 20): the matcher and the baseline on corpora built from
//! material the project's generator never made, split by source (A: espeak-ng, sox
//! synth, Yaru stings; B: festival, ffmpeg aevalsrc, freedesktop/ALSA stings; see
//! `scripts/heldout-corpus.py`). Tune on A only; B is the report.
//!
//! ```text
//! scripts/heldout-corpus.py .local/heldout                      # reduced: 15 clip-free min per split
//! HELDOUT_DIR=.local/heldout cargo bench -p archivist-matcher --bench heldout
//! ```
//! Environment: `HELDOUT_DIR` (default `.local/heldout`), `HELDOUT_SPLITS` (default
//! `A,B`), `HELDOUT_CONFIGS` (default `full,baseline`), `HELDOUT_EPISODES` (names,
//! default all), `HELDOUT_VERBOSE=1` (print every miss, false positive and late hit),
//! `HELDOUT_CLIPS` (clip names, default all: for tracing one clip; recall then counts
//! every placement, so only the traced clip's lines mean anything),
//! `HELDOUT_MATCH_CONFIG` (a `MatchConfig` JSON object for our configs, e.g.
//! `{"band_threshold":0.1}`; for tuning on split A).
//!
//! A reported occurrence is a hit when it is of the right clip and the clip start it
//! implies (offset - clip_start / speed) is within 0.5 s of a placed copy's; every other
//! report is a false positive. Offset errors compare those clip starts (ms).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use archivist_matcher::decode::decode_file;
use archivist_matcher::{MatchConfig, MatchMode, Matcher};
use serde::Deserialize;

#[derive(Deserialize)]
struct Truth {
    clips: Vec<TClip>,
    episodes: Vec<TEpisode>,
}

#[derive(Deserialize)]
struct TClip {
    name: String,
    kind: String,
    file: String,
    duration_s: f64,
}

#[derive(Deserialize)]
struct TEpisode {
    name: String,
    file: String,
    duration_s: f64,
    clip_free: bool,
    occurrences: Vec<TOcc>,
}

#[derive(Deserialize)]
struct TOcc {
    clip: String,
    offset_s: f64,
    variant: String,
    speed: f64,
    clip_start_s: f64,
}

/// Counters of one (config, split).
#[derive(Default)]
struct Tally {
    /// variant -> (found, placed)
    recall: BTreeMap<String, (usize, usize)>,
    fp_acc: usize,
    fp_clipfree: usize,
    clipfree_h: f64,
    annotated: usize,
    /// False positives (episodes with clips) not annotated `also_explained_by`.
    fp_plain: usize,
    err_whole_ms: Vec<f64>,
    err_warp_ms: Vec<f64>,
    limit_flags: usize,
    match_s: f64,
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// The variant's row name: speed and tempo changes grouped by size, the 1-2 s real
/// stings counted again on their own.
fn groups(o: &TOcc, clip: &TClip) -> Vec<String> {
    let v = match o.variant.as_str() {
        "whole" => "whole".to_string(),
        "partial" => "partial".to_string(),
        s if s.starts_with("speed") => {
            format!("speed{:.0}%", ((o.speed - 1.0).abs() * 100.0).round())
        }
        s if s.starts_with("tempo") => "tempo3%".to_string(),
        s => s.to_string(),
    };
    let mut out = vec![v.clone()];
    if clip.kind == "sting" && (0.9..=2.2).contains(&clip.duration_s) && v != "whole" {
        out.push("sting1-2s(changed)".to_string());
    }
    if clip.kind == "sting" && v == "whole" {
        out.push("sting(whole)".to_string());
    }
    out
}

fn main() {
    let dir = PathBuf::from(env("HELDOUT_DIR", ".local/heldout"));
    let splits = env("HELDOUT_SPLITS", "A,B");
    let configs = env("HELDOUT_CONFIGS", "full,baseline");
    let only = std::env::var("HELDOUT_EPISODES").ok();
    let verbose = std::env::var_os("HELDOUT_VERBOSE").is_some();
    let started = Instant::now();
    let mut table: Vec<(String, String, Tally)> = Vec::new();
    for split in splits.split(',').map(str::trim) {
        let sd = dir.join(split);
        let truth: Truth = match std::fs::read(sd.join("truth.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
        {
            Some(t) => t,
            None => {
                eprintln!(
                    "{}: no truth.json (run scripts/heldout-corpus.py)",
                    sd.display()
                );
                continue;
            }
        };
        let only_clips = std::env::var("HELDOUT_CLIPS").ok();
        let clips: Vec<(String, Vec<f32>)> = truth
            .clips
            .iter()
            .filter(|c| {
                only_clips
                    .as_deref()
                    .is_none_or(|o| o.split(',').any(|n| n == c.name))
            })
            .map(|c| {
                let d = decode_file(&sd.join(&c.file))
                    .unwrap_or_else(|e| panic!("clip {}: {e}", c.name));
                (c.name.clone(), d.samples)
            })
            .collect();
        let by_name: BTreeMap<&str, &TClip> =
            truth.clips.iter().map(|c| (c.name.as_str(), c)).collect();
        for cfg_name in configs.split(',').map(str::trim) {
            let mode = match cfg_name {
                "full" => MatchMode::Full,
                "fast" => MatchMode::Fast,
                "baseline" => MatchMode::Exhaustive,
                other => panic!("unknown config {other}"),
            };
            let mut t = Tally::default();
            for ep in &truth.episodes {
                if only
                    .as_deref()
                    .is_some_and(|o| !o.split(',').any(|n| n == ep.name))
                {
                    continue;
                }
                let audio = decode_file(&sd.join(&ep.file))
                    .unwrap_or_else(|e| panic!("episode {}: {e}", ep.name));
                let t0 = Instant::now();
                let mut cfg: MatchConfig = match std::env::var("HELDOUT_MATCH_CONFIG") {
                    // Settings under test (JSON object, missing fields default).
                    Ok(j) if mode != MatchMode::Exhaustive => {
                        serde_json::from_str(&j).expect("HELDOUT_MATCH_CONFIG: MatchConfig JSON")
                    }
                    _ => MatchConfig::default(),
                };
                cfg.mode = mode;
                let m = Matcher::from_samples(audio.samples, cfg);
                let res = m.find_all(&clips);
                let secs = t0.elapsed().as_secs_f64();
                t.match_s += secs;
                if ep.clip_free {
                    t.clipfree_h += ep.duration_s / 3600.0;
                }
                let mut used = vec![false; ep.occurrences.len()];
                for o in &ep.occurrences {
                    let c = by_name[o.clip.as_str()];
                    for g in groups(o, c) {
                        t.recall.entry(g).or_default().1 += 1;
                    }
                }
                for ((name, _), r) in clips.iter().zip(&res) {
                    let Ok(r) = r else {
                        eprintln!("{split} {cfg_name} {}: {name}: {r:?}", ep.name);
                        continue;
                    };
                    if r.limit_reached {
                        t.limit_flags += 1;
                    }
                    for o in &r.occurrences {
                        let anchor = o.offset_s - o.clip_start_s / f64::from(o.speed);
                        let best = ep
                            .occurrences
                            .iter()
                            .enumerate()
                            .filter(|(i, x)| &x.clip == name && !used[*i])
                            .map(|(i, x)| (i, x, x.offset_s - x.clip_start_s / x.speed))
                            .filter(|(_, _, a)| (a - anchor).abs() <= 0.5)
                            .min_by(|a, b| (a.2 - anchor).abs().total_cmp(&(b.2 - anchor).abs()));
                        if !o.also_explained_by.is_empty() {
                            t.annotated += 1;
                        }
                        match best {
                            Some((i, x, a)) => {
                                used[i] = true;
                                let c = by_name[x.clip.as_str()];
                                for g in groups(x, c) {
                                    t.recall.entry(g).or_default().0 += 1;
                                }
                                let err = (a - anchor).abs() * 1000.0;
                                if x.variant == "whole" {
                                    t.err_whole_ms.push(err);
                                } else if x.variant != "partial" {
                                    t.err_warp_ms.push(err);
                                }
                                if verbose && (err > 5.0 && x.variant == "whole" || err > 20.0) {
                                    println!(
                                        "LATE {split} {cfg_name} {} {name} {} at {:.3}: {err:.1} ms {o:?}",
                                        ep.name, x.variant, x.offset_s
                                    );
                                }
                            }
                            None => {
                                if ep.clip_free {
                                    t.fp_clipfree += 1;
                                } else {
                                    t.fp_acc += 1;
                                    if o.also_explained_by.is_empty() {
                                        t.fp_plain += 1;
                                    }
                                }
                                if verbose {
                                    println!("FP {split} {cfg_name} {} {name}: {o:?}", ep.name);
                                }
                            }
                        }
                    }
                }
                if verbose {
                    for (i, x) in ep.occurrences.iter().enumerate() {
                        if !used[i] {
                            println!(
                                "MISS {split} {cfg_name} {} {} {} at {:.3} ({:.2} s clip)",
                                ep.name,
                                x.clip,
                                x.variant,
                                x.offset_s,
                                by_name[x.clip.as_str()].duration_s
                            );
                        }
                    }
                }
                eprintln!(
                    "{split} {cfg_name} {}: {:.1} s matched in {secs:.1} s",
                    ep.name, ep.duration_s
                );
            }
            table.push((split.to_string(), cfg_name.to_string(), t));
        }
    }
    let rows = [
        "whole",
        "sting(whole)",
        "speed2%",
        "speed3%",
        "tempo3%",
        "sting1-2s(changed)",
        "partial",
    ];
    println!("\n## Held-out benchmark (recall = found/placed; FP = false positives)");
    print!("{:<6} {:<9}", "split", "config");
    for r in rows {
        print!(" {:>19}", r);
    }
    println!(
        " {:>9} {:>14} {:>5} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "FP(ep)", "FP(clip-free)", "notes", "err_med", "err_max", "warp_med", "warp_max", "match_s"
    );
    for (split, cfg, t) in &table {
        print!("{split:<6} {cfg:<9}");
        for r in rows {
            match t.recall.get(r) {
                Some((f, p)) if *p > 0 => print!(
                    " {:>19}",
                    format!("{f}/{p} {:.0}%", 100.0 * *f as f64 / *p as f64)
                ),
                _ => print!(" {:>19}", "-"),
            }
        }
        println!(
            " {:>9} {:>14} {:>5} {:>8.2} {:>8.2} {:>9.1} {:>9.1} {:>8.1}",
            format!("{}({})", t.fp_acc, t.fp_plain),
            format!("{} in {:.2}h", t.fp_clipfree, t.clipfree_h),
            t.annotated,
            median(&t.err_whole_ms),
            max(&t.err_whole_ms),
            median(&t.err_warp_ms),
            max(&t.err_warp_ms),
            t.match_s
        );
        if t.limit_flags > 0 {
            println!("  ({} clip results hit max_occurrences)", t.limit_flags);
        }
    }
    println!(
        "\nerr_* = clip-start error of whole clips at unchanged speed (ms); warp_* = of speed/tempo copies; \
         notes = occurrences annotated also_explained_by; FP(ep) = false positives in the episodes with clips (in brackets: not annotated); total {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let _ = Path::new(".");
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}
