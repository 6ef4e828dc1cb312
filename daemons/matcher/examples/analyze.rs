//! Accuracy analysis of one benchmark episode: lists every false positive and
//! miss with its confidence and detector, and a summary per category.
//!
//! ```text
//! cargo run --release -p archivist-matcher --example analyze -- BENCH_DIR EPISODE [NCLIPS]
//! ```
//! Environment: `MODE` (full|fast|exhaustive), `THR`, `WTHR`, `NSIG` override
//! the thresholds; `QUIET=1` prints only the summary. The decoded episode is
//! cached as raw f32 in `$TMPDIR/matcher-analyze/` (deterministic decoder).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use archivist_matcher::decode::decode_file;
use archivist_matcher::{Detector, MatchConfig, MatchMode, Matcher};
use archivist_testaudio::TruthOccurrence;

fn load_episode(dir: &Path, name: &str) -> Result<Vec<f32>, String> {
    let cache_dir = std::env::temp_dir().join("matcher-analyze");
    std::fs::create_dir_all(&cache_dir).map_err(|e| format!("{}: {e}", cache_dir.display()))?;
    let cache = cache_dir.join(format!("{name}.f32"));
    if let Ok(b) = std::fs::read(&cache) {
        return Ok(b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect());
    }
    let d = decode_file(&dir.join(format!("{name}.mp3"))).map_err(|e| e.to_string())?;
    let bytes: Vec<u8> = d.samples.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&cache, bytes).map_err(|e| format!("{}: {e}", cache.display()))?;
    Ok(d.samples)
}

fn env_f32(k: &str) -> Option<f32> {
    std::env::var(k).ok().and_then(|v| v.parse().ok())
}

fn main() -> Result<(), String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 2 {
        return Err("usage: analyze BENCH_DIR EPISODE [NCLIPS]".into());
    }
    let dir = PathBuf::from(&a[0]);
    let name = &a[1];
    let nclips: usize = a.get(2).and_then(|v| v.parse().ok()).unwrap_or(100);
    let t = Instant::now();
    let ep = load_episode(&dir, name)?;
    let load_s = t.elapsed().as_secs_f64();
    let truth: Vec<TruthOccurrence> = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("{name}.truth.json")))
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let only: Option<Vec<String>> = std::env::var("CLIPS")
        .ok()
        .map(|v| v.split(',').map(str::to_owned).collect());
    let clips: Vec<(String, Vec<f32>)> = (0..nclips)
        .map(|i| format!("c{i:04}"))
        .filter(|n| only.as_ref().is_none_or(|o| o.contains(n)))
        .map(|n| {
            let s = decode_file(&dir.join("clips").join(format!("{n}.wav")))
                .map(|d| d.samples)
                .unwrap_or_default();
            (n, s)
        })
        .collect();
    let mut cfg = MatchConfig {
        mode: match std::env::var("MODE").as_deref() {
            Ok("fast") => MatchMode::Fast,
            Ok("exhaustive") => MatchMode::Exhaustive,
            _ => MatchMode::Full,
        },
        ..Default::default()
    };
    if let Some(v) = env_f32("THR") {
        cfg.threshold = v;
    }
    if let Some(v) = env_f32("WTHR") {
        cfg.warped_threshold = v;
    }
    if let Some(v) = env_f32("SEGTHR") {
        cfg.segment_threshold = v;
    }
    if let Some(v) = env_f32("MAXW") {
        cfg.max_warped_candidates = v as usize;
    }
    if let Some(v) = env_f32("NSIG") {
        cfg.null_sigmas = v;
    }
    let t = Instant::now();
    let m = Matcher::new(&ep, cfg);
    let res = m.find_all(&clips);
    let match_s = t.elapsed().as_secs_f64();
    let quiet = std::env::var("QUIET").is_ok_and(|v| v == "1");
    // Per category: placed, found.
    let mut cat: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut fp = 0usize;
    let mut fp_conf: Vec<(f32, String)> = Vec::new();
    let mut errs = Vec::new();
    for ((cname, samples), r) in clips.iter().zip(&res) {
        let dur = samples.len() as f64 / 8000.0;
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                println!("ERROR {e}");
                continue;
            }
        };
        let tr: Vec<&TruthOccurrence> = truth.iter().filter(|t| &t.clip == cname).collect();
        let mut used = vec![false; r.occurrences.len()];
        for t in &tr {
            let c = if t.degrade.part != (0.0, 1.0) {
                "partial"
            } else if (t.degrade.speed - 1.0).abs() > 1e-9 {
                "speed"
            } else if (t.degrade.tempo - 1.0).abs() > 1e-9 {
                "tempo"
            } else {
                "whole"
            };
            let e = cat.entry(c).or_default();
            e.0 += 1;
            let implied_t = t.offset_s - t.clip_start_s / t.speed;
            let mut best: Option<(usize, f64)> = None;
            for (i, o) in r.occurrences.iter().enumerate() {
                if used[i] {
                    continue;
                }
                let implied = o.offset_s - o.clip_start_s / o.speed as f64;
                let d = (implied - implied_t).abs();
                if d <= 0.5 && best.is_none_or(|b| d < b.1) {
                    best = Some((i, d));
                }
            }
            match best {
                Some((i, d)) => {
                    used[i] = true;
                    e.1 += 1;
                    let o = &r.occurrences[i];
                    if std::env::var("HITS").is_ok_and(|v| v == "1") {
                        println!(
                            "HIT {cname} {c} dur {dur:.2} conf {:.3} {:?} {:?}",
                            o.confidence, o.detector, t.placement
                        );
                    }
                    if c != "whole" || d > 0.005 {
                        errs.push((c, d * 1000.0));
                    }
                    if !quiet && c == "whole" && o.clip_start_s > 0.0 {
                        println!(
                            "SHORTENED {cname} dur {dur:.2} part {:.2}-{:.2} conf {:.3} {:?}",
                            o.clip_start_s, o.clip_end_s, o.confidence, t.placement
                        );
                    }
                    if !quiet && (d > 0.05 || (c == "whole" && d > 0.005)) {
                        println!(
                            "LATE {cname} {c} dur {dur:.2} err {:.1} ms conf {:.3} {:?} speed {} truth speed {:.3} {:?}",
                            d * 1000.0,
                            o.confidence,
                            o.detector,
                            o.speed,
                            t.speed,
                            t.placement
                        );
                    }
                }
                None => {
                    if !quiet {
                        println!(
                            "MISS {cname} {c} dur {dur:.2} at {:.3} speed {:.3} tempo {:.3} {:?}",
                            t.offset_s, t.degrade.speed, t.degrade.tempo, t.placement
                        );
                    }
                }
            }
        }
        for (i, o) in r.occurrences.iter().enumerate() {
            if used[i] {
                continue;
            }
            fp += 1;
            fp_conf.push((o.confidence, format!("{:?}", o.detector)));
            if !quiet {
                // What truth is there at that time (any clip)?
                let near: Vec<String> = truth
                    .iter()
                    .filter(|t| {
                        let end = t.offset_s + (t.clip_end_s - t.clip_start_s) / t.speed;
                        o.offset_s < end + 0.5 && o.offset_s + dur > t.offset_s - 0.5
                    })
                    .map(|t| format!("{}@{:.2}", t.clip, t.offset_s))
                    .collect();
                println!(
                    "FP {cname} dur {dur:.2} at {:.3} part {:.2}-{:.2} conf {:.3} {} speed {} near [{}]",
                    o.offset_s,
                    o.clip_start_s,
                    o.clip_end_s,
                    o.confidence,
                    if o.detector == Detector::Ncc { "ncc" } else { "warped" },
                    o.speed,
                    near.join(" ")
                );
            }
        }
    }
    fp_conf.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "SUMMARY {name} mode {:?} load {load_s:.1}s match {match_s:.1}s FP {fp} (top conf {:?})",
        m.config().mode,
        &fp_conf[..fp_conf.len().min(5)]
    );
    for (c, (n, f)) in &cat {
        println!("  {c:<8} {f}/{n}");
    }
    let mut e: Vec<f64> = errs
        .iter()
        .filter(|x| x.0 != "whole")
        .map(|x| x.1)
        .collect();
    e.sort_by(|a, b| a.total_cmp(b));
    if !e.is_empty() {
        println!(
            "  warped err median {:.1} ms max {:.1} ms",
            e[e.len() / 2],
            e[e.len() - 1]
        );
    }
    Ok(())
}
