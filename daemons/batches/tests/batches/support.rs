//! Test setup standing in for the planner, the researcher and the recorder.

use std::time::Duration;

use archivist_batches::daemon::Batcher;
use archivist_batches::submission::{parse_submission, submit};
use archivist_batches::transition;
use archivist_batches::BatcherSettings;
use archivist_db::Database;
use archivist_engine::jobs::{self, NewJob};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{BatchRecord, JobRecord, Occurrence, ReportRecord};
use archivist_engine::schema::{BatchState, JobState, SCHEMA_VERSION};
use archivist_engine::transition::Transition;
use archivist_engine::{store, zk, Session};
use archivist_recorder::RecorderSettings;

/// Fast settings for tests.
pub fn settings() -> BatcherSettings {
    BatcherSettings::default()
        .with_poll_interval(Duration::from_millis(50))
        .with_webhook_retries(3, Duration::from_millis(20))
        .with_webhook_timeout(Duration::from_secs(2))
}

/// A batcher driven pass by pass.
pub fn batcher(db: &Database) -> Batcher {
    Batcher::new(settings(), "batcher-test", db.clone()).expect("batcher")
}

/// A fresh ZooKeeper chroot and a fresh database, once per backend the machine offers
/// (SQLite always, PostgreSQL when `ARCHIVIST_TEST_PG` is set).
pub use archivist_testkit::db::fresh_stores as stores;

/// Submits a submission text (checked as `archivist batch submit` does).
pub async fn submit_text(session: &Session, text: &str) -> BatchRecord {
    let submission = parse_submission(text, "batch.yml", None).expect("valid submission");
    submit(session, &submission, "admin-test")
        .await
        .expect("submit")
}

/// Reads a batch.
pub async fn batch(session: &Session, id: &str) -> BatchRecord {
    transition::read(session, id).await.expect("read batch").0
}

/// Runs passes until the batch is in `state` (at most 100 passes).
pub async fn drive(
    session: &Session,
    batcher: &Batcher,
    id: &str,
    state: BatchState,
) -> BatchRecord {
    for _ in 0..100 {
        batcher.pass(session).await.expect("pass");
        let record = batch(session, id).await;
        if record.status == state {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let record = batch(session, id).await;
    panic!("batch {id} never reached {state}: {record:#?}");
}

/// A job for `clips` of `episode`, created as the planner does (in `pending`).
pub async fn create_job(session: &Session, episode: &str, clips: &[String]) -> JobRecord {
    let new = NewJob {
        episode: episode.to_string(),
        media_url: format!("http://127.0.0.1:1/{episode}.mp3"),
        clips: clips.to_vec(),
        priority: 0,
        curated_ms: 1_700_000_000_000,
        batch: None,
    };
    jobs::create(session, &new, "planner-test", |_| vec![])
        .await
        .expect("create job")
}

async fn step(session: &Session, id: &str, to: JobState) {
    let (job, version) = jobs::read(session, id).await.expect("read job");
    Transition::new(
        archivist_engine::transition::Role::for_move(
            archivist_engine::transition::machine(),
            job.status,
            to,
        )
        .expect("a move of the table"),
        &job,
        version,
        to,
    )
    .event("researcher-test", to.as_str(), "ok")
    .commit(session)
    .await
    .expect("job transition");
}

/// Takes a pending job through the table to `recorded`: the researcher's transitions,
/// one report per clip (found at `found`'s offset when listed), the recorder's store.
pub async fn complete(session: &Session, id: &str, found: &[(&str, f64)]) {
    for to in [JobState::Leased, JobState::Researching, JobState::Reported] {
        step(session, id, to).await;
    }
    let (job, _) = jobs::read(session, id).await.expect("read job");
    let mut names = Vec::new();
    for clip in &job.clips {
        let occurrences = found
            .iter()
            .filter(|(c, _)| c == clip)
            .map(|(_, at)| Occurrence {
                at: *at,
                conf: 0.9,
                speed: None,
                part: None,
            })
            .collect();
        let record = ReportRecord {
            schema: SCHEMA_VERSION,
            job: job.id.clone(),
            episode: job.episode.clone(),
            clip: clip.clone(),
            researcher: "researcher-test".into(),
            occurrences,
            error: None,
            clip_stamp: None,
            episode_duration_s: 3600.0,
            clip_duration_s: 5.0,
            researched_at: archivist_engine::clock::stamp_now(),
            is_final: clip == job.clips.last().expect("clips"),
        };
        let name = paths::report_name(&job.id, clip);
        let path = paths::report(&name);
        session
            .client()
            .create(
                &path,
                &store::encode(&path, &record).expect("encode"),
                &session.create_options(zk::CreateMode::Persistent),
            )
            .await
            .expect("create report");
        names.push(name);
    }
    let db = archivist_testkit::db::tree_database(session.chroot()).await;
    archivist_recorder::store::store_reports(
        session,
        &db,
        &RecorderSettings::default(),
        id,
        &names,
    )
    .await
    .expect("store reports");
    step(session, id, JobState::Recorded).await;
}

/// Researches `clips` of `episode` end to end; returns the job.
pub async fn record(
    session: &Session,
    episode: &str,
    clips: &[String],
    found: &[(&str, f64)],
) -> JobRecord {
    let job = create_job(session, episode, clips).await;
    complete(session, &job.id, found).await;
    job
}

/// A job for `clips` of `episode` that fails before its first success, with `reason`.
pub async fn fail(session: &Session, episode: &str, clips: &[String], reason: &str) -> JobRecord {
    let job = create_job(session, episode, clips).await;
    let (current, version) = jobs::read(session, &job.id).await.expect("read job");
    Transition::new(
        archivist_engine::transition::Role::Researcher,
        &current,
        version,
        JobState::Failed,
    )
    .failed()
    .edit(|j| j.message = Some(reason.to_string()))
    .event("researcher-test", "download", reason)
    .commit(session)
    .await
    .expect("fail job")
    .0
}

/// A submission naming `episodes` and `clips` by URL (nothing is fetched).
pub fn submission(episodes: &[&str], clips: &[&str], webhook: Option<&str>) -> String {
    let mut text = String::from("name: test campaign\n");
    if let Some(url) = webhook {
        text.push_str(&format!("webhook: {url}\n"));
    }
    if !episodes.is_empty() {
        text.push_str("episodes:\n");
        for e in episodes {
            text.push_str(&format!(
                "  - url: http://127.0.0.1:1/{e}.mp3\n    title: Episode {e}\n"
            ));
        }
    }
    if !clips.is_empty() {
        text.push_str("clips:\n");
        for c in clips {
            text.push_str(&format!(
                "  - url: http://127.0.0.1:1/{c}.wav\n    title: Clip {c}\n"
            ));
        }
    }
    text
}
