//! A planner process for the planner's multi-process tests (SIGKILL mid-run).
//!
//! Run by `archivist_testkit::child_on("child::planner_test_daemon", &config)` (a test, not a shipped
//! binary); arguments: planner-test-daemon <connect> <chroot> <session-timeout-ms> <max-clips> <tick-ms> <name> <database-url>

use std::time::Duration;

use archivist_engine::member::Identity;
use archivist_planner::PlannerSettings;

/// The child process: a no-op in a normal test run (see `archivist_testkit::child`).
#[test]
#[ignore = "a child process of other tests (archivist_testkit::child_process)"]
fn planner_test_daemon() {
    archivist_testkit::run_child("planner_test_daemon", "planner-test-daemon", run);
}

async fn run(args: Vec<String>) {
    archivist_testkit::expect_args(
        &args,
        8,
        "planner-test-daemon <connect> <chroot> <session-timeout-ms> <max-clips> <tick-ms> <name> <database-url>",
    );
    let number = |i: usize| archivist_testkit::number_arg(&args, i);
    let config = archivist_testkit::child_config(&args, Duration::from_millis(number(3)));
    let settings = PlannerSettings::default()
        .with_max_clips(number(4) as usize)
        .with_tick(Duration::from_millis(number(5)));
    let shutdown = archivist_testkit::shutdown_on_signal();
    let db = match archivist_db::Database::connect(&args[7]).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("planner stopped: {e}");
            std::process::exit(1);
        }
    };
    println!("started");
    if let Err(e) = archivist_planner::run(
        &config,
        &db,
        settings,
        Identity::named("planner", &args[6]),
        shutdown,
    )
    .await
    {
        eprintln!("planner stopped: {e}");
        std::process::exit(1);
    }
}
