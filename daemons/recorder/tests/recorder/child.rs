//! A deliberately slow recorder, for the SIGKILL test: for each report it prepares the
//! multi, prints `prepared <report>`, waits `<delay-ms>`, stores in the database, commits
//! the multi and prints `stored <report>`. Killing it during the wait leaves a prepared,
//! uncommitted store.
//!
//! Run by `archivist_testkit::child_on("child::recorder_test_slow", &config)` (a test, not a shipped
//! binary); arguments: recorder-test-slow <connect> <chroot> <delay-ms> <database-url>

use std::time::Duration;

use archivist_engine::schema::paths;
use archivist_engine::store as zkstore;
use archivist_recorder::store;

/// The child process: a no-op in a normal test run (see `archivist_testkit::child`).
#[test]
#[ignore = "a child process of other tests (archivist_testkit::child_process)"]
fn recorder_test_slow() {
    archivist_testkit::run_child("recorder_test_slow", "recorder-test-slow", run);
}

async fn run(args: Vec<String>) {
    archivist_testkit::expect_args(
        &args,
        5,
        "recorder-test-slow <connect> <chroot> <delay-ms> <database-url>",
    );
    let Ok(delay) = args[3].parse::<u64>() else {
        eprintln!("delay must be a number of milliseconds");
        std::process::exit(2);
    };
    let config = archivist_testkit::child_config(&args, Duration::from_secs(4));
    let session = archivist_testkit::child_session(&config).await;
    let db = match archivist_db::Database::connect(&args[4]).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    };
    loop {
        let names = match zkstore::children(&session, paths::REPORTS).await {
            Ok(n) => n,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1)
            }
        };
        for name in names {
            let Some(job) = store::job_of(&name) else {
                continue;
            };
            let mut prepared =
                match store::prepare(&session, job, std::slice::from_ref(&name)).await {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("prepare {name}: {e}");
                        continue;
                    }
                };
            if prepared.ops().is_empty() {
                continue;
            }
            println!("prepared {name}");
            tokio::time::sleep(Duration::from_millis(delay)).await;
            if let Err(e) = store::record_in_database(&db, &mut prepared).await {
                eprintln!("database {name}: {e}");
                continue;
            }
            match store::commit(&session, &prepared).await {
                Ok(()) => println!("stored {name}"),
                Err(e) => eprintln!("commit {name}: {e}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
