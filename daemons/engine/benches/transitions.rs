//! Transition throughput next to ZooKeeper's own ceiling, measured in the same run on the
//! same server (`cargo bench -p archivist-engine --bench transitions`).
//!
//! - raw ceiling: 4-operation multis (set, delete, create, delete: the shape of a
//!   transition), one at a time and pipelined (many in flight on one session);
//! - the engine: N jobs claimed, advanced and recorded (pending -> leased -> researching
//!   -> reported, three transitions each, the first two keeping the lock) by K concurrent
//!   consumers with tiny work, through the real consumer loop.
//!
//! Env: `BENCH_JOBS` (jobs per engine run, default 4000), `BENCH_CONFIGS` (the engine
//! runs, consumers x slots each, default `8x4,8x16,4x128,2x256`), or `BENCH_CONSUMERS` and
//! `BENCH_SLOTS` for a single run, `BENCH_SPREAD` (the consumers'
//! [`ConsumerOptions::with_spread`], default the engine's), `BENCH_RAW` (multis per
//! ceiling measurement, all in flight at once, default 4000), `ARCHIVIST_TEST_ZK`.
//!
//! The benchmark deletes its tree at the end: a server that keeps every run's nodes gets
//! slower run after run (garbage collection), and the figures drift down with it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use archivist_engine::consumer::{self, ClaimStats, Claimed, ConsumerOptions, Step};
use archivist_engine::jobs::{self, NewJob};
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::JobState;
use archivist_engine::transition::{LockAction, Transition};
use archivist_engine::{queue, EngineError, Session};
use archivist_testkit::{env_or, load_average};
use tokio_util::sync::CancellationToken;

fn four_ops(i: usize) -> Vec<Op> {
    four_ops_with(i, b"status: leased\n")
}

/// The same 4-op multi, its SetData writing `record` (the engine writes a whole job
/// record in every transition, so this is the ceiling for multis of the engine's size).
fn four_ops_with(i: usize, record: &[u8]) -> Vec<Op> {
    let a = format!("/bench/a{i}");
    vec![
        Op::Create {
            path: a.clone(),
            data: b"x".to_vec(),
            mode: Mode::Persistent,
        },
        Op::SetData {
            path: a.clone(),
            data: record.to_vec(),
            version: Some(0),
        },
        Op::Create {
            path: format!("/bench/b{i}"),
            data: vec![],
            mode: Mode::Persistent,
        },
        Op::Delete {
            path: a,
            version: Some(1),
        },
    ]
}

async fn raw_serial(session: &Session, n: usize) -> f64 {
    let started = Instant::now();
    for i in 0..n {
        ops::commit(session, &four_ops(i)).await.expect("raw multi");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

async fn raw_pipelined(session: &Session, n: usize, offset: usize) -> f64 {
    raw_pipelined_with(session, n, offset, b"status: leased\n").await
}

async fn raw_pipelined_with(session: &Session, n: usize, offset: usize, record: &[u8]) -> f64 {
    let started = Instant::now();
    let batches: Vec<Vec<Op>> = (0..n).map(|i| four_ops_with(offset + i, record)).collect();
    // `ops::send` sends at the call (an `async fn` such as `ops::commit` would only send
    // when awaited, one at a time): send all, then await all.
    let pending: Vec<_> = batches.iter().map(|b| ops::send(session, b)).collect();
    for result in ops::await_all(pending).await {
        result.expect("raw multi");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// Pipelined multis on `sessions` sessions at once (the engine's consumers each have one).
async fn raw_pipelined_sessions(
    config: &archivist_engine::ZkConfig,
    sessions: usize,
    n: usize,
    offset: usize,
) -> f64 {
    let mut connected = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        connected.push(Session::connect(config).await.expect("raw session"));
    }
    let per = (n / sessions.max(1)).max(1);
    let started = Instant::now();
    let mut handles = Vec::new();
    for (k, session) in connected.into_iter().enumerate() {
        handles.push(tokio::spawn(async move {
            let batches: Vec<Vec<Op>> = (0..per).map(|i| four_ops(offset + k * per + i)).collect();
            let pending: Vec<_> = batches.iter().map(|b| ops::send(&session, b)).collect();
            for result in ops::await_all(pending).await {
                result.expect("raw multi");
            }
        }));
    }
    for h in handles {
        h.await.expect("raw task");
    }
    (per * sessions.max(1)) as f64 / started.elapsed().as_secs_f64()
}

struct ThreeSteps;

impl Step for ThreeSteps {
    async fn run(&self, c: Claimed) -> Result<(), EngineError> {
        let (job, v) = Transition::new(
            archivist_engine::transition::Role::Researcher,
            &c.job,
            c.version,
            JobState::Leased,
        )
        .lock(LockAction::Keep(c.lock.clone()))
        .commit(&c.session)
        .await?;
        let (job, v) = Transition::new(
            archivist_engine::transition::Role::Researcher,
            &job,
            v,
            JobState::Researching,
        )
        .lock(LockAction::Keep(c.lock.clone()))
        .commit(&c.session)
        .await?;
        Transition::new(
            archivist_engine::transition::Role::Researcher,
            &job,
            v,
            JobState::Reported,
        )
        .lock(LockAction::Release(c.lock.clone()))
        .commit(&c.session)
        .await?;
        Ok(())
    }
}

/// One engine configuration: `consumers` sessions, each running `slots` jobs at once.
#[derive(Debug, Clone, Copy)]
struct Config {
    consumers: usize,
    slots: usize,
}

/// `BENCH_CONFIGS` ("2x256,4x128"), or `BENCH_CONSUMERS` x `BENCH_SLOTS` when either is
/// set, or the default sweep.
fn configs() -> Vec<Config> {
    if std::env::var_os("BENCH_CONSUMERS").is_some() || std::env::var_os("BENCH_SLOTS").is_some() {
        return vec![Config {
            consumers: env_or("BENCH_CONSUMERS", 4),
            slots: env_or("BENCH_SLOTS", 128),
        }];
    }
    let spec = std::env::var("BENCH_CONFIGS").unwrap_or_else(|_| "8x4,8x16,4x128,2x256".into());
    spec.split(',')
        .filter_map(|c| {
            let (k, s) = c.trim().split_once('x')?;
            Some(Config {
                consumers: k.parse().ok()?,
                slots: s.parse().ok()?,
            })
        })
        .collect()
}

/// CPU seconds this process has used so far (user + system), from `/proc/self/stat`;
/// 0 where that is not available.
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Creates `n` pending jobs (numbered from `first` for their episode names).
async fn create_jobs(session: &Session, first: usize, n: usize) {
    for i in first..first + n {
        let job = NewJob {
            episode: format!("e{i:07}"),
            media_url: "http://127.0.0.1:1/x.mp3".into(),
            clips: vec!["c000001".into()],
            priority: (i % 5) as i64,
            curated_ms: 1_700_000_000_000 + i as i64,
            batch: None,
        };
        jobs::create(session, &job, "bench", |_| vec![])
            .await
            .expect("create job");
    }
}

/// Runs the consumers of `config` until all `total` jobs are reported; transitions/s.
async fn engine_run(
    config: &archivist_engine::ZkConfig,
    session: &Session,
    run: Config,
    spread: usize,
    jobs_n: usize,
    total: usize,
) -> (f64, Arc<ClaimStats>, f64) {
    let mut sessions = Vec::with_capacity(run.consumers);
    for _ in 0..run.consumers {
        sessions.push(Session::connect(config).await.expect("consumer session"));
    }
    let stats = Arc::new(ClaimStats::default());
    let shutdown = CancellationToken::new();
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let mut handles = Vec::new();
    for (k, s) in sessions.into_iter().enumerate() {
        let options = ConsumerOptions::new(JobState::Pending, format!("bench-{k}"))
            .with_concurrency(run.slots)
            .with_poll_interval(Duration::from_millis(50))
            .with_spread(spread)
            .with_stats(stats.clone());
        let stop = shutdown.clone();
        handles.push(tokio::spawn(async move {
            consumer::run(&s, options, Arc::new(ThreeSteps), stop).await
        }));
    }
    while queue::len(session, JobState::Reported).await.unwrap_or(0) < total {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = process_cpu_seconds() - cpu_before;
    shutdown.cancel();
    for h in handles {
        let _ = h.await;
    }
    let transitions = (3 * jobs_n) as f64;
    (transitions / elapsed, stats, 1e6 * cpu / transitions)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let jobs_n = env_or("BENCH_JOBS", 4000);
    let spread = env_or("BENCH_SPREAD", consumer::DEFAULT_SPREAD);
    let runs = configs();
    let load_before = load_average();
    let (config, session) = archivist_testkit::fresh_tree("bench-transitions").await;
    session
        .client()
        .create(
            "/bench",
            b"",
            &session.create_options(archivist_engine::zk::CreateMode::Persistent),
        )
        .await
        .expect("bench dir");
    let raw_n = env_or("BENCH_RAW", 4000);
    let mut next_raw = raw_n; // the one-at-a-time run below uses 0..raw_n / 4
    let mut raw_offset = |n: usize| {
        next_raw += n;
        next_raw - n
    };
    let serial = raw_serial(&session, raw_n / 4).await;
    let widest = runs.iter().map(|r| r.consumers).max().unwrap_or(1);
    let pipelined_k = raw_pipelined_sessions(&config, widest, raw_n, raw_offset(raw_n)).await;

    create_jobs(&session, 0, 1).await;
    // A job record as the engine writes it in a transition (after one step).
    let sample = {
        let (job, version) = jobs::read(&session, &archivist_engine::schema::paths::job_id(1))
            .await
            .expect("sample job");
        let mut t = archivist_engine::transition::Transition::new(
            archivist_engine::transition::Role::Researcher,
            &job,
            version,
            JobState::Leased,
        );
        let ops = t.ops().expect("sample transition");
        ops.iter()
            .find_map(|op| match op {
                Op::SetData { data, .. } => Some(data.clone()),
                _ => None,
            })
            .expect("a SetData of the job record")
    };

    // The ceilings are measured right before every engine run (and once more at the
    // end), on the same server, and their medians are the baselines: on 2 cores one
    // burst swings by 2x from run to run.
    let mut tiny = Vec::new();
    let mut sized = Vec::new();
    let mut engine = Vec::new();
    let mut created = 1;
    let mut reported = 0;
    for run in &runs {
        tiny.push(raw_pipelined(&session, raw_n, raw_offset(raw_n)).await);
        sized.push(raw_pipelined_with(&session, raw_n, raw_offset(raw_n), &sample).await);
        let n = if created > reported {
            jobs_n - 1
        } else {
            jobs_n
        };
        create_jobs(&session, created, n).await;
        created += n;
        let batch = created - reported;
        let (rate, stats, cpu_us) =
            engine_run(&config, &session, *run, spread, batch, created).await;
        reported = created;
        engine.push((run, rate, stats, cpu_us));
    }
    tiny.push(raw_pipelined(&session, raw_n, raw_offset(raw_n)).await);
    sized.push(raw_pipelined_with(&session, raw_n, raw_offset(raw_n), &sample).await);
    let pipelined = median(&tiny);
    let pipelined_sized = median(&sized);
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        format!("{lo:.0}-{hi:.0}")
    };

    println!("| measurement | per second | vs pipelined raw ceiling | vs same-size ceiling |");
    println!("|---|---:|---:|---:|");
    println!(
        "| raw 4-op multi, one at a time | {serial:.0} | {:.0}% | |",
        100.0 * serial / pipelined
    );
    println!(
        "| raw 4-op multi, pipelined ({raw_n} in flight; median of {}, range {}) | {pipelined:.0} | 100% | |",
        tiny.len(),
        range(&tiny)
    );
    println!(
        "| raw 4-op multi, pipelined on {widest} sessions at once | {pipelined_k:.0} | {:.0}% | |",
        100.0 * pipelined_k / pipelined
    );
    println!(
        "| raw 4-op multi, pipelined, SetData of a {}-byte job record as the engine writes (median of {}, range {}) | {pipelined_sized:.0} | {:.0}% | 100% |",
        sample.len(),
        sized.len(),
        range(&sized),
        100.0 * pipelined_sized / pipelined
    );
    for (run, rate, stats, cpu_us) in &engine {
        println!(
            "| engine transitions ({jobs_n} jobs x 3, {} consumers x {} slots, spread {spread}, claim + lock + re-check included; {} lock attempts lost to another consumer; benchmark process CPU {cpu_us:.0} us per transition) | {rate:.0} | {:.0}% | {:.0}% |",
            run.consumers,
            run.slots,
            stats.busy(),
            100.0 * rate / pipelined,
            100.0 * rate / pipelined_sized
        );
    }
    println!(
        "load average (1/5/15 min): {load_before} before, {} after",
        load_average()
    );
    for (run, rate, _, _) in &engine {
        let ratio = 100.0 * rate / pipelined;
        println!(
            "summary: {} x {}: {rate:.0} transitions/s = {ratio:.0}% of the pipelined raw ceiling ({pipelined:.0} multis/s, median of {}), {:.0}% of the same-size ceiling ({pipelined_sized:.0}/s); target >= 50%: {}",
            run.consumers,
            run.slots,
            tiny.len(),
            100.0 * rate / pipelined_sized,
            if ratio >= 50.0 { "met" } else { "not met" }
        );
    }
    drop(session);
    let (hosts, chroot) = config.hosts_and_chroot();
    match archivist_engine::zk::Client::connector()
        .connect(&hosts)
        .await
    {
        Ok(client) => {
            if let Err(e) = archivist_testkit::delete_tree(&client, &chroot).await {
                eprintln!("could not delete the benchmark tree {chroot}: {e}");
            }
        }
        Err(e) => eprintln!("could not delete the benchmark tree {chroot}: {e}"),
    }
}
