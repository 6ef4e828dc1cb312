use std::process::Stdio;
use std::time::Duration;

use archivist_engine::schema::paths;
use archivist_engine::store;
use archivist_planner::{Planner, Stop};
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planner_killed_mid_run_leaves_a_consistent_tree() {
    for backend in archivist_testkit::db::backends() {
        let url = archivist_testkit::db::fresh_database_url(backend, "planner-sigkill").await;
        let db = archivist_db::Database::connect(&url).await.unwrap();
        let (config, session) = archivist_testkit::fresh_tree("planner-sigkill").await;
        let mut episodes = Vec::new();
        for n in 1..=200 {
            episodes.push(put_episode(&session, &db, n, 0, BASE_MS + n as i64, false).await);
        }
        let mut clips = Vec::new();
        for n in 1..=3 {
            clips.push(put_clip(&session, &db, n, 0, BASE_MS, false).await);
        }
        // 150 slots: the planner wants 151 waiting items, one multi each.
        register_researcher(&session, "r1", 150).await;
        let mut child = archivist_testkit::child_on("child::planner_test_daemon", &config)
            .args(["2000", "3", "100", "doomed", &url])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn planner");
        let started = archivist_testkit::eventually(Duration::from_secs(30), || async {
            store::exists(&session, paths::JOB_COUNTER)
                .await
                .unwrap()
                .map(|s| s.version)
                .unwrap_or(0)
                >= 5
        })
        .await;
        assert!(started, "the planner never created work");
        child.kill().unwrap(); // SIGKILL, mid-burst
        child.wait().unwrap();
        let made = store::exists(&session, paths::JOB_COUNTER)
            .await
            .unwrap()
            .unwrap()
            .version;
        let jobs = all_jobs(&session).await;
        assert!(
            made < 151,
            "the planner finished before the kill ({made} items); make the burst longer"
        );
        println!("killed after {} work items", jobs.len());
        let problems = inconsistencies(&session).await;
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            jobs.len() as i32,
            store::exists(&session, paths::JOB_COUNTER)
                .await
                .unwrap()
                .unwrap()
                .version
        );
        // A new planner carries on from the tree as it is: no pair planned twice.
        let mut planner = Planner::start(&session, &db, settings().with_max_clips(3), "survivor")
            .await
            .unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert_eq!(report.stop, Stop::Surplus);
        assert_eq!(pending_len(&session).await, 151);
        let pairs = planned_pairs(&session).await;
        assert!(
            pairs.values().all(|n| *n == 1),
            "a pair was planned twice after the kill"
        );
        assert_eq!(pairs.len(), 151 * 3);
        assert!(inconsistencies(&session).await.is_empty());
        let _ = episodes;
    }
}
