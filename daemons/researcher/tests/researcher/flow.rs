//! The happy path: pending -> leased -> researching -> reported -> (stand-in) recorded,
//! with the right offsets, clips downloaded once for several episodes, and an admin
//! cancel obeyed within seconds.

use std::time::Duration;

use archivist_engine::member;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{JobRequest, LeaseRecord, ResearchRecord};
use archivist_engine::schema::JobState;
use archivist_engine::store;
use archivist_testkit::eventually;

use crate::http::{Route, Server};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_go_from_pending_to_recorded_with_the_right_offsets_and_clips_are_fetched_once() {
    for (config, session, db) in stores("researcher-flow").await {
        let server = Server::start().await;
        let audio = audio();
        let mut clip_ids = Vec::new();
        let mut catalog = Vec::new();
        for (id, wav, _) in &audio.clips {
            catalog.push((
                id.clone(),
                server.route(&format!("/clips/{id}.wav"), Route::audio(wav)),
            ));
            clip_ids.push(id.clone());
        }
        add_clips(&db, &catalog).await;
        let url1 = server.route("/e1.wav", Route::audio(&audio.episode));
        let url2 = server.route("/e2.wav", Route::audio(&audio.episode));
        let job1 = plan(&session, "e0000001", &url1, &clip_ids).await;
        let job2 = plan(&session, "e0000002", &url2, &clip_ids).await;

        let work = work_dir("flow");
        let researcher = start(&config, &db, settings(&work), "researcher-flow");

        assert!(
            eventually(Duration::from_secs(5), || async {
                member::list(&session, paths::RESEARCHERS)
                    .await
                    .unwrap()
                    .iter()
                    .any(|m| m.name == "researcher-flow" && m.slots == 2)
            })
            .await,
            "the researcher registers with slots = concurrency"
        );

        for job in [&job1, &job2] {
            let done = wait_for(
                &session,
                &job.id,
                &[JobState::Reported, JobState::Failed],
                Duration::from_secs(60),
            )
            .await;
            assert_eq!(done.status, JobState::Reported, "{done:#?}");
            assert_eq!(done.progress.clips_done, 4);
            assert!(
                (done.progress.fraction - 1.0).abs() < 1e-9,
                "{:?}",
                done.progress
            );
            assert_eq!(done.progress.bytes, audio.episode.len() as u64);
            assert_eq!(done.holder.as_deref(), Some("researcher-flow"));
            let steps: Vec<&str> = done.events.iter().map(|e| e.step.as_str()).collect();
            assert!(
                steps.contains(&"claim")
                    && steps.contains(&"media decoded")
                    && steps.contains(&"final report"),
                "{steps:?}"
            );
            assert!(
                !archivist_testkit::locked(&session, &job.id).await,
                "lock released"
            );
            let (lease, _) = store::read_required::<LeaseRecord>(&session, &paths::lease(&job.id))
                .await
                .unwrap();
            assert_eq!(lease.holder.as_deref(), Some("researcher-flow"));
            assert!(lease.extensions >= 1, "claim extends the lease");

            let mut reports = reports(&session, &job.id).await;
            reports.sort_by(|a, b| a.clip.cmp(&b.clip));
            assert_eq!(reports.len(), 4, "{reports:#?}");
            assert_eq!(
                reports.iter().filter(|r| r.is_final).count(),
                1,
                "exactly one final report"
            );
            assert!(
                reports.iter().find(|r| r.is_final).unwrap().clip == "c000004",
                "the last clip's report is final"
            );
            for (report, (id, _, expected)) in reports.iter().zip(&audio.clips) {
                assert_eq!(&report.clip, id);
                assert_eq!(report.episode, job.episode);
                assert_eq!(report.job, job.id);
                assert!(report.error.is_none(), "{report:#?}");
                assert!((report.episode_duration_s - audio.episode_s).abs() < 0.01);
                assert!(report.clip_duration_s > 0.5);
                let found: Vec<f64> = report.occurrences.iter().map(|o| o.at).collect();
                assert_eq!(
                    found.len(),
                    expected.len(),
                    "clip {id}: found {found:?}, expected {expected:?}"
                );
                for (f, e) in found.iter().zip(expected) {
                    assert!(
                        (f - e).abs() < 0.02,
                        "clip {id}: found {found:?}, expected {expected:?}"
                    );
                }
                for o in &report.occurrences {
                    assert!(o.conf > 0.5 && o.conf <= 1.0, "{o:?}");
                }
            }
        }
        for (id, _, _) in &audio.clips {
            assert_eq!(
                server.hits(&format!("/clips/{id}.wav")),
                1,
                "clip {id} downloaded once for two episodes"
            );
        }

        // The recorder stand-in stores the reports and closes the jobs.
        let stored = record_reports(&session, &db).await;
        assert_eq!(stored.len(), 8);
        for job in [&job1, &job2] {
            close_reported(&session, &job.id).await;
            assert_eq!(
                wait_for(
                    &session,
                    &job.id,
                    &[JobState::Recorded],
                    Duration::from_secs(1)
                )
                .await
                .status,
                JobState::Recorded
            );
            let research = research(&db, &job.episode).await;
            assert_eq!(research.researched().len(), 4);
            assert_eq!(research.found.len(), 3, "three of four clips occur");
        }
        assert!(
            std::fs::read_dir(work.join("episodes"))
                .unwrap()
                .next()
                .is_none(),
            "episode files are removed after decoding"
        );
        researcher.stop().await;
        assert!(
            eventually(Duration::from_secs(5), || async {
                member::list(&session, paths::RESEARCHERS)
                    .await
                    .unwrap()
                    .is_empty()
            })
            .await,
            "registration goes with the session on shutdown"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_cancel_is_obeyed_within_seconds() {
    for (config, session, db) in stores("researcher-cancel").await {
        let (_server, job, _url, _clip_ids, researcher, _work) =
            researching_slowly(&config, &session, &db, "cancel").await;
        // The admin writes `request: cancel` on the locked job (version-checked).
        let (mut current, version) = archivist_engine::jobs::read(&session, &job.id)
            .await
            .unwrap();
        assert_eq!(current.status, JobState::Researching);
        current.request = Some(JobRequest::Cancel);
        let path = paths::job(&job.id);
        let mut write = session
            .client()
            .set_data(
                &path,
                &store::encode(&path, &current).unwrap(),
                Some(version),
            )
            .await;
        if write.is_err() {
            // A heartbeat moved it; read again once.
            let (mut again, v) = archivist_engine::jobs::read(&session, &job.id)
                .await
                .unwrap();
            again.request = Some(JobRequest::Cancel);
            write = session
                .client()
                .set_data(&path, &store::encode(&path, &again).unwrap(), Some(v))
                .await;
        }
        write.expect("admin request written");
        let asked = std::time::Instant::now();
        let done = wait_for(
            &session,
            &job.id,
            &[JobState::Cancelled],
            Duration::from_secs(5),
        )
        .await;
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "noticed in {:?}",
            asked.elapsed()
        );
        assert_eq!(done.request, None);
        assert!(
            store::exists(&session, &paths::lease(&job.id))
                .await
                .unwrap()
                .is_none(),
            "lease deleted"
        );
        assert!(
            !archivist_testkit::locked(&session, &job.id).await,
            "lock released"
        );
        let left = reports(&session, &job.id).await;
        assert!(
            !left.is_empty() && left.len() < 4 && left.iter().all(|r| !r.is_final),
            "{left:#?}"
        );
        researcher.stop().await;
    }
}

/// Outside 17i G7: a researcher whose job lock was deleted by hand (the reaper then
/// expired the job, correctly) went on, wrote progress into the expired job and ended
/// with "transition expired -> researching is not in the state table". It now sees the
/// lock gone (or the job moved) within a heartbeat, stops the work and writes nothing
/// more to the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_researcher_whose_lock_is_deleted_stops_and_writes_nothing_more() {
    for (config, session, db) in stores("researcher-lock-deleted").await {
        let (_server, job, url, clip_ids, researcher, _work) =
            researching_slowly(&config, &session, &db, "lock-deleted").await;
        // An operator deletes the lock by hand; the reaper expires the unlocked job.
        session
            .client()
            .delete(&paths::job_lock(&job.id), None)
            .await
            .expect("delete the lock");
        expire(&session, &job.id).await;
        let (_, expired_at) = archivist_engine::jobs::read(&session, &job.id)
            .await
            .unwrap();
        let reported = reports(&session, &job.id).await.len();
        // Several heartbeats (300 ms) and slow clips (1.5 s) later: nothing written.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let (after, version) = archivist_engine::jobs::read(&session, &job.id)
            .await
            .unwrap();
        assert_eq!(after.status, JobState::Expired);
        assert_eq!(
            version, expired_at,
            "the job was written after it expired: {after:#?}"
        );
        assert_eq!(reports(&session, &job.id).await.len(), reported);
        assert!(!archivist_testkit::locked(&session, &job.id).await);
        // The researcher is free for other work: its slot was given back.
        let other = plan(&session, "e0000002", &url, &clip_ids[..1]).await;
        let done = wait_for(
            &session,
            &other.id,
            &[JobState::Reported],
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(done.status, JobState::Reported);
        researcher.stop().await;
    }
}

/// Issue 18: a clip whose stored error was made with an older version of it (the clip
/// was fixed and re-curated since) is researched again, not skipped as researched; a
/// clip settled with a current error stays skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_clip_error_is_researched_again_and_a_current_one_skipped() {
    use archivist_engine::schema::clipset::ClipSet;
    use archivist_engine::schema::records::{clip_stamp, ClipRecord, ResearchRun};

    for (config, session, db) in stores("researcher-stale-error").await {
        let server = Server::start().await;
        let clip_ids = serve_clips(&db, &server, 2).await;
        // Both clips errored in an earlier run: the first with a version of the clip that is
        // gone, the second with the clip as it is now.
        let now: ClipRecord = archivist_db::catalog::clip(&db, &clip_ids[1])
            .await
            .unwrap()
            .unwrap();
        let mut record = ResearchRecord::new("e0000001");
        record.runs.push(ResearchRun {
            job: "j0000000009".into(),
            researcher: "r-old".into(),
            at: time::OffsetDateTime::now_utc(),
            clips: [1u32, 2].into_iter().collect::<ClipSet>(),
        });
        for id in &clip_ids {
            record
                .errors
                .insert(id.clone(), "clip download failed: not audio".into());
        }
        record
            .error_stamps
            .insert(clip_ids[0].clone(), "1/old-broken-file".into());
        record
            .error_stamps
            .insert(clip_ids[1].clone(), clip_stamp(&now.fields));
        archivist_db::research::update(&db, "e0000001", |r| *r = record.clone())
            .await
            .unwrap();
        let url = server.route("/e1.wav", Route::audio(&audio().episode));
        let job = plan(&session, "e0000001", &url, &clip_ids).await;
        let work = work_dir("stale-error");
        let researcher = start(&config, &db, settings(&work), "researcher-stale-error");
        let done = wait_for(
            &session,
            &job.id,
            &[JobState::Reported, JobState::Failed],
            Duration::from_secs(60),
        )
        .await;
        researcher.stop().await;
        assert_eq!(done.status, JobState::Reported, "{done:#?}");
        let reports = reports(&session, &job.id).await;
        let clips: Vec<&str> = reports.iter().map(|r| r.clip.as_str()).collect();
        assert_eq!(
            clips,
            [clip_ids[0].as_str()],
            "only the stale error is redone"
        );
        assert_eq!(reports[0].error, None);
        assert_eq!(reports[0].occurrences.len(), audio().clips[0].2.len());
        assert_eq!(
            reports[0].clip_stamp.as_deref(),
            Some(clip_stamp(
                &archivist_db::catalog::clip(&db, &clip_ids[0])
                    .await
                    .unwrap()
                    .unwrap()
                    .fields
            ))
            .as_deref()
        );
    }
}

/// A researcher working on one job whose first clip comes at once and the others slowly
/// (1.5 s each), returned once the first clip is reported: the job is researching, its
/// lock held, for a few seconds more. Returns the server (keep it), the job, the episode's
/// URL, the clip ids, the researcher and its work directory.
pub(crate) async fn researching_slowly(
    config: &archivist_engine::ZkConfig,
    session: &archivist_engine::Session,
    db: &archivist_db::Database,
    name: &str,
) -> (
    Server,
    archivist_engine::schema::records::JobRecord,
    String,
    Vec<String>,
    Running,
    std::path::PathBuf,
) {
    let server = Server::start().await;
    let audio = audio();
    let mut catalog = Vec::new();
    let mut clip_ids = Vec::new();
    for (i, (id, wav, _)) in audio.clips.iter().enumerate() {
        let route = if i == 0 {
            Route::audio(wav)
        } else {
            Route::slow_audio(wav, Duration::from_millis(1500))
        };
        catalog.push((id.clone(), server.route(&format!("/clips/{id}.wav"), route)));
        clip_ids.push(id.clone());
    }
    add_clips(db, &catalog).await;
    let url = server.route("/e.wav", Route::audio(&audio.episode));
    let job = plan(session, "e0000001", &url, &clip_ids).await;
    let work = work_dir(name);
    let researcher = start(config, db, settings(&work), &format!("researcher-{name}"));
    assert!(
        eventually(Duration::from_secs(30), || async {
            !reports(session, &job.id).await.is_empty()
        })
        .await,
        "first clip reported"
    );
    (server, job, url, clip_ids, researcher, work)
}
