//! Bad downloads: each fails the job with a reason an operator can read (or, for
//! 500-then-200, succeeds after a retry), deletes the lease, and `retry` re-runs it.

use std::sync::Arc;
use std::time::Duration;

use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_engine::store;
use archivist_researcher::DownloadSettings;
use archivist_testkit::fresh_tree;

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
    let (config, session) = fresh_tree("researcher-failures").await;
    let server = Server::start().await;
    let audio = audio();
    let mut catalog = Vec::new();
    let mut clip_ids = Vec::new();
    for (id, wav, _) in audio.clips.iter().take(2) {
        catalog.push((
            id.clone(),
            server.route(&format!("/clips/{id}.wav"), Route::audio(wav)),
        ));
        clip_ids.push(id.clone());
    }
    add_clips(&session, &catalog).await;
    let limit = audio.episode.len() as u64 + 1000;
    let big = Arc::new(vec![0u8; limit as usize * 2]);
    let html =
        Arc::new(b"<!doctype html><html><body>Sorry, this episode moved</body></html>".to_vec());
    let base = server.base.clone();
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
    let researcher = start(&config, s, "researcher-failures");

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
                    store::exists(&session, &paths::job_lock(&job.id))
                        .await
                        .unwrap()
                        .is_none(),
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
        let done = wait_for(
            &session,
            &job.id,
            &[JobState::Reported, JobState::Failed],
            Duration::from_secs(60),
        )
        .await;
        assert_eq!(
            done.status,
            JobState::Reported,
            "{} after retry: {done:#?}",
            case.path
        );
        assert_eq!(done.retry_count, u32::from(case.reason.is_some()));
        let reports = reports(&session, &job.id).await;
        assert_eq!(reports.len(), 2, "{}", case.path);
        assert_eq!(reports.iter().filter(|r| r.is_final).count(), 1);
    }
    researcher.stop().await;
}
