//! Affinity (issue 23; docs/researcher.md, "Affinity"): a job of an episode whose audio
//! one researcher keeps in its own media store goes to that researcher (anywhere else the
//! episode is downloaded again). The researcher that keeps a pin says so in the database;
//! the planner writes the hint into the lease; another researcher passes such a job over
//! while the preferred one is registered and the hint lasts, and claims it after.

use std::time::{Duration, Instant};

use archivist_db::renditions;
use archivist_engine::schema::JobState;
use archivist_engine::{member, zk};
use archivist_testkit::eventually;

use crate::http::{Route, Server};
use crate::support::*;

/// ZooKeeper's time as this host follows it, unix ms.
fn now_ms() -> i64 {
    archivist_engine::clock::to_unix_ms(archivist_engine::clock::stamp_now())
}

/// The researcher whose claim event the job carries.
fn claimed_by(job: &archivist_engine::schema::records::JobRecord) -> String {
    job.events
        .iter()
        .find(|e| e.step == "claim")
        .map(|e| e.by.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_of_an_episode_one_researcher_holds_goes_to_it_and_the_other_downloads_nothing() {
    for (config, session, db) in stores("researcher-affinity").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 3).await;
        let url = server.route("/e1.wav", Route::audio(&audio.episode));
        let holder = start(
            &config,
            &db,
            settings(&work_dir("affinity-a")),
            "researcher-aff-a",
        );
        let first = plan(&session, "e0000001", &url, &clips[..1]).await;
        let done = settled(&session, &first.id).await;
        assert_eq!(done.status, JobState::Reported, "{done:#?}");
        // It kept the episode in its own store and said so.
        assert_eq!(
            renditions::holder(&db, "e0000001")
                .await
                .unwrap()
                .as_deref(),
            Some("researcher-aff-a")
        );
        let served = server.bytes_served("/e1.wav");
        let other = start(
            &config,
            &db,
            settings(&work_dir("affinity-b")),
            "researcher-aff-b",
        );
        assert!(
            eventually(Duration::from_secs(10), || async {
                member::list(&session, archivist_engine::schema::paths::RESEARCHERS)
                    .await
                    .unwrap()
                    .len()
                    == 2
            })
            .await
        );
        for clip in &clips[1..3] {
            let job = plan_preferring(
                &session,
                "e0000001",
                &url,
                std::slice::from_ref(clip),
                Some(("researcher-aff-a".into(), now_ms() + 20_000)),
            )
            .await;
            let done = settled(&session, &job.id).await;
            assert_eq!(done.status, JobState::Reported, "{done:#?}");
            assert_eq!(claimed_by(&done), "researcher-aff-a", "{done:#?}");
        }
        assert_eq!(
            server.bytes_served("/e1.wav"),
            served,
            "the episode was downloaded again"
        );
        other.stop().await;
        holder.stop().await;
    }
}

/// The hint never makes a job wait longer than it lasts, nor at all for a preferred
/// researcher that is not registered (gone): another researcher claims it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hint_delays_others_only_while_it_lasts_and_the_preferred_researcher_is_registered() {
    for (config, session, db) in stores("researcher-affinity-grace").await {
        let server = Server::start().await;
        let audio = audio();
        let clips = serve_clips(&db, &server, 2).await;
        let url = server.route("/e1.wav", Route::audio(&audio.episode));
        // A registered researcher that never claims (its registration only).
        let ghost = archivist_testkit::another_session(&config).await;
        ghost
            .client()
            .create(
                &archivist_engine::schema::paths::researcher("researcher-ghost"),
                b"",
                &ghost.create_options(zk::CreateMode::Ephemeral),
            )
            .await
            .unwrap();
        let worker = start(
            &config,
            &db,
            settings(&work_dir("affinity-grace")),
            "researcher-aff-c",
        );
        // Preferred: the ghost, for 2.5 s: claimed by the worker after that, not before.
        let planned = Instant::now();
        let job = plan_preferring(
            &session,
            "e0000001",
            &url,
            &clips[..1],
            Some(("researcher-ghost".into(), now_ms() + 2_500)),
        )
        .await;
        let done = settled(&session, &job.id).await;
        let waited = planned.elapsed();
        assert_eq!(claimed_by(&done), "researcher-aff-c", "{done:#?}");
        assert!(
            waited >= Duration::from_millis(2_000),
            "claimed after {waited:?}, within the hint"
        );
        // Preferred: a researcher that is not registered: claimed at once.
        let planned = Instant::now();
        let job = plan_preferring(
            &session,
            "e0000001",
            &url,
            &clips[1..2],
            Some(("researcher-gone".into(), now_ms() + 60_000)),
        )
        .await;
        let done = settled(&session, &job.id).await;
        assert_eq!(claimed_by(&done), "researcher-aff-c", "{done:#?}");
        assert!(
            planned.elapsed() < Duration::from_secs(20),
            "a gone researcher's hint held the job for {:?}",
            planned.elapsed()
        );
        worker.stop().await;
        drop(ghost);
    }
}
