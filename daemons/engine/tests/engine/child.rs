//! A consumer process with tiny work, for the engine's multi-process tests:
//! claims jobs from one state, waits `--work-ms`, moves each to
//! the state's default success target, and prints `processed <job>` per job.
//!
//! Run by `archivist_testkit::child_on("child::engine_test_consumer", &config)` (a test, not a shipped
//! binary); arguments: engine-test-consumer <connect> <chroot> <state> <work-ms> <concurrency> <session-timeout-ms>

use std::sync::Arc;
use std::time::Duration;

use archivist_engine::consumer::{self, Claimed, ConsumerOptions, Step};
use archivist_engine::transition::{machine, LockAction, Role, Transition};
use archivist_engine::EngineError;

struct TinyWork {
    work: Duration,
    owner: String,
}

impl Step for TinyWork {
    async fn run(&self, claimed: Claimed) -> Result<(), EngineError> {
        let lost = claimed.lost();
        tokio::select! {
            _ = tokio::time::sleep(self.work) => {}
            _ = lost.cancelled() => return Err(EngineError::SessionLost("during work".into())),
        }
        let to = machine()
            .state(claimed.job.status)
            .on_success
            .ok_or_else(|| EngineError::Config("state has no success target".into()))?;
        let role = Role::for_move(machine(), claimed.job.status, to)
            .ok_or_else(|| EngineError::Config("the table lists no role for the move".into()))?;
        Transition::new(role, &claimed.job, claimed.version, to)
            .lock(LockAction::Release(claimed.lock.clone()))
            .event(&self.owner, "tiny work", "ok")
            .commit(&claimed.session)
            .await?;
        println!("processed {}", claimed.job.id);
        Ok(())
    }
}

/// The child process: a no-op in a normal test run (see `archivist_testkit::child`).
#[test]
#[ignore = "a child process of other tests (archivist_testkit::child_process)"]
fn engine_test_consumer() {
    archivist_testkit::run_child("engine_test_consumer", "engine-test-consumer", run);
}

async fn run(args: Vec<String>) {
    archivist_testkit::expect_args(
        &args,
        7,
        "engine-test-consumer <connect> <chroot> <state> <work-ms> <concurrency> <session-timeout-ms>",
    );
    let parse = |i: usize| archivist_testkit::number_arg(&args, i);
    let state = args[3].parse().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let config = archivist_testkit::child_config(&args, Duration::from_millis(parse(6)));
    let session = archivist_testkit::child_session(&config).await;
    let owner = format!("test-consumer-{}", std::process::id());
    println!("session {}", session.id());
    let step = Arc::new(TinyWork {
        work: Duration::from_millis(parse(4)),
        owner: owner.clone(),
    });
    let options = ConsumerOptions::new(state, owner)
        .with_concurrency(parse(5) as usize)
        .with_poll_interval(Duration::from_millis(200));
    let shutdown = archivist_testkit::shutdown_on_signal();
    if let Err(e) = consumer::run(&session, options, step, shutdown).await {
        eprintln!("consumer stopped: {e}");
        std::process::exit(1);
    }
}
