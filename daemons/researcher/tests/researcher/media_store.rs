//! The media store and renditions (issue 23) against a real HTTP server that counts the
//! episode bytes it serves: an episode is downloaded once for all its jobs, a newly
//! curated clip is researched against stored episodes without downloading them, a
//! server that starts serving other audio for the same URL is a new rendition the
//! operator sees while results stay on the pinned audio, and a damaged stored episode
//! is detected and fetched again.

use std::time::Duration;

use archivist_db::renditions;
use archivist_db::Database;
use archivist_engine::schema::records::{JobRecord, ReportRecord};
use archivist_engine::schema::JobState;
use archivist_engine::Session;
use archivist_media::{hash_file, Key};

use crate::http::{Route, Server};
use crate::support::*;

/// Plans a job of `clips` for `episode`, waits for it to be reported, records its
/// reports (the recorder stand-in) and closes it; returns the job and its reports.
async fn research(
    session: &Session,
    db: &Database,
    episode: &str,
    url: &str,
    clips: &[String],
) -> (JobRecord, Vec<ReportRecord>) {
    let job = plan(session, episode, url, clips).await;
    let done = wait_for(
        session,
        &job.id,
        &[JobState::Reported, JobState::Failed],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(done.status, JobState::Reported, "{done:#?}");
    let reports = record_reports(session, db).await;
    close_reported(session, &job.id).await;
    (done, reports)
}

/// The `media decoded` event's text: what the operator reads in `archivist jobs show`.
fn decoded_note(job: &JobRecord) -> String {
    job.events
        .iter()
        .find(|e| e.step == "media decoded")
        .map(|e| e.result.clone())
        .unwrap_or_else(|| panic!("no media decoded event: {job:#?}"))
}

/// The offsets reported for `clip`.
fn offsets(reports: &[ReportRecord], clip: &str) -> Vec<f64> {
    reports
        .iter()
        .find(|r| r.clip == clip)
        .unwrap_or_else(|| panic!("no report for {clip}: {reports:#?}"))
        .occurrences
        .iter()
        .map(|o| o.at)
        .collect()
}

fn assert_near(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 0.03, "{what}: {got:?} vs {want:?}");
    }
}

fn sha(bytes: &[u8]) -> String {
    let path = std::env::temp_dir().join(format!("media-sha-{:016x}", rand::random::<u64>()));
    std::fs::write(&path, bytes).unwrap();
    let (key, _) = hash_file(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    key.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episode_is_downloaded_once_and_a_new_clip_against_stored_episodes_downloads_nothing() {
    for (config, session, db) in stores("researcher-media-once").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 4).await;
        let len = audio.episode.len() as u64;
        // One host answers conditional GETs, one sends no validators at all.
        let tagged = server.route(
            "/e1.wav",
            Route::Tagged {
                body: audio.episode.clone(),
                etag: "\"v1\"".into(),
            },
        );
        let plain = server.route("/e2.wav", Route::audio(&audio.episode));
        let work = work_dir("media-once");
        let researcher = start(&config, &db, settings(&work), "researcher-media-once");

        // Two jobs of each episode (the planner's work items of 2 clips).
        for (episode, url) in [("e0000001", &tagged), ("e0000002", &plain)] {
            let (first, _) = research(&session, &db, episode, url, &clips[..2]).await;
            assert_eq!(first.progress.bytes, len);
            assert!(decoded_note(&first).contains("pinned as the episode's audio"));
            let (second, reports) = research(&session, &db, episode, url, &clips[2..3]).await;
            assert_eq!(second.progress.bytes, 0, "the second job downloaded");
            let note = decoded_note(&second);
            assert!(
                note.contains("from the media store (0 episode bytes downloaded)"),
                "{note}"
            );
            assert_near(
                &offsets(&reports, &clips[2]),
                &audio.clips[2].2,
                "clip 3 from the store",
            );
        }
        assert_eq!(
            server.bytes_served("/e1.wav"),
            len,
            "e1 downloaded more than once"
        );
        assert_eq!(
            server.bytes_served("/e2.wav"),
            len,
            "e2 downloaded more than once"
        );
        // e1's second job asked with If-None-Match and got a 304; e2 has no validators,
        // so nothing was asked.
        assert_eq!(server.hits("/e1.wav"), 2);
        assert_eq!(server.hits("/e2.wav"), 1);

        // A newly curated clip against both stored episodes: 0 episode bytes.
        for (episode, url) in [("e0000001", &tagged), ("e0000002", &plain)] {
            let (_, reports) = research(&session, &db, episode, url, &clips[3..4]).await;
            assert_eq!(
                offsets(&reports, &clips[3]),
                Vec::<f64>::new(),
                "clip 4 is in no episode"
            );
        }
        assert_eq!(server.bytes_served("/e1.wav"), len);
        assert_eq!(server.bytes_served("/e2.wav"), len);

        // Every run names the rendition it was measured on: the pin.
        let want = sha(&audio.episode);
        for episode in ["e0000001", "e0000002"] {
            let pin = renditions::pin(&db, episode)
                .await
                .unwrap()
                .expect("pinned");
            assert_eq!(pin.rendition.sha256, want);
            assert_eq!(pin.rendition.bytes, len);
            assert!((pin.rendition.duration_s.unwrap() - audio.episode_s).abs() < 0.01);
            let runs = renditions::of_runs(&db, episode).await.unwrap();
            assert_eq!(runs.len(), 3, "{runs:?}");
            assert!(runs.values().all(|s| *s == want), "{runs:?}");
        }
        let tagged_pin = renditions::pin(&db, "e0000001").await.unwrap().unwrap();
        assert_eq!(tagged_pin.rendition.etag.as_deref(), Some("\"v1\""));
        assert!(tagged_pin.rendition.final_url.ends_with("/e1.wav"));
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_audio_at_the_same_url_is_a_new_rendition_and_results_stay_on_the_pinned_audio() {
    for (config, session, db) in stores("researcher-media-change").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 3).await;
        let url = server.route(
            "/e1.wav",
            Route::Tagged {
                body: audio.episode.clone(),
                etag: "\"v1\"".into(),
            },
        );
        let work = work_dir("media-change");
        let researcher = start(&config, &db, settings(&work), "researcher-media-change");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;

        // The host now inserts a 3 s ad before the show: every offset would be 3 s late.
        let with_ad = std::sync::Arc::new(ffmpeg_to(
            &audio.episode,
            "wav",
            &["-af", "adelay=3000:all=1", "-ar", "8000", "-ac", "1"],
        ));
        server.route(
            "/e1.wav",
            Route::Tagged {
                body: with_ad.clone(),
                etag: "\"v2\"".into(),
            },
        );
        let (job, reports) = research(&session, &db, "e0000001", &url, &clips[2..3]).await;
        // Measured on the pinned audio: the jingle at 14.0 s, not 17.0 s.
        assert_near(
            &offsets(&reports, &clips[2]),
            &audio.clips[2].2,
            "clip 3 on the pin",
        );
        let note = decoded_note(&job);
        assert!(
            note.contains("the server now serves other audio") && note.contains("the pin is kept"),
            "{note}"
        );
        let pinned = sha(&audio.episode);
        let changed = sha(&with_ad);
        let pin = renditions::pin(&db, "e0000001").await.unwrap().unwrap();
        assert_eq!(pin.rendition.sha256, pinned);
        let all: Vec<String> = renditions::list(&db, "e0000001")
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.sha256)
            .collect();
        assert_eq!(all, vec![pinned.clone(), changed.clone()]);
        assert_eq!(renditions::counts(&db).await.unwrap().changed, 1);
        assert_eq!(
            renditions::of_runs(&db, "e0000001").await.unwrap()[&job.id],
            pinned
        );

        // The pinned audio is lost (its stored copy damaged): the job downloads what the
        // server serves now, the pin moves to it, and the run says so.
        damage(&work, &pinned);
        let (job, reports) = research(&session, &db, "e0000001", &url, &clips[1..2]).await;
        let note = decoded_note(&job);
        assert!(note.contains("pin moved"), "{note}");
        let late: Vec<f64> = audio.clips[1].2.iter().map(|t| t + 3.0).collect();
        assert_near(
            &offsets(&reports, &clips[1]),
            &late,
            "clip 2 on the new audio",
        );
        let pin = renditions::pin(&db, "e0000001").await.unwrap().unwrap();
        assert_eq!(
            (pin.rendition.sha256.as_str(), pin.moves),
            (changed.as_str(), 1)
        );
        assert_eq!(
            renditions::of_runs(&db, "e0000001").await.unwrap()[&job.id],
            changed
        );

        // Re-curated to a new URL serving the original audio: the pin is not used for
        // another URL's jobs; the download moves it back, and a second job of the new
        // URL is researched from the store. (The operator forgets the episode's research
        // to have every clip measured again, as docs/researcher.md's policy says.)
        archivist_db::testing::forget_research(&db, "e0000001")
            .await
            .unwrap();
        let moved_to = server.route("/e1-new.wav", Route::audio(&audio.episode));
        let (job, reports) = research(&session, &db, "e0000001", &moved_to, &clips[..1]).await;
        let note = decoded_note(&job);
        assert!(note.contains("pin moved"), "{note}");
        assert_near(
            &offsets(&reports, &clips[0]),
            &audio.clips[0].2,
            "clip 1 at the new URL",
        );
        let pin = renditions::pin(&db, "e0000001").await.unwrap().unwrap();
        assert_eq!(
            (pin.rendition.sha256.as_str(), pin.moves),
            (pinned.as_str(), 2)
        );
        assert_eq!(pin.rendition.url, moved_to);
        let (job, _) = research(&session, &db, "e0000001", &moved_to, &clips[2..3]).await;
        assert!(decoded_note(&job).contains("from the media store"));
        assert_eq!(
            server.bytes_served("/e1-new.wav"),
            audio.episode.len() as u64
        );
        researcher.stop().await;
    }
}

/// Flips one byte of a stored object, as a failing disk would.
fn damage(work: &std::path::Path, sha: &str) {
    let object = work.join("media").join(sha);
    let mut bytes = std::fs::read(&object).expect("the episode is in the store");
    bytes[1000] ^= 0x40;
    std::fs::write(&object, bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_stored_episode_is_detected_deleted_and_fetched_again() {
    for (config, session, db) in stores("researcher-media-damaged").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 3).await;
        let url = server.route("/e1.wav", Route::audio(&audio.episode));
        let work = work_dir("media-damaged");
        let researcher = start(&config, &db, settings(&work), "researcher-media-damaged");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        let key = sha(&audio.episode);
        damage(&work, &key);
        let (job, reports) = research(&session, &db, "e0000001", &url, &clips[1..3]).await;
        // Fetched again (the damaged bytes were never decoded), with true offsets.
        assert_eq!(
            server.bytes_served("/e1.wav"),
            2 * audio.episode.len() as u64
        );
        let note = decoded_note(&job);
        assert!(
            note.contains("downloaded") && note.contains("the pinned audio"),
            "{note}"
        );
        assert_near(&offsets(&reports, &clips[1]), &audio.clips[1].2, "clip 2");
        assert_near(&offsets(&reports, &clips[2]), &audio.clips[2].2, "clip 3");
        // The store holds the sound object again.
        let (stored, _) = hash_file(&work.join("media").join(&key)).unwrap();
        assert_eq!(stored, Key::parse(&key).unwrap());
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_that_fails_its_checks_is_neither_pinned_nor_stored() {
    for (config, session, db) in stores("researcher-media-incomplete").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 1).await;
        // A WAV whose samples stop at 60 % of the length its header declares.
        let cut = audio.episode.len() * 6 / 10;
        let short = std::sync::Arc::new(audio.episode[..cut].to_vec());
        let url = server.route("/e1.wav", Route::audio(&short));
        let work = work_dir("media-incomplete");
        let researcher = start(&config, &db, settings(&work), "researcher-media-incomplete");
        let job = plan(&session, "e0000001", &url, &clips).await;
        let failed = wait_for(
            &session,
            &job.id,
            &[JobState::Reported, JobState::Failed],
            Duration::from_secs(60),
        )
        .await;
        assert_eq!(failed.status, JobState::Failed, "{failed:#?}");
        assert!(
            failed
                .message
                .as_deref()
                .unwrap_or("")
                .contains("incomplete"),
            "{failed:#?}"
        );
        assert_eq!(renditions::pin(&db, "e0000001").await.unwrap(), None);
        assert!(renditions::list(&db, "e0000001").await.unwrap().is_empty());
        let stored: Vec<_> = std::fs::read_dir(work.join("media")).unwrap().collect();
        assert!(
            stored.is_empty(),
            "a failed download was stored: {stored:?}"
        );
        // Fixed at the source: retried, downloaded whole, pinned and stored.
        server.route("/e1.wav", Route::audio(&audio.episode));
        retry(&session, &job.id).await;
        reported_after_retry_one(&session, &job.id).await;
        let pin = renditions::pin(&db, "e0000001")
            .await
            .unwrap()
            .expect("pinned");
        assert_eq!(pin.rendition.sha256, sha(&audio.episode));
        assert!(work.join("media").join(&pin.rendition.sha256).is_file());
        researcher.stop().await;
    }
}

/// Waits for a retried job of one clip to be reported.
async fn reported_after_retry_one(session: &Session, job: &str) {
    let done = wait_for(
        session,
        job,
        &[JobState::Reported, JobState::Failed],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(done.status, JobState::Reported, "{done:#?}");
}
