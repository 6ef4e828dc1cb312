//! Winding down (SIGTERM) and dying (SIGKILL) in the middle of a job.

use std::process::Stdio;
use std::time::Duration;

use archivist_engine::member;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::LeaseRecord;
use archivist_engine::schema::JobState;
use archivist_engine::store;
use archivist_testkit::eventually;

use crate::http::{Route, Server};
use crate::support::*;

/// Serves the fixture with clips after the first slowed down, so a job is reliably
/// mid-way (first clip reported, second being fetched) when the test strikes.
async fn slow_clip_setup(db: &archivist_db::Database, server: &Server) -> Vec<String> {
    let audio = audio();
    let mut catalog = Vec::new();
    let mut ids = Vec::new();
    for (i, (id, wav, _)) in audio.clips.iter().enumerate() {
        let route = if i == 0 {
            Route::audio(wav)
        } else {
            Route::slow_audio(wav, Duration::from_millis(1500))
        };
        catalog.push((id.clone(), server.route(&format!("/clips/{id}.wav"), route)));
        ids.push(id.clone());
    }
    add_clips(db, &catalog).await;
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_mid_job_finishes_the_clip_flags_it_final_and_releases_the_job() {
    for (config, session, db) in stores("researcher-sigterm").await {
        let server = Server::start().await;
        let clips = slow_clip_setup(&db, &server).await;
        let url = server.route("/e.wav", Route::audio(&audio().episode));
        let job = plan(&session, "e0000001", &url, &clips).await;
        let researcher = start(
            &config,
            &db,
            settings(&work_dir("sigterm")),
            "researcher-term",
        );

        assert!(
            eventually(Duration::from_secs(30), || async {
                !reports(&session, &job.id).await.is_empty()
            })
            .await,
            "first clip reported"
        );
        let asked = std::time::Instant::now();
        researcher.stop().await;
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "wound down in {:?}",
            asked.elapsed()
        );

        let done = job_record(&session, &job.id).await;
        assert_eq!(done.status, JobState::Reported, "{done:#?}");
        assert!(
            done.events.iter().any(|e| e.result.contains("wound down")),
            "{:#?}",
            done.events
        );
        let mut reports = reports(&session, &job.id).await;
        reports.sort_by(|a, b| a.clip.cmp(&b.clip));
        assert_eq!(
            reports.len(),
            2,
            "the clip in progress is finished: {reports:#?}"
        );
        assert!(
            !reports[0].is_final && reports[1].is_final,
            "the last report is final"
        );
        assert!(
            !archivist_testkit::locked(&session, &job.id).await,
            "lock released"
        );
        let (lease, _) = store::read_required::<LeaseRecord>(&session, &paths::lease(&job.id))
            .await
            .unwrap();
        assert_eq!(
            lease.holder.as_deref(),
            Some("researcher-term"),
            "the lease is left to the recorder"
        );
        assert!(member::list(&session, paths::RESEARCHERS)
            .await
            .unwrap()
            .is_empty());
        // The recorder stores what was done; the other clips stay unresearched (re-plannable).
        record_reports(&session, &db).await;
        close_reported(&session, &job.id).await;
        let research = research(&db, "e0000001").await;
        assert_eq!(research.researched().len(), 2);
    }
}

async fn job_record(
    session: &archivist_engine::Session,
    id: &str,
) -> archivist_engine::schema::records::JobRecord {
    job(session, id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_researcher_loses_the_job_and_another_redoes_only_the_unreported_clips() {
    for backend in archivist_testkit::db::backends() {
        let db_url = archivist_testkit::db::fresh_database_url(backend, "researcher-sigkill").await;
        let db = archivist_db::Database::connect(&db_url).await.unwrap();
        let (config, session) = archivist_testkit::fresh_tree("researcher-sigkill").await;
        let server = Server::start().await;
        let clips = slow_clip_setup(&db, &server).await;
        let url = server.route("/e.wav", Route::audio(&audio().episode));
        let job1 = plan(&session, "e0000001", &url, &clips).await;

        let mut child = archivist_testkit::child_on("child::researcher_test_daemon", &config)
            .arg(work_dir("sigkill-a"))
            .arg("researcher-doomed")
            .arg("1500")
            .arg("5000")
            .arg(&db_url)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start researcher process");
        let first = eventually(Duration::from_secs(30), || async {
            !reports(&session, &job1.id).await.is_empty()
        })
        .await;
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        assert!(first, "the doomed researcher reported its first clip");
        let reported_by_a = reports(&session, &job1.id).await;
        assert_eq!(
            reported_by_a.len(),
            1,
            "killed while fetching the second clip"
        );
        assert!(!reported_by_a[0].is_final);

        // Its lock goes with its session; the job is stuck mid-way until the reaper acts.
        assert!(
            eventually(Duration::from_secs(10), || async {
                !archivist_testkit::locked(&session, &job1.id).await
            })
            .await,
            "lock vanished with the session"
        );
        assert!(matches!(
            job(&session, &job1.id).await.status,
            JobState::Leased | JobState::Researching
        ));
        assert!(member::list(&session, paths::RESEARCHERS)
            .await
            .unwrap()
            .is_empty());

        // Recorder stores what was reported; the reaper expires the lease; the planner plans
        // the episode again (with every clip: the researcher skips what is researched).
        assert_eq!(record_reports(&session, &db).await.len(), 1);
        expire(&session, &job1.id).await;
        let job2 = plan(&session, "e0000001", &url, &clips).await;

        let researcher = start(
            &config,
            &db,
            settings(&work_dir("sigkill-b")),
            "researcher-heir",
        );
        let done = wait_for(
            &session,
            &job2.id,
            &[JobState::Reported, JobState::Failed],
            Duration::from_secs(60),
        )
        .await;
        assert_eq!(done.status, JobState::Reported, "{done:#?}");
        assert_eq!(done.progress.clips_done, 4, "skipped clips count as done");
        let mut redone: Vec<String> = reports(&session, &job2.id)
            .await
            .into_iter()
            .map(|r| r.clip)
            .collect();
        redone.sort();
        let mut expected: Vec<String> = clips.clone();
        expected.retain(|c| c != &reported_by_a[0].clip);
        assert_eq!(redone, expected, "only the unreported clips are redone");
        // The stand-in recorder panics on a duplicate result.
        assert_eq!(record_reports(&session, &db).await.len(), 3);
        close_reported(&session, &job2.id).await;
        let research = research(&db, "e0000001").await;
        assert_eq!(research.researched().len(), 4);
        assert_eq!(research.runs.len(), 2);
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_researcher_that_loses_the_job_releases_the_lock_it_still_holds() {
    // Outside test 17d, finding 15: the job's queue entry deleted mid-job made the next
    // transition fail its precondition ("lost the job"), and the researcher walked away
    // keeping the lock: the job stayed `leased` under a live lock, never expired, a cancel
    // was accepted and ignored, until the researcher's process restarted.
    for (config, session, db) in stores("researcher-lost-job").await {
        let server = Server::start().await;
        let clips = slow_clip_setup(&db, &server).await;
        let url = server.route("/e.wav", Route::audio(&audio().episode));
        let job = plan(&session, "e0000001", &url, &clips).await;
        let researcher = start(
            &config,
            &db,
            settings(&work_dir("lost-job")),
            "researcher-lost",
        );
        assert!(
            eventually(Duration::from_secs(30), || async {
                !reports(&session, &job.id).await.is_empty()
            })
            .await,
            "first clip reported"
        );
        // Mid-job (the next clip is being fetched slowly): its queue entry goes by hand.
        let held = job_record(&session, &job.id).await;
        let states = archivist_testkit::queues_holding(&session, &job.id).await;
        assert_eq!(states, vec![held.status], "{held:#?}");
        let entry = paths::queue_entry(held.status, &held.queue_entry().name());
        session.client().delete(&entry, None).await.unwrap();
        let released = eventually(Duration::from_secs(20), || async {
            !archivist_testkit::locked(&session, &job.id).await
        })
        .await;
        researcher.stop().await;
        assert!(released, "the lock is still held after the job was lost");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_requested_as_the_researcher_stops_is_obeyed_not_handed_back() {
    // Outside test 17d, finding 13: a cancel written while the researcher was stopping
    // was carried into `pending` by the hand-back (`pending (cancel requested)`); the
    // work-item TTL then expired the job and its pairs were planned again, though the
    // operator had been told "requested".
    for (config, session, db) in stores("researcher-request-handback").await {
        let server = Server::start().await;
        let clips = serve_clips(&db, &server, 1).await;
        let url = server.route(
            "/e.wav",
            Route::slow_audio(&audio().episode, Duration::from_secs(10)),
        );
        let job = plan(&session, "e0000001", &url, &clips).await;
        let researcher = start(
            &config,
            &db,
            settings(&work_dir("request-handback")),
            "researcher-req",
        );
        wait_for(
            &session,
            &job.id,
            &[JobState::Leased],
            Duration::from_secs(20),
        )
        .await;
        // The operator's cancel (version-checked, again if a heartbeat moved the job), then
        // SIGTERM at once: the researcher is downloading, so it hands the job back.
        let path = paths::job(&job.id);
        loop {
            let (mut current, version) = archivist_engine::jobs::read(&session, &job.id)
                .await
                .unwrap();
            assert_eq!(current.status, JobState::Leased);
            current.request = Some(archivist_engine::schema::records::JobRequest::Cancel);
            current.request_reason = Some("stop-this".to_string());
            let data = store::encode(&path, &current).unwrap();
            if session
                .client()
                .set_data(&path, &data, Some(version))
                .await
                .is_ok()
            {
                break;
            }
        }
        researcher.stop().await;
        let done = job_record(&session, &job.id).await;
        assert_eq!(done.status, JobState::Cancelled, "{done:#?}");
        assert_eq!(done.request, None);
        assert!(
            done.message
                .as_deref()
                .is_some_and(|m| m.contains("stop-this")),
            "{done:#?}"
        );
        assert!(!archivist_testkit::locked(&session, &job.id).await);
    }
}
