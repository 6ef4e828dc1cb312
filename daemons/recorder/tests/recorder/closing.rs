//! The recorder daemon closes `reported` jobs: leftovers stored, lease revoked, lock
//! released, `recorded`, all in one multi; an unusable report fails the job.

use std::time::Duration;

use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_engine::{jobs, zk};
use tokio_util::sync::CancellationToken;

use crate::support::{
    self, fast_reaper, job, lease, mark_reported, occurrences_for, read_lease, report, research,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorder_daemon_records_a_reported_job_and_revokes_its_lease() {
    let (config, session) = archivist_testkit::fresh_tree("close").await;
    // The reaper runs inside the same process, as `recorder --with-reaper` does.
    let shutdown = CancellationToken::new();
    let recorder = support::spawn_recorder(&config, "recorder-test", &shutdown);
    let reaper = support::spawn_reaper(&config, fast_reaper(), "reaper-test", &shutdown);
    let clips: Vec<u32> = (1..=6).collect();
    let good = job(&session, "e0000030", &clips, JobState::Researching).await;
    lease(&session, &good, 60_000).await;
    for n in &clips[..5] {
        report(&session, &good, *n, occurrences_for(*n, 0.0), false).await;
    }
    // The final report and `researching -> reported` land together (the researcher's
    // multi); stand in for it by writing both.
    report(&session, &good, 6, occurrences_for(6, 0.0), true).await;
    mark_reported(&session, &good).await;

    // A second reported job whose one report is garbage: it fails with the reason. The
    // report exists before the job reaches `reported` (as with a researcher, whose final
    // report and that transition are one multi), or the recorder may close it first.
    let broken = job(&session, "e0000031", &[1], JobState::Researching).await;
    lease(&session, &broken, 60_000).await;
    let bad_name = paths::report_name(&broken.id, "c000001");
    session
        .client()
        .create(
            &paths::report(&bad_name),
            b"job: [garbage",
            &session.create_options(zk::CreateMode::Persistent),
        )
        .await
        .unwrap();
    mark_reported(&session, &broken).await;

    let settled = archivist_testkit::eventually(Duration::from_secs(20), || async {
        let a = jobs::read(&session, &good.id).await.unwrap().0.status;
        let b = jobs::read(&session, &broken.id).await.unwrap().0.status;
        a == JobState::Recorded && b == JobState::Failed
    })
    .await;
    shutdown.cancel();
    recorder.await.unwrap().unwrap();
    reaper.await.unwrap().unwrap();
    assert!(
        settled,
        "jobs did not settle: {:#?} {:#?}",
        jobs::read(&session, &good.id).await.unwrap().0,
        jobs::read(&session, &broken.id).await.unwrap().0
    );

    let (closed, _) = jobs::read(&session, &good.id).await.unwrap();
    assert_eq!(closed.last_successful_status, Some(JobState::Reported));
    assert_eq!(
        support::queues_holding(&session, &good.id).await,
        vec![JobState::Recorded]
    );
    assert!(
        read_lease(&session, &good.id).await.is_none(),
        "lease not revoked"
    );
    assert!(!archivist_testkit::locked(&session, &good.id).await);
    let (record, _) = research(&session, "e0000030").await.unwrap();
    assert_eq!(record.researched().to_string(), "1-6");
    assert!(support::run_clip_counts(&record).values().all(|c| *c == 1));

    let (failed, _) = jobs::read(&session, &broken.id).await.unwrap();
    let message = failed.message.unwrap_or_default();
    assert!(
        message.contains("report unusable") && message.contains(&bad_name),
        "{message}"
    );
    assert_eq!(support::reports_left(&session).await, vec![bad_name]);
    assert!(
        read_lease(&session, &broken.id).await.is_none(),
        "failed job kept its lease"
    );
    assert!(!archivist_testkit::locked(&session, &broken.id).await);
}

/// Reports whose occurrences break the archive's rule (non-finite or out-of-range offset,
/// confidence or speed, an offset past the episode's end) fail their job as unusable and
/// leave the research record readable. The recorder used to store `inf@-3`, which every
/// later read of the record refused (outside try: the episode vanished from `status`,
/// `export` and planning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_with_impossible_occurrences_fail_the_job_and_the_record_stays_readable() {
    use archivist_engine::schema::records::Occurrence;
    let (config, session) = archivist_testkit::fresh_tree("impossible-occurrences").await;
    let shutdown = CancellationToken::new();
    let recorder = support::spawn_recorder(&config, "recorder-impossible", &shutdown);
    let occ = |at: f64, conf: f32, speed: Option<f32>| Occurrence {
        at,
        conf,
        speed,
        part: None,
    };
    let cases = [
        (
            "e0000041",
            vec![occ(99.0, 0.9, None), occ(1.0e308, -3.0, None)],
        ),
        ("e0000042", vec![occ(-5.0, 7.0, None)]),
        ("e0000043", vec![occ(99_999.0, 0.9, None)]), // the episode is 3,600 s long
        ("e0000044", vec![occ(10.0, 0.9, Some(f32::INFINITY))]),
    ];
    let mut jobs_made = Vec::new();
    for (episode, bad) in cases {
        let j = job(&session, episode, &[1, 2], JobState::Researching).await;
        lease(&session, &j, 60_000).await;
        report(&session, &j, 1, vec![occ(12.0, 0.8, None)], false).await;
        report(&session, &j, 2, bad, true).await;
        mark_reported(&session, &j).await;
        jobs_made.push(j);
    }
    let settled = archivist_testkit::eventually(Duration::from_secs(20), || async {
        let mut all = true;
        for j in &jobs_made {
            all &= jobs::read(&session, &j.id).await.unwrap().0.status == JobState::Failed;
        }
        all
    })
    .await;
    shutdown.cancel();
    recorder.await.unwrap().unwrap();
    for j in &jobs_made {
        let (failed, _) = jobs::read(&session, &j.id).await.unwrap();
        let message = failed.message.clone().unwrap_or_default();
        assert!(settled, "{}: {:?}: {message}", j.id, failed.status);
        assert!(message.contains("report unusable"), "{message}");
        // Whatever was stored reads back, and holds nothing of the impossible report.
        let db = support::db(&session).await;
        if let Some(record) = archivist_db::research::read(&db, &j.episode)
            .await
            .unwrap_or_else(|e| panic!("{} does not read back: {e}", j.episode))
        {
            assert!(!record.found.contains_key("c000002"), "{record:?}");
        }
    }
}
