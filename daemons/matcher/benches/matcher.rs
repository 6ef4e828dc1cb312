//! End-to-end benchmark of the clip matcher (plain `main`, prints tables).
//!
//! ```text
//! scripts/matcher-bench.sh            # or:
//! cargo bench -p archivist-matcher --bench matcher
//! ```
//! Environment: `BENCH_DIR` (default `.local/matcher-bench`, files are reused
//! between runs: generation is deterministic), `BENCH_MINUTES` (episode
//! length, default 60), `BENCH_CLEAN_HOURS` (clip-free episodes, default 10),
//! `BENCH_LIB` (library size for the large run, default 1000),
//! `BENCH_BASELINE_LARGE=0` to skip the baseline on the large library,
//! `BENCH_SKIP_ACCURACY=1` and `BENCH_SPEED_MODES=full,fast,baseline` to run
//! only (some of) the speed measurements, `BENCH_EPISODES=clean,warped,...`
//! to run the accuracy rows on some episodes only, `BENCH_CLIPFREE_MODES`
//! (configs run on clip-free episodes, default all), `BENCH_AUDFPRINT=0`,
//! `BENCH_AUDFPRINT_EPISODES=clean,...` (audfprint on some episodes only),
//! `BENCH_SKIP_SPEED=1` (accuracy rows only), `BENCH_AUDFPRINT_BIN` (path
//! of the audfprint script, default `.local/audfprint/bin/audfprint`),
//! `BENCH_GENERATE_ONLY=1` (generate the corpus and exit),
//! `BENCH_PROBE_CLIPS` (clips of the 2-hour memory probe, default 100),
//! `BENCH_MATCH_CONFIG` (a `MatchConfig` JSON object for our configs, e.g.
//! `{"long_clip_threshold":0.26}`).
//!
//! Corpus: a library of clips (spoken drops, ~1 s tonal stings, jingles,
//! 10-30 s themes); three episodes built from the first 100 clips
//! (`clean`: spliced and mixed at 0/-3/-6 dB over speech and music, MP3
//! 128 kbps stereo; `degraded`: spliced at -12 dB gain or mixed at -6..0 dB,
//! whole episode + 10 dB SNR white noise, MP3 64 kbps mono; `warped`: +-3%
//! speed and tempo changes and middle-half uses of clips >= 3 s, MP3 128 kbps)
//! and clip-free episodes. Episodes are synthesised at 8 kHz, upsampled to
//! 44.1 kHz and encoded with lame, then decoded by the matcher's decoder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use archivist_matcher::decode::decode_file;
use archivist_matcher::dsp::{resample_fixed, Rng};
use archivist_matcher::{ClipResult, MatchConfig, MatchError, MatchMode, Matcher};
use archivist_testaudio::{
    lame_encode, synth_clip, tool_available, write_wav, BedKind, ClipKind, Degrade, Placement,
    Scenario, TruthOccurrence,
};
use rayon::prelude::*;

/// Reported occurrences per clip: (offset_s, clip_start_s, speed).
type Found = BTreeMap<String, Vec<(f64, f64, f64)>>;

const RATE: u32 = 8000;
const OUT_RATE: u32 = 44100;

#[derive(Clone)]
struct LibClip {
    name: String,
    kind: ClipKind,
    dur: f64,
    seed: u64,
}

fn library(n: usize) -> Vec<LibClip> {
    let mut rng = Rng::new(4242);
    (0..n)
        .map(|i| {
            let (kind, dur) = match i % 4 {
                0 => (ClipKind::Sting, rng.range(0.8, 1.5)),
                1 => (ClipKind::SpokenDrop, rng.range(1.5, 4.0)),
                2 => (ClipKind::Jingle, rng.range(3.0, 8.0)),
                _ => (ClipKind::Theme, rng.range(10.0, 30.0)),
            };
            LibClip {
                name: format!("c{i:04}"),
                kind,
                dur: (dur * 1000.0).round() / 1000.0,
                seed: 10_000 + i as u64,
            }
        })
        .collect()
}

fn clip_path(dir: &Path, c: &LibClip) -> PathBuf {
    dir.join("clips").join(format!("{}.wav", c.name))
}

fn write_library(dir: &Path, lib: &[LibClip]) {
    std::fs::create_dir_all(dir.join("clips")).expect("create clips dir");
    lib.par_iter().for_each(|c| {
        let p = clip_path(dir, c);
        if !p.exists() {
            let x = synth_clip(c.kind, c.dur, c.seed, RATE, false);
            let y = resample_fixed(&x, RATE, OUT_RATE);
            write_wav(&p, &y, OUT_RATE, 1).expect("write clip");
        }
    });
}

#[derive(Clone, Copy, PartialEq)]
enum Ep {
    Clean,
    Degraded,
    Warped,
    ClipFree(u64),
}

fn scenario(kind: Ep, lib: &[LibClip], minutes: f64) -> Scenario {
    let (seed, bed) = match kind {
        Ep::Clean => (101, BedKind::Mixed),
        Ep::Degraded => (202, BedKind::Mixed),
        Ep::Warped => (303, BedKind::Mixed),
        Ep::ClipFree(k) => (900 + k, BedKind::Mixed),
    };
    let mut s = Scenario::new(seed, minutes * 60.0, bed);
    let ids: Vec<usize> = lib
        .iter()
        .take(100)
        .map(|c| s.add_clip_seeded(&c.name, c.kind, c.dur, c.seed))
        .collect();
    if let Ep::ClipFree(_) = kind {
        s.placements.clear();
        return s;
    }
    let mut rng = Rng::new(seed ^ 0xABCD);
    let mut t = 4.0;
    let mut k = 0usize;
    let total = minutes * 60.0;
    // Shuffle the clip order deterministically so kinds interleave.
    let mut order: Vec<usize> = (0..ids.len()).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i + 1);
        order.swap(i, j);
    }
    loop {
        let c = ids[order[k % order.len()]];
        let dur = s.clips[c].duration_s;
        let mix_db = [0.0f32, -3.0, -6.0][k % 3];
        let (placement, d) = match kind {
            Ep::Clean => {
                if k % 2 == 0 {
                    (Placement::Splice, Degrade::default())
                } else {
                    (Placement::Mix { clip_db: mix_db }, Degrade::default())
                }
            }
            Ep::Degraded => {
                if k % 2 == 0 {
                    (
                        Placement::Splice,
                        Degrade {
                            gain_db: -12.0,
                            ..Default::default()
                        },
                    )
                } else {
                    (Placement::Mix { clip_db: mix_db }, Degrade::default())
                }
            }
            _ => {
                let v = k % 5;
                if v == 4 && dur >= 3.0 {
                    (
                        Placement::Splice,
                        Degrade {
                            part: (0.25, 0.75),
                            ..Default::default()
                        },
                    )
                } else {
                    let f = if k % 2 == 0 { 1.03 } else { 0.97 };
                    let d = if v % 2 == 0 {
                        Degrade {
                            speed: f,
                            ..Default::default()
                        }
                    } else {
                        Degrade {
                            tempo: f,
                            ..Default::default()
                        }
                    };
                    (Placement::Splice, d)
                }
            }
        };
        let len = dur * (d.part.1 - d.part.0) / (d.speed * d.tempo);
        if t + len + 2.0 > total {
            break;
        }
        s.place_degraded(c, t, placement, d);
        t += len + rng.range(3.0, 10.0);
        k += 1;
    }
    if kind == Ep::Degraded {
        s.episode_noise_snr_db = Some(10.0);
    }
    s
}

struct Episode {
    name: String,
    mp3: PathBuf,
    truth: Vec<TruthOccurrence>,
}

fn make_episode(dir: &Path, kind: Ep, lib: &[LibClip], minutes: f64) -> Episode {
    let (name, kbps, mono) = match kind {
        Ep::Clean => ("clean".to_string(), 128, false),
        Ep::Degraded => ("degraded".to_string(), 64, true),
        Ep::Warped => ("warped".to_string(), 128, false),
        Ep::ClipFree(k) => (format!("clipfree{k}"), 64, true),
    };
    let mp3 = dir.join(format!("{name}.mp3"));
    let truth_path = dir.join(format!("{name}.truth.json"));
    if !(mp3.exists() && truth_path.exists()) {
        let t = Instant::now();
        let s = scenario(kind, lib, minutes);
        let r = s.render_episode();
        let up = resample_fixed(&r.episode, RATE, OUT_RATE);
        drop(r.episode);
        let wav = dir.join(format!("{name}.wav"));
        write_wav(&wav, &up, OUT_RATE, if mono { 1 } else { 2 }).expect("write episode wav");
        drop(up);
        lame_encode(&wav, &mp3, kbps, mono).expect("lame");
        let _ = std::fs::remove_file(&wav);
        std::fs::write(
            &truth_path,
            serde_json::to_string(&r.truth.occurrences).expect("json"),
        )
        .expect("truth");
        eprintln!(
            "  generated {name} ({} occurrences) in {:.1} s",
            r.truth.occurrences.len(),
            t.elapsed().as_secs_f64()
        );
    }
    let truth: Vec<TruthOccurrence> =
        serde_json::from_str(&std::fs::read_to_string(&truth_path).expect("read truth"))
            .expect("parse truth");
    Episode { name, mp3, truth }
}

#[derive(Default, Clone)]
struct Stats {
    n: [usize; 4],
    hit: [usize; 4],
    fp: usize,
    err_ms: Vec<f64>,
    warped_err_ms: Vec<f64>,
}

const CATS: [&str; 4] = ["whole", "speed", "tempo", "partial"];

fn category(t: &TruthOccurrence) -> usize {
    if t.degrade.part != (0.0, 1.0) {
        3
    } else if (t.degrade.speed - 1.0).abs() > 1e-9 {
        1
    } else if (t.degrade.tempo - 1.0).abs() > 1e-9 {
        2
    } else {
        0
    }
}

/// Matches reported occurrences to truth by clip and implied clip-start time (+-0.5 s).
fn evaluate(truth: &[TruthOccurrence], found: &BTreeMap<String, Vec<(f64, f64, f64)>>) -> Stats {
    let mut st = Stats::default();
    let mut used: BTreeMap<String, Vec<bool>> = found
        .iter()
        .map(|(k, v)| (k.clone(), vec![false; v.len()]))
        .collect();
    for t in truth {
        let c = category(t);
        st.n[c] += 1;
        let implied_t = t.offset_s - t.clip_start_s / t.speed;
        let Some(list) = found.get(&t.clip) else {
            continue;
        };
        let u = used.get_mut(&t.clip).expect("used");
        let mut best: Option<(usize, f64)> = None;
        for (i, (off, cs, sp)) in list.iter().enumerate() {
            if u[i] {
                continue;
            }
            let implied = off - cs / sp;
            let e = (implied - implied_t).abs();
            if e <= 0.5 && best.is_none_or(|b| e < b.1) {
                best = Some((i, e));
            }
        }
        if let Some((i, _)) = best {
            u[i] = true;
            st.hit[c] += 1;
            let off = list[i].0;
            // Offset error of the reported start of the matched part.
            let e = if c == 0 {
                (off - t.offset_s).abs()
            } else {
                {
                    let implied = off - list[i].1 / list[i].2;
                    (implied - implied_t).abs()
                }
            };
            if c == 0 {
                st.err_ms.push(e * 1000.0);
            } else {
                st.warped_err_ms.push(e * 1000.0);
            }
        }
    }
    st.fp = used
        .values()
        .map(|v| v.iter().filter(|x| !**x).count())
        .sum();
    st
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

fn to_found(
    names: &[String],
    res: &[Result<ClipResult, MatchError>],
) -> BTreeMap<String, Vec<(f64, f64, f64)>> {
    names
        .iter()
        .zip(res)
        .filter_map(|(n, r)| {
            r.as_ref().ok().map(|r| {
                (
                    n.clone(),
                    r.occurrences
                        .iter()
                        .map(|o| (o.offset_s, o.clip_start_s, o.speed as f64))
                        .collect(),
                )
            })
        })
        .collect()
}

struct Run {
    decode_s: f64,
    clip_decode_s: f64,
    build_s: f64,
    match_s: f64,
    found: BTreeMap<String, Vec<(f64, f64, f64)>>,
    errors: usize,
}

fn decode_clips(dir: &Path, lib: &[LibClip]) -> (Vec<(String, Vec<f32>)>, f64) {
    let t = Instant::now();
    let clips: Vec<(String, Vec<f32>)> = lib
        .par_iter()
        .map(|c| {
            (
                c.name.clone(),
                decode_file(&clip_path(dir, c))
                    .map(|d| d.samples)
                    .unwrap_or_default(),
            )
        })
        .collect();
    (clips, t.elapsed().as_secs_f64())
}

fn run_matcher(
    episode: &[f32],
    decode_s: f64,
    clips: &[(String, Vec<f32>)],
    clip_decode_s: f64,
    mode: MatchMode,
) -> Run {
    let t = Instant::now();
    // Settings under test (a `MatchConfig` JSON object, missing fields default);
    // the baseline keeps the defaults.
    let mut config = match std::env::var("BENCH_MATCH_CONFIG") {
        Ok(j) if mode != MatchMode::Exhaustive => {
            serde_json::from_str(&j).expect("BENCH_MATCH_CONFIG: MatchConfig JSON")
        }
        _ => MatchConfig::default(),
    };
    config.mode = mode;
    let m = Matcher::new(episode, config);
    let build_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let res = m.find_all(clips);
    let match_s = t.elapsed().as_secs_f64();
    let names: Vec<String> = clips.iter().map(|c| c.0.clone()).collect();
    Run {
        decode_s,
        clip_decode_s,
        build_s,
        match_s,
        errors: res.iter().filter(|r| r.is_err()).count(),
        found: to_found(&names, &res),
    }
}

/// Runs audfprint (clips as the database, the episode as the query).
fn run_audfprint(
    root: &Path,
    dir: &Path,
    lib: &[LibClip],
    ep: &Episode,
) -> Result<(f64, Found), String> {
    let bin = std::env::var("BENCH_AUDFPRINT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".local/audfprint/bin/audfprint"));
    if !bin.exists() {
        return Err("not installed (python3 -m venv .local/audfprint && .local/audfprint/bin/pip install audfprint2)".into());
    }
    if !Command::new("ffmpeg")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Err("audfprint2 needs ffmpeg to read audio (apt-get install ffmpeg)".into());
    }
    let db = dir.join("audfprint-db.pklz");
    let t = Instant::now();
    if !db.exists() {
        let mut cmd = Command::new(&bin);
        cmd.arg("--dbase")
            .arg(&db)
            .arg("--density")
            .arg("20")
            .arg("new");
        for c in lib {
            cmd.arg(clip_path(dir, c));
        }
        let o = cmd
            .output()
            .map_err(|e| format!("cannot run audfprint: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "audfprint new failed: {}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
        }
    }
    let o = Command::new(&bin)
        .arg("--dbase")
        .arg(&db)
        .arg("--max-matches")
        .arg("2000")
        .arg("--find-time-range")
        .arg("--verbose")
        .arg("match")
        .arg(&ep.mp3)
        .output()
        .map_err(|e| format!("cannot run audfprint: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "audfprint match failed: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let secs = t.elapsed().as_secs_f64();
    let mut found: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
    // e.g. "Matched    4.2 s starting at  123.4 s in ep.mp3 to time    0.0 s in clips/c0001.wav with ..."
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    for line in text.lines() {
        let Some(i) = line.find("Matched ") else {
            continue;
        };
        let rest = &line[i + 8..];
        let words: Vec<&str> = rest.split_whitespace().collect();
        let num_after = |key: &str| -> Option<f64> {
            let i = words.iter().position(|w| *w == key)?;
            words.get(i + 1)?.parse().ok()
        };
        let (Some(q), Some(r)) = (num_after("at"), num_after("time")) else {
            continue;
        };
        let Some(file) = words.iter().find(|w| w.ends_with(".wav")) else {
            continue;
        };
        let name = Path::new(file)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string();
        found.entry(name).or_default().push((q - r, 0.0, 1.0));
    }
    Ok((secs, found))
}

fn vmhwm_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Child-process mode: decode an episode, build the default matcher, match
/// clips, print peak RSS.
fn memory_probe(args: &[String]) {
    let ep = PathBuf::from(&args[0]);
    let dir = PathBuf::from(&args[1]);
    let n: usize = args[2].parse().unwrap_or(100);
    let lib = library(n);
    let t = Instant::now();
    let d = decode_file(&ep).expect("decode");
    let dec = t.elapsed().as_secs_f64();
    let dur = d.duration_s;
    let after_decode = vmhwm_mb();
    let t = Instant::now();
    let m = Matcher::from_samples(d.samples, MatchConfig::default());
    let clips: Vec<(String, Vec<f32>)> = lib
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                decode_file(&clip_path(&dir, c))
                    .map(|d| d.samples)
                    .unwrap_or_default(),
            )
        })
        .collect();
    let res = m.find_all(&clips);
    let occ: usize = res
        .iter()
        .map(|r| r.as_ref().map_or(0, |r| r.occurrences.len()))
        .sum();
    println!(
        "PROBE duration_s={dur:.1} decode_s={dec:.2} match_s={:.2} occurrences={occ} peak_rss_after_decode_mb={after_decode:.0} peak_rss_mb={:.0} matcher_heap_mb={:.0}",
        t.elapsed().as_secs_f64(),
        vmhwm_mb(),
        m.heap_bytes() as f64 / 1e6
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--memory-probe") {
        memory_probe(&args[i + 1..]);
        return;
    }
    let root = std::env::var("CARGO_MANIFEST_DIR")
        .map(|d| PathBuf::from(d).join("../.."))
        .unwrap_or_else(|_| PathBuf::from("."));
    let dir = std::env::var("BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".local/matcher-bench"));
    let env_f = |k: &str, d: f64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let minutes = env_f("BENCH_MINUTES", 60.0);
    let clean_hours = env_f("BENCH_CLEAN_HOURS", 10.0) as u64;
    let nlib = env_f("BENCH_LIB", 1000.0) as usize;
    let baseline_large = std::env::var("BENCH_BASELINE_LARGE")
        .map(|v| v != "0")
        .unwrap_or(true);
    std::fs::create_dir_all(&dir).expect("bench dir");
    if !tool_available("lame") {
        eprintln!("lame is missing: run scripts/matcher-deps.sh");
        std::process::exit(2);
    }
    println!("# archivist-matcher benchmark");
    println!(
        "machine: {} cores; episodes {minutes} min; clip library {nlib}; clip-free audio {} h; dir {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        clean_hours as f64 * minutes / 60.0,
        dir.display()
    );
    let t = Instant::now();
    let lib = library(nlib.max(100));
    write_library(&dir, &lib);
    eprintln!("library ready in {:.1} s", t.elapsed().as_secs_f64());
    let mut eps = vec![
        make_episode(&dir, Ep::Clean, &lib, minutes),
        make_episode(&dir, Ep::Degraded, &lib, minutes),
        make_episode(&dir, Ep::Warped, &lib, minutes),
    ];
    for k in 0..clean_hours {
        eps.push(make_episode(&dir, Ep::ClipFree(k), &lib, minutes));
    }
    let two_h = two_hour_episode(&dir, &eps[0].mp3);
    if std::env::var("BENCH_GENERATE_ONLY").is_ok_and(|v| v == "1") {
        eprintln!("corpus generated in {}", dir.display());
        return;
    }
    let (clips100, cd100) = decode_clips(&dir, &lib[..100]);
    let modes = [
        ("ours (full)", MatchMode::Full),
        ("ours (fast)", MatchMode::Fast),
        ("baseline NCC", MatchMode::Exhaustive),
    ];
    // config -> aggregated stats over accuracy episodes, clip-free FP.
    let mut agg: BTreeMap<&str, (Stats, usize, f64)> = BTreeMap::new();
    println!("\n## Accuracy and time per episode (100 clips; times in s; decode = episode MP3 decode; clip decode = 100 WAVs)");
    println!(
        "{:<14} {:<10} {:>5} {:>13} {:>13} {:>13} {:>13} {:>4} {:>8} {:>8} {:>9} {:>7} {:>7} {:>7} {:>7}",
        "config", "episode", "occ", "whole", "speed", "tempo", "partial", "FP", "err_med", "err_max", "warp_max", "decode", "clipdec", "match", "wall"
    );
    let mut clean_ep_samples: Option<(Vec<f32>, f64)> = None;
    let skip_accuracy = std::env::var("BENCH_SKIP_ACCURACY").is_ok_and(|v| v == "1");
    let speed_modes =
        std::env::var("BENCH_SPEED_MODES").unwrap_or_else(|_| "full,fast,baseline".into());
    let only_eps = std::env::var("BENCH_EPISODES").ok();
    let clipfree_modes =
        std::env::var("BENCH_CLIPFREE_MODES").unwrap_or_else(|_| "full,fast,baseline".into());
    let audfprint_on = std::env::var("BENCH_AUDFPRINT")
        .map(|v| v != "0")
        .unwrap_or(true);
    for ep in &eps {
        let selected = only_eps.as_ref().is_none_or(|l| {
            l.split(',')
                .any(|e| e == ep.name || e == "clean" && ep.name == "clean")
        });
        if skip_accuracy || !selected {
            if ep.name == "clean" {
                let t = Instant::now();
                let d = decode_file(&ep.mp3).expect("decode episode");
                clean_ep_samples = Some((d.samples, t.elapsed().as_secs_f64()));
            }
            continue;
        }
        let t = Instant::now();
        let d = decode_file(&ep.mp3).expect("decode episode");
        let decode_s = t.elapsed().as_secs_f64();
        let clipfree = ep.truth.is_empty();
        for (name, mode) in modes {
            let key = match mode {
                MatchMode::Full => "full",
                MatchMode::Fast => "fast",
                MatchMode::Exhaustive => "baseline",
            };
            if clipfree && !clipfree_modes.split(',').any(|m| m == key) {
                continue;
            }
            let r = run_matcher(&d.samples, decode_s, &clips100, cd100, mode);
            let st = evaluate(&ep.truth, &r.found);
            let e = agg.entry(name).or_default();
            merge(&mut e.0, &st, clipfree);
            if clipfree {
                e.1 += st.fp;
                e.2 += d.duration_s / 3600.0;
            }
            print_row(
                name,
                &ep.name,
                &st,
                r.decode_s,
                r.clip_decode_s,
                r.build_s + r.match_s,
                r.errors,
            );
        }
        let audfprint_here = std::env::var("BENCH_AUDFPRINT_EPISODES")
            .map(|l| l.split(',').any(|e| e == ep.name))
            .unwrap_or(true);
        if !audfprint_on || !audfprint_here {
            println!(
                "{:<14} {:<10} skipped (BENCH_AUDFPRINT / BENCH_AUDFPRINT_EPISODES)",
                "audfprint", ep.name
            );
        } else {
            match run_audfprint(&root, &dir, &lib[..100], ep) {
                Ok((secs, found)) => {
                    let st = evaluate(&ep.truth, &found);
                    let e = agg.entry("audfprint").or_default();
                    merge(&mut e.0, &st, clipfree);
                    if clipfree {
                        e.1 += st.fp;
                        e.2 += d.duration_s / 3600.0;
                    }
                    print_row("audfprint", &ep.name, &st, 0.0, 0.0, secs, 0);
                }
                Err(e) => println!("{:<14} {:<10} unavailable: {e}", "audfprint", ep.name),
            }
        }
        if ep.name == "clean" {
            clean_ep_samples = Some((d.samples.clone(), decode_s));
        }
    }
    println!(
        "\n## Totals over the accuracy episodes (recall = found / placed; FP on clip-free audio)"
    );
    println!(
        "{:<14} {:>13} {:>13} {:>13} {:>13} {:>10} {:>12} {:>9} {:>9} {:>11}",
        "config",
        "whole",
        "speed",
        "tempo",
        "partial",
        "FP(acc)",
        "FP(clipfree)",
        "err_med",
        "err_max",
        "warp_max"
    );
    for (name, (st, fp_free, hours)) in &agg {
        println!(
            "{:<14} {:>13} {:>13} {:>13} {:>13} {:>10} {:>12} {:>9.2} {:>9.2} {:>11.1}",
            name,
            frac(st.hit[0], st.n[0]),
            frac(st.hit[1], st.n[1]),
            frac(st.hit[2], st.n[2]),
            frac(st.hit[3], st.n[3]),
            st.fp,
            format!("{fp_free} in {hours:.1}h"),
            median(&st.err_ms),
            max(&st.err_ms),
            max(&st.warped_err_ms)
        );
    }
    if std::env::var("BENCH_SKIP_SPEED").is_ok_and(|v| v == "1") {
        return;
    }
    // Speed: one episode against 100 and `nlib` clips, decode included.
    println!("\n## Speed: one {minutes}-min episode (MP3 128 kbps stereo), decode of episode and clips included, wall s");
    println!(
        "{:<14} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "config", "clips", "decode", "clipdec", "build", "match", "total", "per clip"
    );
    let Some((samples, decode_s)) = clean_ep_samples else {
        println!("(speed section needs the clean episode: not selected)");
        return;
    };
    let (clips_large, cd_large) = decode_clips(&dir, &lib);
    for (name, mode) in modes {
        let key = match mode {
            MatchMode::Full => "full",
            MatchMode::Fast => "fast",
            MatchMode::Exhaustive => "baseline",
        };
        if !speed_modes.split(',').any(|m| m == key) {
            continue;
        }
        for (clips, cd) in [(&clips100, cd100), (&clips_large, cd_large)] {
            if mode == MatchMode::Exhaustive && clips.len() > 100 && !baseline_large {
                println!(
                    "{name:<14} {:>6} skipped (BENCH_BASELINE_LARGE=0)",
                    clips.len()
                );
                continue;
            }
            let r = run_matcher(&samples, decode_s, clips, cd, mode);
            let total = r.decode_s + r.clip_decode_s + r.build_s + r.match_s;
            println!(
                "{:<14} {:>6} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>10.4}",
                name,
                clips.len(),
                r.decode_s,
                r.clip_decode_s,
                r.build_s,
                r.match_s,
                total,
                r.match_s / clips.len() as f64
            );
        }
    }
    println!(
        "decode speed: {:.0}x realtime ({:.0} s of MP3 in {:.2} s; decoding and mixing on one thread, resampling on a second)",
        samples.len() as f64 / RATE as f64 / decode_s,
        samples.len() as f64 / RATE as f64,
        decode_s
    );
    drop(samples);
    drop(clips_large);
    // Memory: a real 2-hour MP3 (the clean episode's audio twice, one LAME
    // stream) in a child process.
    println!("\n## Memory: 2-hour MP3 (64 kbps mono) decoded, default matcher (Full), BENCH_PROBE_CLIPS clips (child process)");
    match Command::new(std::env::current_exe().expect("exe"))
        .arg("--memory-probe")
        .arg(&two_h)
        .arg(&dir)
        .arg(std::env::var("BENCH_PROBE_CLIPS").unwrap_or_else(|_| "100".into()))
        .output()
    {
        Ok(o) => {
            let out = String::from_utf8_lossy(&o.stdout);
            match out.lines().find(|l| l.starts_with("PROBE")) {
                Some(l) => println!("{l}"),
                None => println!("probe failed: {}", String::from_utf8_lossy(&o.stderr)),
            }
        }
        Err(e) => println!("probe failed: {e}"),
    }
}

/// A 2-hour MP3: the clean episode's decoded audio twice, re-encoded as one
/// LAME stream (concatenated MP3 files stop at the first file's gapless
/// length). Cached in the bench directory.
fn two_hour_episode(dir: &Path, one_hour: &Path) -> PathBuf {
    let out = dir.join("two-hours-v2.mp3");
    if out.exists() {
        return out;
    }
    let t = Instant::now();
    let d = decode_file(one_hour).expect("decode episode");
    let mut x = d.samples.clone();
    x.extend_from_slice(&d.samples);
    drop(d);
    let up = resample_fixed(&x, RATE, 22050);
    drop(x);
    let wav = dir.join("two-hours.wav");
    write_wav(&wav, &up, 22050, 1).expect("write 2h wav");
    drop(up);
    lame_encode(&wav, &out, 64, true).expect("lame 2h");
    let _ = std::fs::remove_file(&wav);
    eprintln!(
        "  generated two-hours-v2.mp3 in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    out
}

fn merge(into: &mut Stats, st: &Stats, clipfree: bool) {
    if clipfree {
        return;
    }
    for i in 0..4 {
        into.n[i] += st.n[i];
        into.hit[i] += st.hit[i];
    }
    into.fp += st.fp;
    into.err_ms.extend_from_slice(&st.err_ms);
    into.warped_err_ms.extend_from_slice(&st.warped_err_ms);
}

fn frac(a: usize, b: usize) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{a}/{b} {:.0}%", 100.0 * a as f64 / b as f64)
    }
}

#[allow(clippy::too_many_arguments)]
fn print_row(
    name: &str,
    ep: &str,
    st: &Stats,
    dec: f64,
    clipdec: f64,
    matching: f64,
    errors: usize,
) {
    let n: usize = st.n.iter().sum();
    println!(
        "{:<14} {:<10} {:>5} {:>13} {:>13} {:>13} {:>13} {:>4} {:>8.2} {:>8.2} {:>9.1} {:>7.2} {:>7.2} {:>7.2} {:>7.2}{}",
        name,
        ep,
        n,
        frac(st.hit[0], st.n[0]),
        frac(st.hit[1], st.n[1]),
        frac(st.hit[2], st.n[2]),
        frac(st.hit[3], st.n[3]),
        st.fp,
        median(&st.err_ms),
        max(&st.err_ms),
        max(&st.warped_err_ms),
        dec,
        clipdec,
        matching,
        dec + clipdec + matching,
        if errors > 0 { format!("  ({errors} clip errors)") } else { String::new() }
    );
    let _ = CATS;
}
