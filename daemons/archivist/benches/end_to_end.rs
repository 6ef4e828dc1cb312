//! End to end: episodes researched per minute with 1, 2 and 4 researchers
//! (`cargo bench -p archivist --bench end_to_end`).
//!
//! One sample catalog (`archivist sample generate`: episodes with known clips spliced in)
//! is generated once and served by `archivist serve-files`. Each run curates it into a
//! fresh chroot, starts a planner, a recorder and a reaper, then N researcher processes
//! (one job at a time each), and times from starting the researchers until
//! `archivist sample check` has seen every (episode, clip) pair recorded and found them
//! at the expected offsets (it polls every 0.5 s). The 1-researcher run is the baseline.
//!
//! Env: `BENCH_E2E_RESEARCHERS` (default `1,2,4`), `BENCH_E2E_EPISODES` (default 40),
//! `BENCH_E2E_MINUTES` (default 5), `BENCH_E2E_CONCURRENCY` (jobs per researcher,
//! default 1), `ARCHIVIST_TEST_ZK`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Instant;

use archivist_testkit::{env_list, env_or, load_average};
use support::{bench_sample, check_verdict, spawn_researcher, start_coordinators, Daemon, Env};

fn main() {
    let counts: Vec<usize> = env_list("BENCH_E2E_RESEARCHERS", "1,2,4");
    let episodes: usize = env_or("BENCH_E2E_EPISODES", 40);
    let minutes: f64 = env_or("BENCH_E2E_MINUTES", 5.0);
    let concurrency: usize = env_or("BENCH_E2E_CONCURRENCY", 1);
    let zk = archivist_testkit::zk_connect();
    let load_before = load_average();

    let generated = Instant::now();
    let (_files_env, dir, media, _files, _base) =
        bench_sample("bench-e2e", episodes, minutes, &[], &[]);
    eprintln!(
        "end to end: {episodes} episodes of {minutes} min generated in {:.1} s; logs in {}",
        generated.elapsed().as_secs_f64(),
        dir.display()
    );
    let manifest = media.join("manifest.yml");
    let media_arg = media.to_str().expect("utf-8 path").to_string();

    let mut rows: Vec<(usize, f64, f64, String)> = Vec::new();
    for &n in &counts {
        let env = Env {
            zk: zk.clone(),
            chroot: archivist_testkit::unique_chroot("bench-e2e"),
            database: archivist_testkit::db::fresh_binary_database_url("bench"),
            extra: Vec::new(),
        };
        env.ok(&["init"]);
        env.ok(&["curate", "manifest", manifest.to_str().expect("utf-8 path")]);
        let logs = dir.join(format!("run-{n}"));
        std::fs::create_dir_all(&logs).expect("log dir");
        let _coordinators = start_coordinators(&env, &logs, &[]);
        let started = Instant::now();
        let researchers: Vec<Daemon> = (0..n)
            .map(|i| spawn_researcher(&env, &logs, &format!("bench-r{i}"), concurrency, &[]))
            .collect();
        let check = env.run(&["sample", "check", &media_arg, "--wait-s", "1800"]);
        let elapsed = started.elapsed().as_secs_f64();
        let load = load_average();
        drop(researchers);
        let verdict = check_verdict(&check);
        let per_minute = episodes as f64 / (elapsed / 60.0);
        eprintln!(
            "end to end: {n} researcher(s): {episodes} episodes in {elapsed:.1} s = {per_minute:.1} episodes/min (load {load}); {verdict}"
        );
        rows.push((n, elapsed, per_minute, verdict));
    }
    let baseline = rows
        .iter()
        .find(|r| r.0 == 1)
        .map(|r| r.2)
        .unwrap_or(f64::NAN);
    println!(
        "| researchers ({} job(s) each) | {episodes} episodes of {minutes} min | episodes / min | vs 1 researcher | check |",
        concurrency
    );
    println!("|---:|---:|---:|---:|---|");
    for (n, elapsed, per_minute, verdict) in &rows {
        println!(
            "| {n} | {elapsed:.1} s | {per_minute:.1} | {:.2}x | {verdict} |",
            per_minute / baseline
        );
    }
    println!(
        "load average (1/5/15 min): {load_before} before, {} after",
        load_average()
    );
    for (n, elapsed, per_minute, verdict) in &rows {
        println!(
            "summary: {n} researcher(s): {per_minute:.1} episodes/min ({episodes} x {minutes} min in {elapsed:.1} s), {:.2}x the 1-researcher run; {verdict}",
            per_minute / baseline
        );
    }
}
