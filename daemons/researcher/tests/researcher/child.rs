//! A researcher process for the crate's multi-process tests (SIGKILL and SIGTERM mid-job):
//! runs `archivist_researcher::run` with short timeouts until SIGTERM/SIGINT.
//!
//! Run by `archivist_testkit::child_on("child::researcher_test_daemon", &config)` (a test, not a shipped
//! binary); arguments: researcher-test-daemon <connect> <chroot> <work-dir> <name> <session-timeout-ms> <read-timeout-ms> <database-url>

use std::time::Duration;

use archivist_engine::member::Identity;
use archivist_researcher::{DownloadSettings, ResearcherSettings};

/// The child process: a no-op in a normal test run (see `archivist_testkit::child`).
#[test]
#[ignore = "a child process of other tests (archivist_testkit::child_process)"]
fn researcher_test_daemon() {
    archivist_testkit::run_child("researcher_test_daemon", "researcher-test-daemon", run);
}

async fn run(args: Vec<String>) {
    archivist_testkit::expect_args(
        &args,
        8,
        "researcher-test-daemon <connect> <chroot> <work-dir> <name> <session-timeout-ms> <read-timeout-ms> <database-url>",
    );
    let number = |i: usize| archivist_testkit::number_arg(&args, i);
    let config = archivist_testkit::child_config(&args, Duration::from_millis(number(5)));
    let settings = ResearcherSettings::default()
        .with_work_dir(&args[3])
        .with_heartbeat(Duration::from_millis(300))
        .with_poll(Duration::from_millis(200))
        .with_download(
            DownloadSettings::default()
                .with_connect_timeout(Duration::from_secs(2))
                .with_read_timeout(Duration::from_millis(number(6)))
                .with_backoff(Duration::from_millis(10), Duration::from_millis(50)),
        );
    let shutdown = archivist_testkit::shutdown_on_signal();
    println!("started {}", std::process::id());
    let identity = Identity::named("researcher", &args[4]);
    let db = match archivist_db::Database::connect(&args[7]).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("researcher stopped: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = archivist_researcher::run(&config, &db, settings, identity, shutdown).await {
        eprintln!("researcher stopped: {e}");
        std::process::exit(1);
    }
    println!("stopped cleanly");
}
