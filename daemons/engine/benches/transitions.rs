//! Transition throughput next to ZooKeeper's own ceiling, measured in the same run on the
//! same server (`cargo bench -p archivist-engine --bench transitions`).
//!
//! - raw ceiling: 4-operation multis (set, delete, create, delete: the shape of a
//!   transition), one at a time and pipelined (many in flight on one session);
//! - the engine: N jobs claimed, advanced and recorded (pending -> leased -> researching
//!   -> reported, three transitions each, the first two keeping the lock) by K concurrent
//!   consumers with tiny work, through the real consumer loop.
//!
//! Env: `BENCH_JOBS` (default 2000), `BENCH_CONSUMERS` (default 8), `BENCH_SLOTS` (jobs
//! each consumer runs at once, default 4), `BENCH_SPREAD` (the
//! consumers' [`ConsumerOptions::with_spread`], default the engine's), `ARCHIVIST_TEST_ZK`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use archivist_engine::consumer::{self, Claimed, ConsumerOptions, Step};
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
        let (job, v) = Transition::new(&c.job, c.version, JobState::Leased)
            .lock(LockAction::Keep(c.lock.clone()))
            .commit(&c.session)
            .await?;
        let (job, v) = Transition::new(&job, v, JobState::Researching)
            .lock(LockAction::Keep(c.lock.clone()))
            .commit(&c.session)
            .await?;
        Transition::new(&job, v, JobState::Reported)
            .lock(LockAction::Release(c.lock.clone()))
            .commit(&c.session)
            .await?;
        Ok(())
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let jobs_n = env_or("BENCH_JOBS", 2000);
    let consumers = env_or("BENCH_CONSUMERS", 8);
    let slots = env_or("BENCH_SLOTS", 4);
    let spread = env_or("BENCH_SPREAD", consumer::DEFAULT_SPREAD);
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
    let raw_n = jobs_n.max(1000);
    let serial = raw_serial(&session, raw_n / 4).await;
    let pipelined = raw_pipelined(&session, raw_n, raw_n).await;
    let pipelined_k = raw_pipelined_sessions(&config, consumers, raw_n, 2 * raw_n).await;

    let new = |i: usize| NewJob {
        episode: format!("e{i:07}"),
        media_url: "http://127.0.0.1:1/x.mp3".into(),
        clips: vec!["c000001".into()],
        priority: (i % 5) as i64,
        curated_ms: 1_700_000_000_000 + i as i64,
        batch: None,
    };
    for i in 0..jobs_n {
        jobs::create(&session, &new(i), "bench", |_| vec![])
            .await
            .expect("create job");
    }
    // A job record as the engine writes it in a transition (after one step).
    let sample = {
        let (job, version) = jobs::read(&session, &archivist_engine::schema::paths::job_id(1))
            .await
            .expect("sample job");
        let mut t = archivist_engine::transition::Transition::new(&job, version, JobState::Leased);
        let ops = t.ops().expect("sample transition");
        ops.iter()
            .find_map(|op| match op {
                Op::SetData { data, .. } => Some(data.clone()),
                _ => None,
            })
            .expect("a SetData of the job record")
    };
    let pipelined_sized = raw_pipelined_with(&session, raw_n, 3 * raw_n, &sample).await;
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let mut handles = Vec::new();
    for k in 0..consumers {
        let s = Session::connect(&config).await.expect("consumer session");
        let options = ConsumerOptions::new(JobState::Pending, format!("bench-{k}"))
            .with_concurrency(slots)
            .with_poll_interval(Duration::from_millis(50))
            .with_spread(spread);
        let stop = shutdown.clone();
        handles.push(tokio::spawn(async move {
            consumer::run(&s, options, Arc::new(ThreeSteps), stop).await
        }));
    }
    loop {
        if queue::len(&session, JobState::Reported).await.unwrap_or(0) >= jobs_n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    shutdown.cancel();
    for h in handles {
        let _ = h.await;
    }
    let transitions = (3 * jobs_n) as f64 / elapsed;
    let ratio = 100.0 * transitions / pipelined;
    println!("| measurement | per second | vs pipelined raw ceiling |");
    println!("|---|---:|---:|");
    println!(
        "| raw 4-op multi, one at a time | {serial:.0} | {:.0}% |",
        100.0 * serial / pipelined
    );
    println!("| raw 4-op multi, pipelined | {pipelined:.0} | 100% |");
    println!(
        "| raw 4-op multi, pipelined on {consumers} sessions at once | {pipelined_k:.0} | {:.0}% |",
        100.0 * pipelined_k / pipelined
    );
    println!(
        "| raw 4-op multi, pipelined, SetData of a job record ({} bytes, as the engine writes) | {pipelined_sized:.0} | {:.0}% |",
        sample.len(),
        100.0 * pipelined_sized / pipelined
    );
    println!(
        "| engine transitions ({jobs_n} jobs x 3, {consumers} consumers x {slots} slots, spread {spread}, claim + lock + re-check included) | {transitions:.0} | {ratio:.0}% |"
    );
    println!(
        "| engine jobs completed | {:.0} | |",
        jobs_n as f64 / elapsed
    );
    println!(
        "load average (1/5/15 min): {load_before} before, {} after",
        load_average()
    );
    println!(
        "summary: {transitions:.0} transitions/s = {ratio:.0}% of the pipelined raw ceiling ({pipelined:.0} multis/s; one at a time {serial:.0}/s; pipelined on {consumers} sessions {pipelined_k:.0}/s = {:.0}%); target >= 50%: {}",
        100.0 * transitions / pipelined_k,
        if ratio >= 50.0 { "met" } else { "not met" }
    );
    println!(
        "same-size ceiling: {transitions:.0} transitions/s = {:.0}% of pipelined 4-op multis writing a {}-byte job record ({pipelined_sized:.0}/s)",
        100.0 * transitions / pipelined_sized,
        sample.len()
    );
}
