//! Recovery: how long after a researcher dies holding a job are the job's unrecorded clips
//! planned again? (`cargo bench -p archivist --bench recovery`)
//!
//! Every repetition runs the real daemons as processes of the built binary on a fresh
//! chroot (planner, reaper, recorder, two researchers, and `serve-files` for the media),
//! curates one sample episode, waits until a researcher holds its job (lock taken),
//! SIGKILLs that researcher, and times, from the kill:
//! - the job's lock vanishing (ZooKeeper expires the dead session),
//! - the reaper moving the orphaned job to `expired`,
//! - the planner creating a new job for the episode (its unrecorded clips planned again).
//!
//! Each is printed next to the session timeout, the baseline every figure must exceed.
//!
//! Env: `BENCH_RECOVERY_TIMEOUTS_MS` (default `2000,4000,10000`), `BENCH_RECOVERY_REPS`
//! (default 5), `BENCH_RECOVERY_MINUTES` (episode length, default 5),
//! `BENCH_REAPER_INTERVAL_MS` (default 500), `BENCH_PLANNER_TICK_MS` (default 500),
//! `ARCHIVIST_TEST_ZK`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use archivist_engine::schema::{paths, JobState};
use archivist_engine::{jobs, lock, queue, store, Session, ZkConfig};
use archivist_testkit::{env_list, env_or, load_average};
use support::{generate_sample, served_media, Daemon, Env};

/// Times of one repetition, from the SIGKILL.
struct Outcome {
    lock_gone: Duration,
    expired: Duration,
    planned: Duration,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median_max(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[n - 1])
}

/// The job a researcher holds (leased or researching, lock taken) and the holder's name.
async fn held_job(session: &Session) -> Option<(String, String)> {
    for state in [JobState::Leased, JobState::Researching] {
        let Ok((entries, _)) = queue::list(session, state).await else {
            continue;
        };
        for entry in entries {
            if let Ok(Some((record, _))) = lock::holder(session, &entry.job).await {
                return Some((entry.job, record.owner));
            }
        }
    }
    None
}

#[allow(clippy::too_many_arguments)]
async fn repetition(
    zk: &str,
    dir: &std::path::Path,
    manifest: &std::path::Path,
    timeout_ms: u64,
    rep: usize,
    reaper_ms: u64,
    tick_ms: u64,
) -> Result<Outcome, String> {
    let env = Env {
        zk: zk.to_string(),
        chroot: archivist_testkit::unique_chroot("bench-recovery"),
        database: archivist_testkit::db::fresh_binary_database_url("bench"),
        extra: Vec::new(),
    };
    env.ok(&["init"]);
    env.ok(&["curate", "manifest", manifest.to_str().ok_or("path")?]);
    let timeout = timeout_ms.to_string();
    let logs = dir.join(format!("t{timeout_ms}-r{rep}"));
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let common = ["--session-timeout-ms", timeout.as_str()];
    let with = |args: &[&str]| -> Vec<String> {
        common
            .iter()
            .chain(args.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let spawn = |name: &str, args: Vec<String>| -> Daemon {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        env.spawn(&args, &logs.join(format!("{name}.log")))
    };
    let tick = tick_ms.to_string();
    let reaper_interval = reaper_ms.to_string();
    let _planner = spawn(
        "planner",
        with(&[
            "planner",
            "--tick-ms",
            &tick,
            "--lease-duration-ms",
            "120000",
            "--work-item-ttl-ms",
            "60000",
        ]),
    );
    let _reaper = spawn(
        "reaper",
        with(&[
            "reaper",
            "--reaper-interval-ms",
            &reaper_interval,
            "--work-item-ttl-ms",
            "60000",
        ]),
    );
    let _recorder = spawn("recorder", with(&["recorder", "--poll-ms", "300"]));
    let mut researchers: Vec<(String, Option<Daemon>)> = Vec::new();
    for i in 0..2 {
        let name = format!("bench-r{i}");
        let work = logs.join(format!("work-{i}"));
        let work = work.to_str().ok_or("path")?.to_string();
        let daemon = spawn(
            &name,
            with(&[
                "researcher",
                "--name",
                &name,
                "--concurrency",
                "1",
                "--work-dir",
                &work,
                "--poll-ms",
                "200",
            ]),
        );
        researchers.push((name, Some(daemon)));
    }

    let config = ZkConfig::new(zk)
        .with_chroot(env.chroot.clone())
        .with_session_timeout(Duration::from_secs(10));
    let session = Session::connect(&config).await.map_err(|e| e.to_string())?;

    // Wait until a researcher holds the job, then SIGKILL it at once.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (job, holder) = loop {
        if let Some(found) = held_job(&session).await {
            break found;
        }
        if Instant::now() > deadline {
            return Err("no researcher took the job within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let victim = researchers
        .iter_mut()
        .find(|(name, _)| *name == holder)
        .and_then(|(_, d)| d.take())
        .ok_or_else(|| format!("holder {holder} is not one of the bench's researchers"))?;
    let killed = Instant::now();
    drop(victim); // SIGKILL, then reap the process.
    let (record, _) = jobs::read(&session, &job)
        .await
        .map_err(|e| e.to_string())?;
    let episode = record.episode.clone();
    let before: BTreeSet<String> = store::children(&session, paths::JOBS)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();

    let (mut lock_gone, mut expired, mut planned) = (None, None, None);
    let deadline = killed + Duration::from_millis(timeout_ms * 3 + 30_000);
    while planned.is_none() {
        if Instant::now() > deadline {
            return Err(format!(
                "job {job} was not planned again within {} s (finished before the kill?)",
                (deadline - killed).as_secs()
            ));
        }
        if lock_gone.is_none()
            && matches!(
                store::exists(&session, &paths::job_lock(&job)).await,
                Ok(None)
            )
        {
            lock_gone = Some(killed.elapsed());
        }
        if expired.is_none() {
            if let Ok((j, _)) = jobs::read(&session, &job).await {
                if j.status == JobState::Expired {
                    expired = Some(killed.elapsed());
                } else if matches!(j.status, JobState::Reported | JobState::Recorded) {
                    return Err(format!("job {job} finished before the kill took effect"));
                }
            }
        }
        if let Ok(children) = store::children(&session, paths::JOBS).await {
            for id in children.iter().filter(|c| !before.contains(*c)) {
                if let Ok(Some((j, _))) = jobs::read_optional(&session, id).await {
                    if j.episode == episode {
                        planned = Some(killed.elapsed());
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let planned = planned.unwrap_or_default();
    Ok(Outcome {
        lock_gone: lock_gone.unwrap_or(planned),
        expired: expired.unwrap_or(planned),
        planned,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let timeouts: Vec<u64> = env_list("BENCH_RECOVERY_TIMEOUTS_MS", "2000,4000,10000");
    let reps: usize = env_or("BENCH_RECOVERY_REPS", 5);
    let minutes: f64 = env_or("BENCH_RECOVERY_MINUTES", 5.0);
    let reaper_ms: u64 = env_or("BENCH_REAPER_INTERVAL_MS", 500);
    let tick_ms: u64 = env_or("BENCH_PLANNER_TICK_MS", 500);
    let zk = archivist_testkit::zk_connect();
    let load_before = load_average();

    let files_env = Env {
        zk: zk.clone(),
        chroot: "/unused".into(),
        database: archivist_testkit::db::fresh_binary_database_url("bench"),
        extra: Vec::new(),
    };
    let (dir, media, _files, base) = served_media(&files_env, "bench-recovery");
    generate_sample(&files_env, &media, &base, 1, &minutes.to_string(), &[]);
    let manifest = media.join("manifest.yml");

    eprintln!(
        "recovery: {reps} repetitions per session timeout; reaper sweep {reaper_ms} ms, planner tick {tick_ms} ms; logs in {}",
        dir.display()
    );
    let mut rows = Vec::new();
    for &timeout_ms in &timeouts {
        let mut outcomes = Vec::new();
        let mut failures = 0;
        let mut rep = 0;
        while outcomes.len() < reps && failures < reps {
            rep += 1;
            match repetition(&zk, &dir, &manifest, timeout_ms, rep, reaper_ms, tick_ms).await {
                Ok(o) => {
                    eprintln!(
                        "recovery: timeout {timeout_ms} ms, rep {rep}: lock gone {:.0} ms, expired {:.0} ms, planned again {:.0} ms after the kill",
                        ms(o.lock_gone),
                        ms(o.expired),
                        ms(o.planned)
                    );
                    outcomes.push(o);
                }
                Err(e) => {
                    eprintln!("recovery: timeout {timeout_ms} ms, rep {rep}: {e}; repeating");
                    failures += 1;
                }
            }
        }
        let lock = median_max(outcomes.iter().map(|o| ms(o.lock_gone)).collect());
        let expired = median_max(outcomes.iter().map(|o| ms(o.expired)).collect());
        let planned = median_max(outcomes.iter().map(|o| ms(o.planned)).collect());
        rows.push((timeout_ms, outcomes.len(), lock, expired, planned));
    }
    println!("| session timeout (baseline) | reps | lock gone (median / max) | job expired (median / max) | planned again (median / max) | planned again minus timeout (median) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for (timeout_ms, n, lock, expired, planned) in &rows {
        let (timeout_ms, n) = (*timeout_ms, *n);
        println!(
            "| {:.1} s | {n} | {:.2} / {:.2} s | {:.2} / {:.2} s | {:.2} / {:.2} s | +{:.2} s |",
            timeout_ms as f64 / 1000.0,
            lock.0 / 1000.0,
            lock.1 / 1000.0,
            expired.0 / 1000.0,
            expired.1 / 1000.0,
            planned.0 / 1000.0,
            planned.1 / 1000.0,
            (planned.0 - timeout_ms as f64) / 1000.0,
        );
    }
    println!(
        "load average (1/5/15 min): {load_before} before, {} after",
        load_average()
    );
    for (timeout_ms, n, lock, _, planned) in &rows {
        println!(
            "summary: session timeout {:.1} s: planned again {:.2} s (median) / {:.2} s (max) after the SIGKILL, {n} reps; lock gone after {:.2} s",
            *timeout_ms as f64 / 1000.0,
            planned.0 / 1000.0,
            planned.1 / 1000.0,
            lock.0 / 1000.0
        );
    }
}
