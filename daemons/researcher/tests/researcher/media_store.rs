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
    let done = settled(session, &job.id).await;
    assert_eq!(done.status, JobState::Reported, "{done:#?}");
    let reports = record_reports(session, db).await;
    close_reported(session, &job.id).await;
    (done, reports)
}

/// Serves `body` at `/e1.wav` with the entity tag `etag` (a `304` to a request naming
/// it); returns the URL.
fn tagged(server: &Server, body: std::sync::Arc<Vec<u8>>, etag: &str) -> String {
    server.route(
        "/e1.wav",
        Route::Tagged {
            body,
            etag: etag.into(),
        },
    )
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

/// `job` downloaded no episode byte, says it read the media store, and found `clip` at
/// `want`.
fn assert_researched_from_the_store(
    job: &JobRecord,
    reports: &[ReportRecord],
    clip: &str,
    want: &[f64],
    what: &str,
) {
    assert_eq!(job.progress.bytes, 0, "{what}: the job downloaded");
    let note = decoded_note(job);
    assert!(
        note.contains("from the media store (0 episode bytes downloaded)"),
        "{what}: {note}"
    );
    assert_near(&offsets(reports, clip), want, what);
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
        let tagged = tagged(&server, audio.episode.clone(), "\"v1\"");
        let plain = server.route("/e2.wav", Route::audio(&audio.episode));
        let work = work_dir("media-once");
        let researcher = start(&config, &db, settings(&work), "researcher-media-once");

        // Two jobs of each episode (the planner's work items of 2 clips).
        for (episode, url) in [("e0000001", &tagged), ("e0000002", &plain)] {
            let (first, _) = research(&session, &db, episode, url, &clips[..2]).await;
            assert_eq!(first.progress.bytes, len);
            assert!(decoded_note(&first).contains("pinned as the episode's audio"));
            let (second, reports) = research(&session, &db, episode, url, &clips[2..3]).await;
            assert_researched_from_the_store(
                &second,
                &reports,
                &clips[2],
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

/// Outside try 23d F1: a researcher running two jobs of a new episode at once
/// downloaded it once per job. One job fetches and pins it; the other waits, then reads
/// it from the store: one download, one rendition, both jobs measured on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_jobs_of_a_new_episode_in_one_researcher_download_it_once() {
    for (config, session, db) in stores("researcher-media-together").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 2).await;
        let len = audio.episode.len() as u64;
        // Slow enough that both jobs are claimed while the first download runs.
        let url = server.route(
            "/e1.wav",
            Route::slow_audio(&audio.episode, Duration::from_millis(1500)),
        );
        let work = work_dir("media-together");
        let researcher = start(&config, &db, settings(&work), "researcher-media-together");
        let first = plan(&session, "e0000001", &url, &clips[..1]).await;
        let second = plan(&session, "e0000001", &url, &clips[1..]).await;
        for job in [&first, &second] {
            let done = settled(&session, &job.id).await;
            assert_eq!(done.status, JobState::Reported, "{done:#?}");
        }
        record_reports(&session, &db).await;
        assert_eq!(
            server.bytes_served("/e1.wav"),
            len,
            "downloaded more than once"
        );
        let runs = renditions::of_runs(&db, "e0000001").await.unwrap();
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert!(runs.values().all(|s| *s == sha(&audio.episode)), "{runs:?}");
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_audio_at_the_same_url_is_a_new_rendition_and_results_stay_on_the_pinned_audio() {
    for (config, session, db) in stores("researcher-media-change").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 3).await;
        let url = tagged(&server, audio.episode.clone(), "\"v1\"");
        let work = work_dir("media-change");
        let researcher = start(&config, &db, settings(&work), "researcher-media-change");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;

        // The host now inserts a 3 s ad before the show: every offset would be 3 s late.
        let with_ad = std::sync::Arc::new(ffmpeg_to(
            &audio.episode,
            "wav",
            &["-af", "adelay=3000:all=1", "-ar", "8000", "-ac", "1"],
        ));
        tagged(&server, with_ad.clone(), "\"v2\"");
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
        let failed = settled(&session, &job.id).await;
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
    let done = settled(session, job).await;
    assert_eq!(done.status, JobState::Reported, "{done:#?}");
}

/// The same WAV with its samples rotated by `secs` (8 kHz, 16-bit mono, 44-byte
/// header): other audio of exactly the same size, every clip `secs` later.
fn rotated(wav: &[u8], secs: f64) -> Vec<u8> {
    let (head, data) = wav.split_at(44);
    let by = (secs * 8000.0) as usize * 2;
    let mut out = head.to_vec();
    out.extend_from_slice(&data[data.len() - by..]);
    out.extend_from_slice(&data[..data.len() - by]);
    assert_eq!(out.len(), wav.len());
    out
}

/// Writes `bytes` into the file at `path` in place (the same inode), as `dd
/// conv=notrunc`, `cp` onto an existing file or `rsync --inplace` do.
fn overwrite_in_place(path: &std::path::Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_changed_in_place_while_a_job_holds_its_audio_does_not_change_what_it_researches()
{
    for (config, session, db) in stores("researcher-media-inplace").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 3).await;
        let url = tagged(&server, audio.episode.clone(), "\"v1\"");
        let work = work_dir("media-inplace");
        // Each job holds its audio 2 s between the store read and the decode.
        let media = archivist_researcher::MediaSettings {
            hold_after_read: Duration::from_secs(2),
            ..Default::default()
        };
        let researcher = start(
            &config,
            &db,
            settings(&work).with_media(media),
            "researcher-media-inplace",
        );
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        let key = sha(&audio.episode);
        let object = work.join("media").join(&key);
        let other = rotated(&audio.episode, 3.0);

        let job = plan(&session, "e0000001", &url, &clips[2..3]).await;
        let held = work.join("episodes").join(format!("{}.media", job.id));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        // Held: the job's file is whole (an overwrite during the copy would be a hash
        // mismatch, a case of its own).
        let len = audio.episode.len() as u64;
        while std::fs::metadata(&held).map(|m| m.len()).unwrap_or(0) < len {
            assert!(
                std::time::Instant::now() < deadline,
                "the job never read the store"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // While the job holds its audio, other audio is written into the object in place.
        overwrite_in_place(&object, &other);
        let done = settled(&session, &job.id).await;
        assert_eq!(done.status, JobState::Reported, "{done:#?}");
        let reports = record_reports(&session, &db).await;
        close_reported(&session, &job.id).await;
        // Measured on the pinned bytes (14.0 s), not on what the object became (17.0 s).
        assert_near(
            &offsets(&reports, &clips[2]),
            &audio.clips[2].2,
            "clip 3 on the pinned audio",
        );
        assert_eq!(
            renditions::of_runs(&db, "e0000001").await.unwrap()[&job.id],
            key
        );
        // The next job finds the changed object: deleted, fetched again, true offsets.
        let (job, reports) = research(&session, &db, "e0000001", &url, &clips[1..2]).await;
        let note = decoded_note(&job);
        assert!(
            note.contains("downloaded") && note.contains("the pinned audio"),
            "{note}"
        );
        assert_near(&offsets(&reports, &clips[1]), &audio.clips[1].2, "clip 2");
        assert_eq!(hash_file(&object).unwrap().0, Key::parse(&key).unwrap());
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_entry_that_is_not_a_file_is_replaced_by_the_next_download() {
    for (config, session, db) in stores("researcher-media-notfile").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 3).await;
        let url = server.route("/e1.wav", Route::audio(&audio.episode));
        let work = work_dir("media-notfile");
        let researcher = start(&config, &db, settings(&work), "researcher-media-notfile");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        let key = sha(&audio.episode);
        let object = work.join("media").join(&key);
        // A careless restore left a directory where the object was.
        std::fs::remove_file(&object).unwrap();
        std::fs::create_dir_all(object.join("inner")).unwrap();
        let len = audio.episode.len() as u64;
        let (job, _) = research(&session, &db, "e0000001", &url, &clips[1..2]).await;
        assert!(decoded_note(&job).contains("downloaded"));
        assert_eq!(server.bytes_served("/e1.wav"), 2 * len);
        assert!(
            object.is_file(),
            "the directory was not replaced by the object"
        );
        // Healed: the next job reads the store.
        let (job, _) = research(&session, &db, "e0000001", &url, &clips[2..3]).await;
        let note = decoded_note(&job);
        assert!(note.contains("from the media store"), "{note}");
        assert_eq!(server.bytes_served("/e1.wav"), 2 * len);
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_written_is_said_in_the_jobs_event() {
    for (config, session, db) in stores("researcher-media-unwritable").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 2).await;
        let e1 = server.route("/e1.wav", Route::audio(&audio.episode));
        let e2 = server.route("/e2.wav", Route::audio(&audio.episode));
        let work = work_dir("media-unwritable");
        let researcher = start(&config, &db, settings(&work), "researcher-media-unwritable");
        let (job, _) = research(&session, &db, "e0000001", &e1, &clips[..1]).await;
        assert!(!decoded_note(&job).contains("not kept"), "{job:#?}");
        // The store's directory is gone and a file holds its name: nothing can be written.
        let dir = work.join("media");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, b"not a directory").unwrap();
        let (job, reports) = research(&session, &db, "e0000002", &e2, &clips[1..2]).await;
        let note = decoded_note(&job);
        assert!(note.contains("not kept in the media store: "), "{note}");
        // The research itself is unaffected.
        assert_near(&offsets(&reports, &clips[1]), &audio.clips[1].2, "clip 2");
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reupload_later_jobs_ask_with_both_etags_and_download_nothing() {
    for (config, session, db) in stores("researcher-media-reupload").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 4).await;
        let url = tagged(&server, audio.episode.clone(), "\"v1\"");
        let work = work_dir("media-reupload");
        let researcher = start(&config, &db, settings(&work), "researcher-media-reupload");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        // Re-uploaded: other audio under a new, stable ETag.
        let other = std::sync::Arc::new(rotated(&audio.episode, 3.0));
        tagged(&server, other.clone(), "\"v2\"");
        let (job, _) = research(&session, &db, "e0000001", &url, &clips[1..2]).await;
        let note = decoded_note(&job);
        assert!(note.contains("the server now serves other audio"), "{note}");
        // The re-validation got a whole body, and the event says so.
        assert!(
            note.contains(&format!(
                "({} episode bytes downloaded by the re-validation)",
                other.len()
            )),
            "{note}"
        );
        let served = server.bytes_served("/e1.wav");
        // Later jobs: one 304, no body, nothing recorded or counted again.
        for clip in &clips[2..4] {
            let (job, reports) =
                research(&session, &db, "e0000001", &url, std::slice::from_ref(clip)).await;
            let note = decoded_note(&job);
            assert!(
                note.contains("0 episode bytes downloaded")
                    && note.contains("still serves the other audio recorded before"),
                "{note}"
            );
            let i = clips.iter().position(|c| c == clip).unwrap();
            assert_near(&offsets(&reports, clip), &audio.clips[i].2, "on the pin");
        }
        assert_eq!(
            server.bytes_served("/e1.wav"),
            served,
            "a later job downloaded the new body"
        );
        let asked = server.if_none_match("/e1.wav");
        assert_eq!(
            asked.last().unwrap().as_deref(),
            Some("\"v1\", \"v2\""),
            "{asked:?}"
        );
        assert_eq!(renditions::list(&db, "e0000001").await.unwrap().len(), 2);
        assert_eq!(renditions::counts(&db).await.unwrap().changed, 1);
        researcher.stop().await;
    }
}

/// `n` catalog clips `c000101`... that are all the first test clip (the same sound under
/// several ids), for tests that need more jobs of one episode than there are clips.
async fn copies_of_one_clip(db: &Database, server: &Server, n: usize) -> Vec<String> {
    let audio = audio();
    let (_, wav, _) = &audio.clips[0];
    let url = server.route("/clips/copy.wav", Route::audio(wav));
    let catalog: Vec<(String, String)> = (0..n)
        .map(|i| (format!("c{:06}", 101 + i), url.clone()))
        .collect();
    add_clips(db, &catalog).await;
    catalog.into_iter().map(|(id, _)| id).collect()
}

/// Outside 23b M1: the host's validators changed once while its bytes did not (a CDN
/// move, a re-deploy): the `200` with the pin's bytes was not remembered, so every later
/// job downloaded the whole episode again. The new validators now replace the pin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validators_that_change_while_the_bytes_do_not_cost_one_download() {
    for (config, session, db) in stores("researcher-media-new-etag").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = copies_of_one_clip(&db, &server, 4).await;
        let url = tagged(&server, audio.episode.clone(), "\"v1\"");
        let work = work_dir("media-new-etag");
        let researcher = start(&config, &db, settings(&work), "researcher-media-new-etag");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        tagged(&server, audio.episode.clone(), "\"v1-moved\"");
        let (job, _) = research(&session, &db, "e0000001", &url, &clips[1..2]).await;
        let note = decoded_note(&job);
        assert!(
            note.contains(&format!(
                "({} episode bytes downloaded by the re-validation)",
                audio.episode.len()
            )),
            "{note}"
        );
        let served = server.bytes_served("/e1.wav");
        for clip in &clips[2..4] {
            let (job, _) =
                research(&session, &db, "e0000001", &url, std::slice::from_ref(clip)).await;
            let note = decoded_note(&job);
            assert!(note.contains("(0 episode bytes downloaded)"), "{note}");
        }
        assert_eq!(server.bytes_served("/e1.wav"), served, "downloaded again");
        let asked = server.if_none_match("/e1.wav");
        assert_eq!(
            asked.last().unwrap().as_deref(),
            Some("\"v1-moved\""),
            "{asked:?}"
        );
        let c = renditions::counts(&db).await.unwrap();
        assert_eq!((c.renditions, c.changed, c.serving_other), (1, 0, 0));
        researcher.stop().await;
    }
}

/// Outside 23b L1: a re-validation answered `410 Gone` (the host removed the episode)
/// read in the job's event exactly as a `304`. The pinned audio is still researched from
/// the store, and the event now says the host could not confirm it, and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_revalidation_is_said_in_the_jobs_event() {
    for (config, session, db) in stores("researcher-media-gone").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 2).await;
        let url = tagged(&server, audio.episode.clone(), "\"v1\"");
        let work = work_dir("media-gone");
        let researcher = start(&config, &db, settings(&work), "researcher-media-gone");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        server.route("/e1.wav", Route::Status(410));
        let (job, reports) = research(&session, &db, "e0000001", &url, &clips[1..2]).await;
        let note = decoded_note(&job);
        assert!(
            note.contains("the re-validation failed") && note.contains("410"),
            "{note}"
        );
        assert_near(
            &offsets(&reports, &clips[1]),
            &audio.clips[1].2,
            "on the pin",
        );
        researcher.stop().await;
    }
}

/// Outside 23b L2: the job's own copy of a stored episode could not be written in the
/// work directory (full, or something in the way): the job blamed "media store
/// unusable" and downloaded the whole episode, which could not be written either. The
/// job now fails at once naming the work directory, and nothing is downloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_directory_that_cannot_take_the_copy_fails_the_job_without_downloading() {
    for (config, session, db) in stores("researcher-media-workdir").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 2).await;
        let url = server.route("/e1.wav", Route::audio(&audio.episode));
        let work = work_dir("media-workdir");
        let researcher = start(&config, &db, settings(&work), "researcher-media-workdir");
        let (first, _) = research(&session, &db, "e0000001", &url, &clips[..1]).await;
        // The next job's copy cannot be made: a directory stands where its file goes.
        let next = archivist_engine::schema::paths::job_id(
            first.id.trim_start_matches('j').parse::<u64>().unwrap() + 1,
        );
        let blocker = work.join("episodes").join(format!("{next}.media"));
        std::fs::create_dir_all(blocker.join("in-the-way")).unwrap();
        let served = server.bytes_served("/e1.wav");
        let job = plan(&session, "e0000001", &url, &clips[1..2]).await;
        assert_eq!(job.id, next);
        let done = settled(&session, &job.id).await;
        researcher.stop().await;
        assert_eq!(done.status, JobState::Failed, "{done:#?}");
        let message = done.message.clone().unwrap_or_default();
        assert!(
            message.contains("work directory") && message.contains(&format!("{next}.media")),
            "{message}"
        );
        assert_eq!(server.bytes_served("/e1.wav"), served, "downloaded anyway");
    }
}

/// Outside 23c N1: after a re-upload at a host that sends `Last-Modified` but no
/// `ETag`, the question asked only about the pin's date, and every later job downloaded
/// the whole new body again. It asks about the date of the rendition seen last now: one
/// download for the change, then `304`s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reupload_at_a_host_without_etags_later_jobs_download_nothing() {
    for (config, session, db) in stores("researcher-media-dated").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = copies_of_one_clip(&db, &server, 4).await;
        let first = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let url = server.route(
            "/e1.wav",
            Route::Dated {
                body: audio.episode.clone(),
                last_modified: first,
            },
        );
        let work = work_dir("media-dated");
        let researcher = start(&config, &db, settings(&work), "researcher-media-dated");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        // Re-uploaded: other audio, a later date, still no ETag.
        let other = std::sync::Arc::new(rotated(&audio.episode, 3.0));
        server.route(
            "/e1.wav",
            Route::Dated {
                body: other.clone(),
                last_modified: first + Duration::from_secs(86_400),
            },
        );
        let (job, _) = research(&session, &db, "e0000001", &url, &clips[1..2]).await;
        assert!(decoded_note(&job).contains("the server now serves other audio"));
        let served = server.bytes_served("/e1.wav");
        for clip in &clips[2..4] {
            let (job, _) =
                research(&session, &db, "e0000001", &url, std::slice::from_ref(clip)).await;
            let note = decoded_note(&job);
            assert!(
                note.contains("(0 episode bytes downloaded)")
                    && note.contains("still serves the other audio recorded before"),
                "{note}"
            );
        }
        assert_eq!(server.bytes_served("/e1.wav"), served, "downloaded again");
        researcher.stop().await;
    }
}

/// Outside 23c N3: a job planned before its episode was re-curated to another URL (a
/// wrong file fixed) still fetched the old URL. It fetches the catalog's URL now, and
/// its event says the URL changed since it was planned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_planned_before_the_episode_moved_fetches_the_catalogs_url() {
    use archivist_engine::schema::records::EpisodeRecord;
    use archivist_engine::schema::SCHEMA_VERSION;
    for (config, session, db) in stores("researcher-media-moved").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 1).await;
        let wrong = server.route(
            "/wrong.wav",
            Route::audio(&std::sync::Arc::new(rotated(&audio.episode, 3.0))),
        );
        let right = server.route("/right.wav", Route::audio(&audio.episode));
        let record = |url: &str| {
            archivist_db::catalog::CatalogRecord::Episode(EpisodeRecord {
                schema: SCHEMA_VERSION,
                id: "e0000001".into(),
                air_date: None,
                fields: archivist_testkit::catalog::fields(
                    "Episode one",
                    url,
                    time::OffsetDateTime::now_utc(),
                ),
            })
        };
        archivist_db::catalog::put(&db, &[record(&wrong)])
            .await
            .expect("the episode at the wrong URL");
        let job = plan(&session, "e0000001", &wrong, &clips).await;
        // Fixed in the catalog before any researcher took the job.
        archivist_db::catalog::put(&db, &[record(&right)])
            .await
            .expect("the episode moved");
        let work = work_dir("media-moved");
        let researcher = start(&config, &db, settings(&work), "researcher-media-moved");
        let done = settled(&session, &job.id).await;
        researcher.stop().await;
        assert_eq!(done.status, JobState::Reported, "{done:#?}");
        let note = decoded_note(&done);
        assert!(
            note.contains("media URL changed since the job was planned"),
            "{note}"
        );
        assert_eq!(
            server.bytes_served("/wrong.wav"),
            0,
            "the old URL was fetched"
        );
        let reports = record_reports(&session, &db).await;
        assert_near(
            &offsets(&reports, &clips[0]),
            &audio.clips[0].2,
            "at the right URL",
        );
    }
}

/// Outside 23b M2 and M3: a host serving A, then B, then C, then B again asked the
/// question naming C for ever, so every job downloaded B again and counted a change;
/// and once it went back to A, `status` still said it "now serves other audio". The
/// question names the rendition seen last, and `status` counts by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_going_back_to_an_earlier_rendition_is_asked_about_it_and_counted_by_it() {
    for (config, session, db) in stores("researcher-media-back").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = copies_of_one_clip(&db, &server, 6).await;
        let a = audio.episode.clone();
        let b = std::sync::Arc::new(rotated(&audio.episode, 3.0));
        let c = std::sync::Arc::new(rotated(&audio.episode, 5.0));
        let url = tagged(&server, a.clone(), "\"a\"");
        let work = work_dir("media-back");
        let researcher = start(&config, &db, settings(&work), "researcher-media-back");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        let serving_other = || async { renditions::counts(&db).await.unwrap().serving_other };
        for (body, tag, clip) in [(&b, "\"b\"", 1), (&c, "\"c\"", 2), (&b, "\"b\"", 3)] {
            tagged(&server, body.clone(), tag);
            let (job, _) = research(&session, &db, "e0000001", &url, &clips[clip..=clip]).await;
            let note = decoded_note(&job);
            assert!(note.contains("the server now serves other audio"), "{note}");
            assert_eq!(
                note.contains("a rendition recorded before"),
                clip == 3,
                "{note}"
            );
            assert_eq!(serving_other().await, 1);
        }
        // B again: asked with B's tag, a 304, no body.
        let served = server.bytes_served("/e1.wav");
        let (job, _) = research(&session, &db, "e0000001", &url, &clips[4..5]).await;
        let note = decoded_note(&job);
        assert!(
            note.contains("(0 episode bytes downloaded)")
                && note.contains("still serves the other audio recorded before"),
            "{note}"
        );
        assert_eq!(server.bytes_served("/e1.wav"), served, "B downloaded again");
        assert_eq!(
            server.if_none_match("/e1.wav").last().unwrap().as_deref(),
            Some("\"a\", \"b\"")
        );
        // Back to the pin: a 304 naming it; changed once, serving the pin now.
        tagged(&server, a.clone(), "\"a\"");
        let (job, _) = research(&session, &db, "e0000001", &url, &clips[5..6]).await;
        assert!(decoded_note(&job).contains("(0 episode bytes downloaded)"));
        let counts = renditions::counts(&db).await.unwrap();
        assert_eq!(
            (counts.renditions, counts.changed, counts.serving_other),
            (3, 1, 0)
        );
        researcher.stop().await;
    }
}

/// Outside 23b H1, through the researcher and the admin library: a job with a result
/// reported on the pinned audio is held; meanwhile the pin's bytes leave the store and
/// the host serves other audio; released, the job finds the other audio. Its run names
/// the first rendition and has a result measured on it, so the job is failed with the
/// reason instead of researching its remaining clips on other audio under that run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_resumed_on_other_audio_after_a_result_on_its_pin_fails_and_its_run_stays() {
    for (config, session, db) in stores("researcher-run-stays").await {
        let (server, job, _url, _clips, researcher, work) =
            crate::flow::researching_slowly(&config, &session, &db, "run-stays").await;
        let admin = archivist_admin::AdminSettings::default();
        archivist_admin::actions::hold(&session, &admin, &job.id, Some("test"))
            .await
            .expect("hold");
        let held = wait_for(
            &session,
            &job.id,
            &[JobState::Held],
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(held.status, JobState::Held, "{held:#?}");
        let pin = renditions::pin(&db, "e0000001")
            .await
            .unwrap()
            .expect("pinned");
        std::fs::remove_file(work.join("media").join(&pin.rendition.sha256))
            .expect("the pin's bytes leave the store");
        let other = std::sync::Arc::new(rotated(&audio().episode, 3.0));
        server.route("/e.wav", Route::audio(&other));
        archivist_admin::actions::release(&session, &admin, &job.id)
            .await
            .expect("release");
        let done = settled(&session, &job.id).await;
        researcher.stop().await;
        assert_eq!(done.status, JobState::Failed, "{done:#?}");
        let message = done.message.clone().unwrap_or_default();
        assert!(
            message.contains("earlier results were measured on rendition"),
            "{message}"
        );
        let runs = renditions::of_runs(&db, "e0000001").await.unwrap();
        assert_eq!(runs.get(&job.id), Some(&pin.rendition.sha256), "{runs:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revalidation_body_that_does_not_decode_whole_is_not_a_rendition() {
    for (config, session, db) in stores("researcher-media-broken-200").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 2).await;
        let url = tagged(&server, audio.episode.clone(), "\"v1\"");
        let work = work_dir("media-broken-200");
        let researcher = start(&config, &db, settings(&work), "researcher-media-broken-200");
        research(&session, &db, "e0000001", &url, &clips[..1]).await;
        // The server's file cut at 60 %: a whole 200 with a new ETag and a true
        // Content-Length, but the WAV's samples stop before its header says.
        let cut = audio.episode.len() * 6 / 10;
        tagged(
            &server,
            std::sync::Arc::new(audio.episode[..cut].to_vec()),
            "\"v2\"",
        );
        let (job, reports) = research(&session, &db, "e0000001", &url, &clips[1..2]).await;
        let note = decoded_note(&job);
        assert!(
            note.contains("broken response") && !note.contains("now serves other audio"),
            "{note}"
        );
        assert_near(
            &offsets(&reports, &clips[1]),
            &audio.clips[1].2,
            "on the pin",
        );
        assert_eq!(
            renditions::list(&db, "e0000001").await.unwrap().len(),
            1,
            "a broken body was recorded as a rendition"
        );
        assert_eq!(renditions::counts(&db).await.unwrap().changed, 0);
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_to_a_request_without_validators_says_so() {
    for (config, session, db) in stores("researcher-media-304-unasked").await {
        let server = Server::start().await;
        let clips = serve_clips(&db, &server, 1).await;
        let url = server.route("/e1.mp3", Route::Status(304));
        let work = work_dir("media-304-unasked");
        let researcher = start(
            &config,
            &db,
            settings(&work),
            "researcher-media-304-unasked",
        );
        let job = plan(&session, "e0000001", &url, &clips).await;
        let failed = settled(&session, &job.id).await;
        assert_eq!(failed.status, JobState::Failed, "{failed:#?}");
        let message = failed.message.unwrap_or_default();
        assert!(
            message.contains("304 Not Modified to a request without validators")
                && !message.contains("redirect"),
            "{message}"
        );
        researcher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_pin_that_no_longer_decodes_fails_naming_the_store() {
    for (config, session, db) in stores("researcher-media-undecodable").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 1).await;
        let url = server.route("/e1.wav", Route::audio(&audio.episode));
        let work = work_dir("media-undecodable");
        // A pin whose bytes this decoder refuses (as after an upgrade that checks more
        // than the one that pinned them): a WAV whose samples stop at 60 %.
        let cut = &audio.episode[..audio.episode.len() * 6 / 10];
        let key = sha(cut);
        std::fs::create_dir_all(work.join("media")).unwrap();
        std::fs::write(work.join("media").join(&key), cut).unwrap();
        renditions::record(
            &db,
            &renditions::Rendition {
                episode: "e0000001".into(),
                sha256: key.clone(),
                bytes: cut.len() as u64,
                duration_s: Some(12.0),
                fetched_at: time::OffsetDateTime::now_utc(),
                url: url.clone(),
                final_url: url.clone(),
                etag: None,
                last_modified: None,
            },
        )
        .await
        .unwrap();
        let researcher = start(
            &config,
            &db,
            settings(&work),
            "researcher-media-undecodable",
        );
        let job = plan(&session, "e0000001", &url, &clips).await;
        let failed = settled(&session, &job.id).await;
        assert_eq!(failed.status, JobState::Failed, "{failed:#?}");
        let message = failed.message.unwrap_or_default();
        assert!(
            message.contains("incomplete")
                && message.contains(&format!(
                    "the audio was read from the media store: rendition {key}"
                )),
            "{message}"
        );
        assert_eq!(server.hits("/e1.wav"), 0, "the episode was downloaded");
        researcher.stop().await;
    }
}

/// The test S3 server (`scripts/s3.sh`: `ARCHIVIST_TEST_S3` and its keys) and a
/// credentials file for it; `None` (the test skipped) when it is not set, never under CI.
fn test_s3() -> Option<(String, std::path::PathBuf)> {
    let Some(endpoint) = std::env::var("ARCHIVIST_TEST_S3")
        .ok()
        .filter(|e| !e.is_empty())
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "ARCHIVIST_TEST_S3 is not set under CI"
        );
        eprintln!("ARCHIVIST_TEST_S3 is not set (eval \"$(scripts/s3.sh env)\"): skipped");
        return None;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let creds = work_dir("media-s3-creds").join("s3.env");
    std::fs::write(
        &creds,
        format!(
            "AWS_ACCESS_KEY_ID={}\nAWS_SECRET_ACCESS_KEY={}\n",
            var("ARCHIVIST_TEST_S3_ACCESS_KEY"),
            var("ARCHIVIST_TEST_S3_SECRET_KEY")
        ),
    )
    .expect("write the S3 credentials file");
    Some((endpoint, creds))
}

/// `researcher.media.backend: s3` (issue 23): two researchers on different machines
/// (work directories of their own, no local store) share an S3-compatible bucket
/// (SeaweedFS, `scripts/s3.sh`; credentials from a file): the episode one of them
/// downloaded is researched by the other without downloading it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn researchers_sharing_an_s3_bucket_download_an_episode_once() {
    use archivist_researcher::settings::{MediaBackend, MediaSettings, S3Settings};
    let Some((endpoint, creds)) = test_s3() else {
        return;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let (config, session, db) = stores("researcher-media-s3")
        .await
        .into_iter()
        .next()
        .expect("a database");
    let server = Server::start().await;
    let audio = audio();
    let clips = serve_clips(&db, &server, 3).await;
    let len = audio.episode.len() as u64;
    let url = server.route("/e1.wav", Route::audio(&audio.episode));
    let media_creds = creds.clone();
    let media = MediaSettings {
        backend: MediaBackend::S3,
        s3: S3Settings {
            endpoint: Some(endpoint),
            bucket: var("ARCHIVIST_TEST_S3_BUCKET"),
            prefix: format!("researcher-test/{:016x}", rand::random::<u64>()),
            credentials_file: Some(creds.clone()),
            ..S3Settings::default()
        },
        ..MediaSettings::default()
    };
    let one = start(
        &config,
        &db,
        settings(&work_dir("media-s3-one")).with_media(media.clone()),
        "researcher-s3-one",
    );
    let (first, _) = research(&session, &db, "e0000001", &url, &clips[..2]).await;
    assert_eq!(first.progress.bytes, len);
    one.stop().await;
    let two = start(
        &config,
        &db,
        settings(&work_dir("media-s3-two")).with_media(media),
        "researcher-s3-two",
    );
    let (second, reports) = research(&session, &db, "e0000001", &url, &clips[2..3]).await;
    assert_researched_from_the_store(
        &second,
        &reports,
        &clips[2],
        &audio.clips[2].2,
        "clip 3 from the bucket",
    );
    assert_eq!(
        server.bytes_served("/e1.wav"),
        len,
        "downloaded more than once"
    );
    two.stop().await;
    // The test secret does not stay behind in the temporary directory.
    let _ = std::fs::remove_file(&media_creds);
}

/// Outside try 23d F2: an S3 store that cannot work (a bucket that does not exist, an
/// endpoint where no S3 server listens) passed `config check` and `/readyz` said ready;
/// every job then downloaded its episode again. The researcher refuses to start,
/// naming the endpoint and bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_researcher_refuses_an_s3_store_it_cannot_list() {
    use archivist_researcher::settings::{MediaBackend, MediaSettings, S3Settings};
    let Some((endpoint, creds)) = test_s3() else {
        return;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let (config, _session, db) = stores("researcher-media-s3-bad")
        .await
        .into_iter()
        .next()
        .expect("a database");
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    for (endpoint, bucket) in [
        (endpoint, "no-such-bucket-archivist".to_string()),
        (format!("http://{closed}"), var("ARCHIVIST_TEST_S3_BUCKET")),
    ] {
        let media = MediaSettings {
            backend: MediaBackend::S3,
            s3: S3Settings {
                endpoint: Some(endpoint.clone()),
                bucket: bucket.clone(),
                credentials_file: Some(creds.clone()),
                ..S3Settings::default()
            },
            ..MediaSettings::default()
        };
        let run = start(
            &config,
            &db,
            settings(&work_dir("media-s3-bad")).with_media(media),
            "researcher-s3-bad",
        );
        let err = tokio::time::timeout(Duration::from_secs(120), run.handle)
            .await
            .expect("refused within the probe's tries")
            .expect("task")
            .expect_err("an S3 store it cannot list");
        let text = err.to_string();
        assert!(
            text.contains("cannot be used") && text.contains(&endpoint) && text.contains(&bucket),
            "{text}"
        );
    }
}

/// Outside try 23d F3: after kill -9 the episode files of the jobs in flight
/// (`work_dir/episodes/<job>.media`) stayed for ever, counted by no bound. A researcher
/// starting on its work directory removes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episode_files_a_killed_researcher_left_are_removed_at_start() {
    let (config, _session, db) = stores("researcher-media-leftovers")
        .await
        .into_iter()
        .next()
        .expect("a database");
    let work = work_dir("media-leftovers");
    let episodes = work.join("episodes");
    std::fs::create_dir_all(&episodes).unwrap();
    let left = episodes.join("j0000000042.media");
    std::fs::write(&left, vec![7u8; 100_000]).unwrap();
    let researcher = start(&config, &db, settings(&work), "researcher-leftovers");
    let gone =
        archivist_testkit::eventually(Duration::from_secs(20), || async { !left.exists() }).await;
    researcher.stop().await;
    assert!(gone, "{} is still there", left.display());
}
