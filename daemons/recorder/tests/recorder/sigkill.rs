//! A recorder killed with SIGKILL between reading and committing leaves nothing
//! half-done: a fresh recorder stores every report exactly once.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_recorder::{archive, watcher};
use tokio_util::sync::CancellationToken;

use crate::support::{self, job, lease, occurrences_for, report, research};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorder_killed_mid_store_leaves_nothing_half_done() {
    let (config, session) = archivist_testkit::fresh_tree("sigkill").await;
    let clips: Vec<u32> = (1..=20).collect();
    let j = job(&session, "e0000040", &clips, JobState::Researching).await;
    lease(&session, &j, 60_000).await;
    for n in &clips {
        report(&session, &j, *n, occurrences_for(*n, 0.5), false).await;
    }
    let mut child = archivist_testkit::child_on("child::recorder_test_slow", &config)
        .arg("300")
        .arg(archivist_testkit::db::tree_database_url(session.chroot()))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn slow recorder");
    let rx = archivist_testkit::stdout_lines(&mut child);
    // Wait for 3 committed stores, then kill it right after it prepared the next one.
    let mut stored_by_child = BTreeSet::new();
    let mut in_flight = None;
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) {
        if let Some(name) = line.strip_prefix("stored ") {
            stored_by_child.insert(name.to_string());
        } else if let Some(name) = line.strip_prefix("prepared ") {
            if stored_by_child.len() >= 3 {
                in_flight = Some(name.to_string());
                child.kill().expect("SIGKILL");
                break;
            }
        }
    }
    child.wait().expect("reap child");
    // Lines printed before the kill landed (none expected after `prepared`).
    while let Ok(line) = rx.try_recv() {
        if let Some(name) = line.strip_prefix("stored ") {
            stored_by_child.insert(name.to_string());
        }
    }
    let in_flight = in_flight.expect("the slow recorder never reached a fourth store");
    assert!(
        !stored_by_child.contains(&in_flight),
        "killed after committing"
    );
    // Nothing half-done: the in-flight report is still there and its clip not stored.
    let left = support::reports_left(&session).await;
    assert!(left.contains(&in_flight), "in-flight report vanished");
    assert_eq!(left.len(), 20 - stored_by_child.len());
    let (partial, _) = research(&session, "e0000040").await.unwrap();
    assert_eq!(partial.researched().len(), stored_by_child.len());

    // A fresh recorder finishes the job.
    let settings = support::settings();
    let mut bad = std::collections::HashSet::new();
    let totals = watcher::pass(
        &session,
        &support::db(&session).await,
        &settings,
        &mut bad,
        &mut Default::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(totals.stored + stored_by_child.len(), 20);
    assert_eq!(totals.already, 0);
    assert!(support::reports_left(&session).await.is_empty());
    let (record, _) = research(&session, "e0000040").await.unwrap();
    let counts = support::run_clip_counts(&record);
    assert_eq!(counts.len(), 20);
    assert!(counts.values().all(|c| *c == 1));
    for n in &clips {
        let expected = archive::compact(&occurrences_for(*n, 0.5));
        assert_eq!(
            record
                .found
                .get(&paths::clip_id(*n))
                .cloned()
                .unwrap_or_default(),
            expected,
            "clip {n}"
        );
    }
}
