//! Issue 17, defect 5: a job whose episode's research record does not decode fails with
//! a message saying so (it was released and retried unseen every backoff, shown as a
//! plain `pending` job).

use std::time::Duration;

use archivist_engine::schema::JobState;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_an_unreadable_research_record_fails_and_says_why() {
    for (config, session, db) in stores("researcher-unreadable").await {
        let episode = "e0000001";
        // A stored run whose clip set does not parse (the database's research archive).
        archivist_db::research::update(&db, episode, |r| {
            r.runs.push(archivist_engine::schema::records::ResearchRun {
                job: "j0000000009".into(),
                researcher: "r-old".into(),
                at: time::OffsetDateTime::now_utc(),
                clips: [1u32].into_iter().collect(),
            })
        })
        .await
        .unwrap();
        assert_eq!(
            archivist_db::testing::damage_research_runs(&db, episode)
                .await
                .unwrap(),
            1
        );
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
            message.contains("unreadable record")
                && message.contains("research_runs (e0000001, j0000000009)"),
            "{message}"
        );
    }
}
