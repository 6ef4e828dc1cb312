//! Winding down (SIGTERM) and dying (SIGKILL) in the middle of a job.

use std::process::Stdio;
use std::time::Duration;

use archivist_engine::member;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{LeaseRecord, ResearchRecord};
use archivist_engine::schema::JobState;
use archivist_engine::store;
use archivist_testkit::{eventually, zk_connect};

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
            store::exists(&session, &paths::job_lock(&job.id))
                .await
                .unwrap()
                .is_none(),
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
        record_reports(&session).await;
        close_reported(&session, &job.id).await;
        let (research, _) =
            store::read_required::<ResearchRecord>(&session, &paths::research("e0000001"))
                .await
                .unwrap();
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

        let mut child = archivist_testkit::child_process("child::researcher_test_daemon")
            .arg(zk_connect())
            .arg(&config.chroot)
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
                store::exists(&session, &paths::job_lock(&job1.id))
                    .await
                    .unwrap()
                    .is_none()
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
        assert_eq!(record_reports(&session).await.len(), 1);
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
        assert_eq!(record_reports(&session).await.len(), 3);
        close_reported(&session, &job2.id).await;
        let (research, _) =
            store::read_required::<ResearchRecord>(&session, &paths::research("e0000001"))
                .await
                .unwrap();
        assert_eq!(research.researched().len(), 4);
        assert_eq!(research.runs.len(), 2);
        researcher.stop().await;
    }
}
