//! Issue 17, defect 5: a job whose episode's research record does not decode fails with
//! a message saying so (it was released and retried unseen every backoff, shown as a
//! plain `pending` job).

use std::time::Duration;

use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_an_unreadable_research_record_fails_and_says_why() {
    for (config, session, db) in stores("researcher-unreadable").await {
        let episode = "e0000001";
        archivist_engine::ops::commit(
            &session,
            &[archivist_engine::ops::Op::Create {
                path: paths::research(episode),
                data: b"schema: 1\nepisode: e0000001\nruns: []\nfound:\n  c000001: [{at: x}]\n"
                    .to_vec(),
                mode: archivist_engine::ops::Mode::Persistent,
            }],
        )
        .await
        .unwrap();
        let job = plan(
            &session,
            episode,
            "http://127.0.0.1:9/never-fetched.mp3",
            &["c000001".to_string()],
        )
        .await;
        let work = work_dir("unreadable");
        let running = start(&config, &db, settings(&work), "r-unreadable");
        let failed = wait_for(
            &session,
            &job.id,
            &[JobState::Failed],
            Duration::from_secs(20),
        )
        .await;
        running.stop().await;
        let message = failed.message.unwrap_or_default();
        assert!(
            message.contains("unreadable record") && message.contains(&paths::research(episode)),
            "{message}"
        );
    }
}
