//! Fetch each episode once (issue 23's targets): episode bytes downloaded and research
//! time with the media store off (today's behaviour: every job downloads its episode)
//! and on, in one process, each next to the matcher's own time for one pass of every
//! clip; then one newly curated clip researched against the stored episodes
//! (`cargo bench -p archivist --bench fetch_once`).
//!
//! One sample catalog (`archivist sample generate --clips C+1`: E episodes of M minutes
//! with the 4 sample clips placed in them, and synthetic clips placed nowhere) is
//! generated once and served by `archivist serve-files`, whose `/metrics` counts the body
//! bytes it sends by top directory: episodes are at the root (`dir="/"`), clips under
//! `clips/`. The clip `jingle` is held back. Each run (store off, store on) curates the
//! other C clips and the episodes into a fresh chroot and database, starts a planner
//! (`--max-clips`, default 50), a recorder, a reaper and one researcher, and times:
//!
//! - phase A: from starting the researcher until `archivist sample check` has seen every
//!   (episode, clip) pair recorded and found at the expected offsets (the synthetic clips
//!   must all be "not found");
//! - phase B: then `jingle` is curated, and timed until the check sees it researched
//!   and found at its offsets in every episode (the whole truth, C+1 clips).
//!
//! "Store off" is the researcher with `--media-max-mb 0`: an object larger than the
//! whole store is not kept, so every job downloads its episode, as before issue 23.
//! The matcher's own time is `archivist match EPISODE CLIP...` with the C clips of phase
//! A (one decode, one `find_all`), run before the research runs on K of the E episodes
//! (`BENCH_FETCH_MATCH_EPISODES`, default all) and scaled to E.
//!
//! The researcher's per-host request rate (`download.per_host_rate`, default 2 a second)
//! is off by default here (`BENCH_FETCH_HOST_RATE`, default 0): the episodes and the
//! clips come from one host, and at 2 requests a second the first jobs would wait C/2
//! seconds for the clip library's first fetch (a cost per researcher's work directory,
//! not per episode), which is not what the targets are about. The per-host concurrency
//! limit (2) stays.
//!
//! Env: `BENCH_FETCH_EPISODES` (default 20), `BENCH_FETCH_MINUTES` (60),
//! `BENCH_FETCH_CLIPS` (500), `BENCH_FETCH_MAX_CLIPS` (50), `BENCH_FETCH_CONCURRENCY`
//! (jobs of the researcher, 1), `BENCH_FETCH_MATCH_EPISODES` (E), `BENCH_FETCH_RUNS`
//! (`off,on`), `BENCH_FETCH_HOST_RATE` (0), `ARCHIVIST_TEST_ZK`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::Instant;

use archivist_testkit::{env_list, env_or, load_average};
use support::{
    bench_sample, check_verdict, free_port, scrape, series, spawn_researcher, start_coordinators,
    Env,
};

/// The sample clip curated in phase B (placed in most episodes, so phase B finds it).
const HELD_BACK: &str = "jingle";
/// serve-files: body bytes of episodes (files at the root of the media directory).
const EPISODE_BYTES: &str = r#"archivist_files_sent_bytes_total{dir="/"}"#;
/// serve-files: body bytes of clips.
const CLIP_BYTES: &str = r#"archivist_files_sent_bytes_total{dir="clips/"}"#;
/// serve-files: conditional GETs answered "not modified".
const NOT_MODIFIED: &str = r#"archivist_files_responses_total{status="304"}"#;

/// What one phase of one run measured (counters are differences over the phase).
#[derive(Debug, Default, Clone)]
struct Phase {
    seconds: f64,
    episode_bytes: f64,
    clip_bytes: f64,
    not_modified: f64,
    from_store: f64,
    downloaded: f64,
    jobs: f64,
    decode_s: f64,
    match_s: f64,
    load: String,
    verdict: String,
}

/// The counters a phase is measured by: the file server's and the researcher's (none
/// before it starts: all zero).
fn counters(files_port: u16, researcher_port: Option<u16>) -> [f64; 8] {
    let files = scrape(files_port);
    let r = researcher_port.map(scrape).unwrap_or_default();
    [
        series(&files, EPISODE_BYTES),
        series(&files, CLIP_BYTES),
        series(&files, NOT_MODIFIED),
        series(
            &r,
            r#"archivist_researcher_episode_audio_total{source="store"}"#,
        ),
        series(
            &r,
            r#"archivist_researcher_episode_audio_total{source="download"}"#,
        ),
        series(&r, r#"archivist_researcher_jobs_total{outcome="reported"}"#),
        series(&r, "archivist_researcher_decode_seconds_sum"),
        series(&r, "archivist_researcher_match_seconds_sum"),
    ]
}

impl Phase {
    fn between(before: [f64; 8], after: [f64; 8], seconds: f64, verdict: String) -> Phase {
        let d: Vec<f64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
        Phase {
            seconds,
            episode_bytes: d[0],
            clip_bytes: d[1],
            not_modified: d[2],
            from_store: d[3],
            downloaded: d[4],
            jobs: d[5],
            decode_s: d[6],
            match_s: d[7],
            load: load_average(),
            verdict,
        }
    }
}

/// One research run: the media store off or on.
struct Run {
    label: &'static str,
    a: Phase,
    b: Phase,
}

/// Writes `out/truth.yml` and `out/manifest.yml`: the sample's without the held-back
/// clip. Returns the held-back clip's manifest entry (url, title, priority).
fn phase_a_files(media: &Path, out: &Path) -> (String, String, String) {
    use serde_yaml::Value;
    std::fs::create_dir_all(out).expect("phase A dir");
    let read = |name: &str| -> Value {
        serde_yaml::from_str(&std::fs::read_to_string(media.join(name)).expect("read sample"))
            .expect("parse sample")
    };
    let mut truth = read("truth.yml");
    let clips = truth
        .get_mut("clips")
        .and_then(Value::as_sequence_mut)
        .expect("truth.yml lists its clips");
    clips.retain(|c| c.as_str() != Some(HELD_BACK));
    let mut manifest = read("manifest.yml");
    let clips = manifest
        .get_mut("clips")
        .and_then(Value::as_sequence_mut)
        .expect("manifest.yml lists its clips");
    let held = clips
        .iter()
        .position(|c| c["title"].as_str() == Some(HELD_BACK))
        .expect("the sample has the held-back clip");
    let held = clips.remove(held);
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .expect("yaml")
            .trim()
            .to_string(),
    };
    for (name, value) in [("truth.yml", &truth), ("manifest.yml", &manifest)] {
        std::fs::write(out.join(name), serde_yaml::to_string(value).expect("yaml"))
            .expect("write phase A file");
    }
    (
        text(&held["url"]),
        text(&held["title"]),
        text(&held["priority"]),
    )
}

/// The sample's episode files (from truth.yml's URLs) and its phase-A clip files.
fn sample_files(media: &Path, phase_a: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let truth: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(phase_a.join("truth.yml")).expect("read truth"),
    )
    .expect("parse truth");
    let episodes = truth["episodes"]
        .as_sequence()
        .expect("episodes")
        .iter()
        .map(|e| {
            let url = e["url"].as_str().expect("episode url");
            media.join(url.rsplit('/').next().expect("file name"))
        })
        .collect();
    let clips = truth["clips"]
        .as_sequence()
        .expect("clips")
        .iter()
        .map(|c| media.join(format!("clips/{}.wav", c.as_str().expect("clip title"))))
        .collect();
    (episodes, clips)
}

fn mb(bytes: f64) -> String {
    if bytes < 1e5 {
        return format!("{bytes} bytes");
    }
    format!("{:.1} MB", bytes / 1e6)
}

fn main() {
    let episodes: usize = env_or("BENCH_FETCH_EPISODES", 20);
    let minutes: f64 = env_or("BENCH_FETCH_MINUTES", 60.0);
    let clips: usize = env_or("BENCH_FETCH_CLIPS", 500);
    let max_clips: usize = env_or("BENCH_FETCH_MAX_CLIPS", 50);
    let concurrency: usize = env_or("BENCH_FETCH_CONCURRENCY", 1);
    let timed: usize = env_or("BENCH_FETCH_MATCH_EPISODES", episodes).clamp(1, episodes);
    let runs: Vec<String> = env_list("BENCH_FETCH_RUNS", "off,on");
    let host_rate: String = env_or("BENCH_FETCH_HOST_RATE", "0".to_string());
    assert!(clips >= 4, "BENCH_FETCH_CLIPS must be at least 4");
    let zk = archivist_testkit::zk_connect();
    let load_before = load_average();
    let hours = episodes as f64 * minutes / 60.0;

    let files_port = free_port();
    let files_metrics = format!("127.0.0.1:{files_port}");
    let generated = Instant::now();
    // C clips in phase A, plus the held-back one (a placed clip) for phase B.
    let library = (clips + 1).to_string();
    let (files_env, dir, media, _files, _base) = bench_sample(
        "bench-fetch",
        episodes,
        minutes,
        &["--metrics-addr", &files_metrics],
        &["--clips", &library],
    );
    let phase_a = dir.join("phase-a");
    let (new_url, new_title, new_priority) = phase_a_files(&media, &phase_a);
    let (episode_files, clip_files) = sample_files(&media, &phase_a);
    let catalog_bytes: u64 = episode_files
        .iter()
        .map(|p| std::fs::metadata(p).expect("episode file").len())
        .sum();
    eprintln!(
        "fetch once: {episodes} episodes of {minutes} min ({}) and {} clips generated in {:.1} s; logs in {}",
        mb(catalog_bytes as f64),
        clips + 1,
        generated.elapsed().as_secs_f64(),
        dir.display()
    );

    // The matcher's own time: one pass of the C clips per episode.
    let clip_args: Vec<&str> = clip_files
        .iter()
        .map(|p| p.to_str().expect("utf-8 path"))
        .collect();
    let mut match_times = Vec::new();
    for episode in episode_files.iter().take(timed) {
        let mut args = vec!["match", episode.to_str().expect("utf-8 path")];
        args.extend_from_slice(&clip_args);
        args.extend_from_slice(&["--output", "json"]);
        let started = Instant::now();
        let out = files_env.run(&args);
        let seconds = started.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "archivist match {} failed ({}): {}",
            episode.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "fetch once: archivist match {} with {clips} clips: {seconds:.1} s (load {})",
            episode.display(),
            load_average()
        );
        match_times.push(seconds);
    }
    let matcher_s = match_times.iter().sum::<f64>() / timed as f64 * episodes as f64;
    let match_load = load_average();

    let phase_a_arg = phase_a.to_str().expect("utf-8 path").to_string();
    let media_arg = media.to_str().expect("utf-8 path").to_string();
    let manifest = phase_a.join("manifest.yml");
    let mut results: Vec<Run> = Vec::new();
    for run in &runs {
        let (label, store_flags): (&'static str, &[&str]) = match run.as_str() {
            "off" => (
                "today's behaviour (media store off)",
                &["--media-max-mb", "0"],
            ),
            "on" => ("media store on", &[]),
            other => panic!("BENCH_FETCH_RUNS: {other:?} is neither off nor on"),
        };
        let env = Env {
            zk: zk.clone(),
            chroot: archivist_testkit::unique_chroot("bench-fetch"),
            database: archivist_testkit::db::fresh_binary_database_url("bench"),
            extra: vec![(
                "ARCHIVIST__RESEARCHER__DOWNLOAD__PER_HOST_RATE".into(),
                Some(host_rate.clone()),
            )],
        };
        env.ok(&["init"]);
        env.ok(&["curate", "manifest", manifest.to_str().expect("utf-8 path")]);
        let logs = dir.join(format!("run-{run}"));
        std::fs::create_dir_all(&logs).expect("log dir");
        let max_clips = max_clips.to_string();
        let coordinators = start_coordinators(&env, &logs, &["--max-clips", &max_clips]);
        let researcher_port = free_port();
        let researcher_metrics = format!("127.0.0.1:{researcher_port}");
        let mut flags = vec!["--metrics-addr", researcher_metrics.as_str()];
        flags.extend_from_slice(store_flags);
        let before = counters(files_port, None);
        let started = Instant::now();
        let researcher = spawn_researcher(&env, &logs, "bench-fetch-r0", concurrency, &flags);
        let check = env.run(&["sample", "check", &phase_a_arg, "--wait-s", "7200"]);
        let a_s = started.elapsed().as_secs_f64();
        let after_a = counters(files_port, Some(researcher_port));
        let a = Phase::between(before, after_a, a_s, check_verdict(&check));
        eprintln!("fetch once: {label}: phase A {a:?}");

        let started = Instant::now();
        env.ok(&[
            "curate",
            "clip",
            &new_url,
            "--title",
            &new_title,
            "--priority",
            &new_priority,
        ]);
        let check = env.run(&["sample", "check", &media_arg, "--wait-s", "7200"]);
        let b_s = started.elapsed().as_secs_f64();
        let after_b = counters(files_port, Some(researcher_port));
        let b = Phase::between(after_a, after_b, b_s, check_verdict(&check));
        eprintln!("fetch once: {label}: phase B {b:?}");
        drop(researcher);
        drop(coordinators);
        let _ = std::fs::remove_dir_all(env.media_dir());
        results.push(Run { label, a, b });
    }

    let header: Vec<&str> = results.iter().map(|r| r.label).collect();
    println!(
        "fetch once: {episodes} episodes of {minutes} min = {hours:.2} h, catalog {}; {clips} clips in phase A (+ `{HELD_BACK}` in phase B); --max-clips {max_clips}; 1 researcher x {concurrency} job(s), per-host rate {host_rate}/s (0: off)",
        mb(catalog_bytes as f64)
    );
    println!();
    println!(
        "| phase A: {episodes} x {clips} pairs | {} | target |",
        header.join(" | ")
    );
    println!("|---|{}---|", "---:|".repeat(results.len()));
    let row = |name: &str, f: &dyn Fn(&Run) -> String, target: &str| {
        let cells: Vec<String> = results.iter().map(f).collect();
        println!("| {name} | {} | {target} |", cells.join(" | "));
    };
    let catalog = catalog_bytes as f64;
    row(
        "episode bytes downloaded (serve-files)",
        &|r| mb(r.a.episode_bytes),
        "",
    );
    row(
        "downloaded / catalog size",
        &|r| format!("{:.2}x", r.a.episode_bytes / catalog),
        "1x (today 10x)",
    );
    row(
        "jobs; episode audio from the store / downloaded",
        &|r| format!("{}; {} / {}", r.a.jobs, r.a.from_store, r.a.downloaded),
        "",
    );
    row(
        "research wall time (researcher start to check passed)",
        &|r| format!("{:.1} s", r.a.seconds),
        "",
    );
    row(
        &format!("matcher, one {clips}-clip pass per episode ({timed} of {episodes} timed)"),
        &|_| format!("{matcher_s:.1} s"),
        "",
    );
    row(
        "research time / matcher time",
        &|r| format!("{:.2}x", r.a.seconds / matcher_s),
        "<= 1.5x",
    );
    row("clip bytes downloaded", &|r| mb(r.a.clip_bytes), "");
    let last_rows = |phase: &dyn Fn(&Run) -> &Phase| {
        row(
            "researcher: decode / per-clip match time (sums)",
            &|r| format!("{:.1} s / {:.1} s", phase(r).decode_s, phase(r).match_s),
            "",
        );
        row("load average at the end", &|r| phase(r).load.clone(), "");
        row("check", &|r| phase(r).verdict.clone(), "");
    };
    last_rows(&|r| &r.a);
    println!();
    println!(
        "| phase B: `{HELD_BACK}` curated, x {episodes} stored episodes | {} | target |",
        header.join(" | ")
    );
    println!("|---|{}---|", "---:|".repeat(results.len()));
    row(
        "episode bytes downloaded (serve-files)",
        &|r| mb(r.b.episode_bytes),
        "0",
    );
    row(
        "jobs; episode audio from the store / downloaded; 304s",
        &|r| {
            format!(
                "{}; {} / {}; {}",
                r.b.jobs, r.b.from_store, r.b.downloaded, r.b.not_modified
            )
        },
        "",
    );
    row(
        "time (curation to check passed)",
        &|r| format!("{:.1} s", r.b.seconds),
        "",
    );
    row(
        "time per episode-hour",
        &|r| format!("{:.2} s", r.b.seconds / hours),
        "reported",
    );
    last_rows(&|r| &r.b);
    println!();
    println!(
        "load average (1/5/15 min): {load_before} before, {match_load} after the matcher runs, {} at the end",
        load_average()
    );
    for r in &results {
        println!(
            "summary: {}: phase A {} episode bytes ({:.2}x the catalog), {:.1} s = {:.2}x the matcher's {matcher_s:.1} s; phase B {} episode bytes, {:.2} s per episode-hour; {} / {}",
            r.label,
            mb(r.a.episode_bytes),
            r.a.episode_bytes / catalog,
            r.a.seconds,
            r.a.seconds / matcher_s,
            mb(r.b.episode_bytes),
            r.b.seconds / hours,
            r.a.verdict,
            r.b.verdict
        );
    }
}
