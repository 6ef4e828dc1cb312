//! Bad downloads: each fails the job with a reason an operator can read (or, for
//! 500-then-200, succeeds after a retry), deletes the lease, and `retry` re-runs it.

use std::sync::Arc;
use std::time::Duration;

use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_engine::store;
use archivist_researcher::DownloadSettings;

use crate::http::{Route, Server};
use crate::support::*;

struct Case {
    path: &'static str,
    route: Route,
    /// Substrings the failure message must contain (None: the job must succeed).
    reason: Option<Vec<String>>,
    /// Requests the server must have seen.
    hits: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_download_fails_with_its_reason_and_can_be_retried() {
    for (config, session, db) in stores("researcher-failures").await {
        let server = Server::start().await;
        let audio = audio();
        let clip_ids = serve_clips(&db, &server, 2).await;
        let limit = audio.episode.len() as u64 + 1000;
        let big = Arc::new(vec![0u8; limit as usize * 2]);
        let html = Arc::new(
            b"<!doctype html><html><body>Sorry, this episode moved</body></html>".to_vec(),
        );
        let base = server.base.clone();
        // Bytes that no decoder takes for audio (seeded, so every run sees the same).
        let corrupt = Arc::new(
            (0..60_000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect::<Vec<u8>>(),
        );
        // The fixture episode with its WAV header claiming 3 samples per second.
        let absurd_rate = {
            let mut wav = audio.episode.as_ref().clone();
            wav[24..28].copy_from_slice(&3u32.to_le_bytes());
            wav[28..32].copy_from_slice(&6u32.to_le_bytes());
            Arc::new(wav)
        };
        let cases = [
            Case {
                path: "/404.wav",
                route: Route::Status(404),
                reason: Some(vec![format!("GET {base}/404.wav returned 404 Not Found")]),
                hits: 1,
            },
            Case {
                path: "/flaky.wav",
                route: Route::FailThen {
                    status: 500,
                    times: 1,
                    then: Box::new(Route::audio(&audio.episode)),
                },
                reason: None,
                hits: 2,
            },
            Case {
                path: "/slow.wav",
                route: Route::Slow(Duration::from_secs(20)),
                reason: Some(vec![
                    "timed out".into(),
                    "gave up after 3 attempts".into(),
                    format!("{base}/slow.wav"),
                ]),
                hits: 3,
            },
            Case {
                path: "/truncated.wav",
                route: Route::Truncated {
                    body: audio.episode.clone(),
                    send: 20_000,
                },
                reason: Some(vec![
                    "truncated body: got 20000 bytes".into(),
                    "gave up after 3 attempts".into(),
                ]),
                hits: 3,
            },
            Case {
                path: "/big.wav",
                route: Route::audio(&big),
                reason: Some(vec![
                    format!("over the {limit}-byte limit"),
                    format!("Content-Length {}", big.len()),
                ]),
                hits: 1,
            },
            Case {
                path: "/page.html",
                route: Route::Ok {
                    body: html,
                    content_type: "text/html",
                    delay: Duration::ZERO,
                },
                reason: Some(vec![
                    "not audio: text/html body from".into(),
                    "<!doctype html>".into(),
                ]),
                hits: 1,
            },
            Case {
                path: "/corrupt.mp3",
                route: Route::Ok {
                    body: corrupt,
                    content_type: "audio/mpeg",
                    delay: Duration::ZERO,
                },
                reason: Some(vec![
                    "not audio: audio/mpeg body".into(),
                    "no supported audio container".into(),
                ]),
                hits: 1,
            },
            Case {
                path: "/empty.wav",
                route: Route::Ok {
                    body: Arc::new(Vec::new()),
                    content_type: "audio/wav",
                    delay: Duration::ZERO,
                },
                reason: Some(vec!["empty".into()]),
                hits: 1,
            },
            Case {
                path: "/absurd-rate.wav",
                route: Route::audio(&absurd_rate),
                reason: Some(vec!["sample rate".into(), "3".into()]),
                hits: 1,
            },
            Case {
                path: "/to-file",
                route: Route::Redirect("file:///etc/passwd".into()),
                reason: Some(vec![
                    "redirect to file:///etc/passwd not followed".into(),
                    "only http and https".into(),
                ]),
                hits: 1,
            },
        ];
        let mut jobs = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            let url = server.route(case.path, case.route.clone());
            let episode = format!("e{:07}", i + 1);
            jobs.push(plan(&session, &episode, &url, &clip_ids).await);
        }
        let work = work_dir("failures");
        let mut s = settings(&work);
        s.download = DownloadSettings::default()
            .with_connect_timeout(Duration::from_secs(2))
            .with_read_timeout(Duration::from_millis(400))
            .with_max_bytes(limit)
            .with_max_attempts(3)
            .with_backoff(Duration::from_millis(10), Duration::from_millis(50));
        let researcher = start(&config, &db, s, "researcher-failures");

        for (case, job) in cases.iter().zip(&jobs) {
            let done = wait_for(
                &session,
                &job.id,
                &[JobState::Failed, JobState::Reported],
                Duration::from_secs(60),
            )
            .await;
            match &case.reason {
                None => {
                    assert_eq!(done.status, JobState::Reported, "{}: {done:#?}", case.path);
                    assert_eq!(reports(&session, &job.id).await.len(), 2);
                }
                Some(parts) => {
                    assert_eq!(done.status, JobState::Failed, "{}: {done:#?}", case.path);
                    let message = done.message.clone().unwrap_or_default();
                    for part in parts {
                        assert!(
                            message.contains(part.as_str()),
                            "{}: message {message:?} lacks {part:?}",
                            case.path
                        );
                    }
                    assert_eq!(done.last_successful_status, Some(JobState::Pending));
                    assert!(
                        store::exists(&session, &paths::lease(&job.id))
                            .await
                            .unwrap()
                            .is_none(),
                        "{}: lease deleted",
                        case.path
                    );
                    assert!(
                        !archivist_testkit::locked(&session, &job.id).await,
                        "{}: lock released",
                        case.path
                    );
                    assert!(reports(&session, &job.id).await.is_empty());
                }
            }
            assert_eq!(server.hits(case.path), case.hits, "{}: requests", case.path);
        }

        // The operator fixes the media and retries every failed job: each is researched.
        for (case, job) in cases.iter().zip(&jobs) {
            if case.reason.is_some() {
                server.route(case.path, Route::audio(&audio.episode));
                let next = retry(&session, &job.id).await;
                assert_eq!(next.status, JobState::Pending);
            }
        }
        for (case, job) in cases.iter().zip(&jobs) {
            let reports =
                reported_after_retry(&session, &job.id, case.path, case.reason.is_some()).await;
            assert_eq!(reports.iter().filter(|r| r.is_final).count(), 1);
        }
        researcher.stop().await;
    }
}

/// Bad clips: each gets its own error in its report, the good clip in the same job is
/// still found at its offsets, and the job is reported (one bad clip stops nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_clip_gets_its_own_error_and_the_good_one_is_still_found() {
    for (config, session, db) in stores("researcher-bad-clips").await {
        let server = Server::start().await;
        let audio = audio();
        let (good_id, good_wav, good_offsets) = &audio.clips[0];
        let noise = |seconds: f64, amplitude: f32| -> Vec<f32> {
            (0..(seconds * 8000.0) as u32)
                .map(|i| {
                    let x = (i.wrapping_mul(2_654_435_761) >> 8) as f32 / (1u32 << 24) as f32;
                    (x - 0.5) * 2.0 * amplitude
                })
                .collect()
        };
        let bad: Vec<(&str, Route, Option<&str>)> = vec![
            // (clip id, what the server sends, the error its report must carry)
            (
                "c000011",
                Route::audio(&Arc::new(wav_bytes(&[], 8000))),
                Some("no audio samples"),
            ),
            (
                "c000012",
                Route::audio(&Arc::new(wav_bytes(&vec![0.0; 16_000], 8000))),
                Some("silent"),
            ),
            (
                "c000013",
                Route::audio(&Arc::new(wav_bytes(&noise(0.05, 0.5), 8000))),
                Some("too short"),
            ),
            (
                "c000014",
                Route::Ok {
                    body: Arc::new(b"ID3 this is not an mp3 at all, just text".repeat(100)),
                    content_type: "audio/mpeg",
                    delay: Duration::ZERO,
                },
                Some("not audio"),
            ),
            ("c000015", Route::Status(404), Some("404")),
            // Longer than the episode: not an error, just not found.
            (
                "c000016",
                Route::audio(&Arc::new(wav_bytes(
                    &noise(audio.episode_s + 10.0, 0.3),
                    8000,
                ))),
                None,
            ),
        ];
        let mut catalog = vec![(
            good_id.clone(),
            server.route(&format!("/clips/{good_id}.wav"), Route::audio(good_wav)),
        )];
        for (id, route, _) in &bad {
            catalog.push((
                id.to_string(),
                server.route(&format!("/clips/{id}.wav"), route.clone()),
            ));
        }
        add_clips(&db, &catalog).await;
        let clip_ids: Vec<String> = catalog.iter().map(|(id, _)| id.clone()).collect();
        let url = server.route("/e1.wav", Route::audio(&audio.episode));
        let job = plan(&session, "e0000001", &url, &clip_ids).await;
        let work = work_dir("bad-clips");
        let researcher = start(&config, &db, settings(&work), "researcher-bad-clips");
        let done = settled(&session, &job.id).await;
        researcher.stop().await;
        assert_eq!(done.status, JobState::Reported, "{done:#?}");
        let reports = reports(&session, &job.id).await;
        assert_eq!(reports.len(), clip_ids.len(), "one report per clip");
        let report = |id: &str| {
            reports
                .iter()
                .find(|r| r.clip == id)
                .unwrap_or_else(|| panic!("no report for {id}"))
        };
        let good = report(good_id);
        assert_eq!(good.error, None);
        let found: Vec<f64> = good.occurrences.iter().map(|o| o.at).collect();
        assert_eq!(
            found.len(),
            good_offsets.len(),
            "{found:?} vs {good_offsets:?}"
        );
        for (f, t) in found.iter().zip(good_offsets) {
            assert!((f - t).abs() < 0.02, "{found:?} vs {good_offsets:?}");
        }
        for (id, _, reason) in &bad {
            let r = report(id);
            match reason {
                Some(part) => {
                    let error = r.error.clone().unwrap_or_default();
                    assert!(
                        error.to_lowercase().contains(part),
                        "{id}: error {error:?} lacks {part:?}"
                    );
                    assert!(r.occurrences.is_empty(), "{id}");
                }
                None => assert_eq!((r.error.clone(), r.occurrences.len()), (None, 0), "{id}"),
            }
        }
    }
}

/// Issue 18: the 12-hour decode cap is a setting (`researcher.max_audio_hours`): an
/// episode longer than the researcher's setting fails as `too long`, naming the limit,
/// instead of being decoded; a zero or negative setting is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episode_longer_than_max_audio_hours_fails_as_too_long() {
    let bad = archivist_researcher::ResearcherSettings {
        max_audio_hours: 0.0,
        ..Default::default()
    };
    let why = bad.validate().expect_err("zero hours");
    assert!(why.contains("max_audio_hours"), "{why}");
    for (config, session, db) in stores("researcher-too-long").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 1).await;
        let url = server.route("/e.wav", Route::audio(&audio.episode));
        let work = work_dir("too-long");
        let mut short = settings(&work);
        // 10 s: the fixture episode lasts 20 s.
        short.max_audio_hours = 10.0 / 3600.0;
        let researcher = start(&config, &db, short, "researcher-too-long");
        let job = plan(&session, "e0000001", &url, &clips).await;
        let done = settled(&session, &job.id).await;
        researcher.stop().await;
        assert_eq!(done.status, JobState::Failed, "{done:#?}");
        let message = done.message.clone().unwrap_or_default();
        assert!(
            message.contains("too long") && message.contains("over the 10 s"),
            "{message}"
        );
    }
}

/// Outside 17n M1: a researcher that could not go on for a reason that is not the job's
/// (the database unavailable) released the lock and left the job `leased`; the reaper
/// then expired it blaming "researcher lost: its lock vanished with its session" of a
/// session that lived. The job is now given back: here, still `leased` when the
/// database refused its rendition, it goes back to `pending`, and is researched once
/// the database answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_the_database_stops_midway_is_given_back_not_left_leased() {
    let (config, session) = archivist_testkit::fresh_tree("researcher-db-busy").await;
    let url = archivist_testkit::db::tree_database_url(session.chroot());
    let db = archivist_testkit::db::tree_database(session.chroot()).await;
    let Some(path) = url.strip_prefix("sqlite://").map(str::to_string) else {
        return;
    };
    let server = Server::start().await;
    let audio = audio();
    let clips = serve_clips(&db, &server, 1).await;
    let episode = server.route("/e.wav", Route::audio(&audio.episode));
    // Another process holds the database's write lock for longer than the busy
    // timeout (30 s): the researcher's first write (the rendition) is refused.
    let mut locker = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,time\nc=sqlite3.connect(sys.argv[1],isolation_level=None,timeout=60)\nc.execute('BEGIN EXCLUSIVE')\nprint('locked',flush=True)\ntime.sleep(float(sys.argv[2]))\nc.execute('ROLLBACK')",
            &path,
            "34",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    {
        use std::io::BufRead;
        let mut line = String::new();
        let out = locker.stdout.take().expect("stdout");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("locked");
        assert_eq!(line.trim(), "locked");
    }
    let researcher = start(
        &config,
        &db,
        settings(&work_dir("db-busy")),
        "researcher-db-busy",
    );
    let job = plan(&session, "e0000001", &episode, &clips).await;
    let done = wait_for(
        &session,
        &job.id,
        &[JobState::Reported, JobState::Failed, JobState::Expired],
        Duration::from_secs(120),
    )
    .await;
    let _ = locker.wait();
    researcher.stop().await;
    assert_eq!(done.status, JobState::Reported, "{done:#?}");
    assert!(
        done.events
            .iter()
            .any(|e| e.step == "give back" && e.result.contains("database is unavailable")),
        "{done:#?}"
    );
    assert!(done.events.iter().all(|e| e.step != "reap"), "{done:#?}");
}
