//! Test setup standing in for the planner and the researcher: jobs, leases and reports
//! written directly.

use std::time::Duration;

use archivist_engine::jobs::{self, NewJob};
use archivist_engine::member::Identity;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    JobRecord, LeaseRecord, Occurrence, ReportRecord, ResearchRecord,
};
use archivist_engine::schema::{JobState, SCHEMA_VERSION};
use archivist_engine::transition::{Role, Transition};
use archivist_engine::{store, zk, Session, ZkConfig};
use archivist_recorder::reaper;
use archivist_recorder::{ReaperError, ReaperSettings, RecorderError, RecorderSettings};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The test tree's database (one per tree: every call in a test sees one archive).
pub async fn db(session: &Session) -> archivist_db::Database {
    archivist_testkit::db::tree_database(session.chroot()).await
}

/// The database of the tree `config` names.
pub async fn db_for(config: &archivist_engine::ZkConfig) -> archivist_db::Database {
    archivist_testkit::db::tree_database(&config.hosts_and_chroot().1).await
}

/// Fast settings for tests.
pub fn settings() -> RecorderSettings {
    RecorderSettings::default()
        .with_poll_interval(Duration::from_millis(100))
        .with_retry_backoff(Duration::from_millis(5))
}

/// Reaper settings that sweep every 100 ms.
pub fn fast_reaper() -> ReaperSettings {
    ReaperSettings::default().with_interval(Duration::from_millis(100))
}

/// The recorder daemon named `name` on `config`'s tree, with [`settings`], until
/// `shutdown` (as `archivist recorder` runs it).
pub fn spawn_recorder(
    config: &ZkConfig,
    name: &str,
    shutdown: &CancellationToken,
) -> JoinHandle<Result<(), RecorderError>> {
    let (config, identity, shutdown) = (
        config.clone(),
        Identity::named("recorder", name),
        shutdown.clone(),
    );
    tokio::spawn(async move {
        let db = db_for(&config).await;
        archivist_recorder::run(&config, db, settings(), identity, shutdown).await
    })
}

/// The reaper daemon named `name` on `config`'s tree, with `settings`, until `shutdown`.
pub fn spawn_reaper(
    config: &ZkConfig,
    settings: ReaperSettings,
    name: &str,
    shutdown: &CancellationToken,
) -> JoinHandle<Result<(), ReaperError>> {
    let (config, identity, shutdown) = (
        config.clone(),
        Identity::named("reaper", name),
        shutdown.clone(),
    );
    tokio::spawn(async move {
        let db = db_for(&config).await;
        reaper::run(&config, &db, settings, identity, shutdown).await
    })
}

/// Moves a `researching` job to `reported` by the table, standing in for the
/// researcher's multi that writes its final report and this move together.
pub async fn mark_reported(session: &Session, job: &JobRecord) {
    let (current, version) = jobs::read(session, &job.id).await.expect("read job");
    Transition::new(Role::Researcher, &current, version, JobState::Reported)
        .commit(session)
        .await
        .expect("researching -> reported");
}

/// Creates a job for `clips` (numbers) of `episode` and puts it straight into `state`
/// (test setup only: bypasses the table, as the planner/researcher would have moved it).
pub async fn job(session: &Session, episode: &str, clips: &[u32], state: JobState) -> JobRecord {
    let new = NewJob {
        episode: episode.to_string(),
        media_url: format!("http://127.0.0.1:1/{episode}.mp3"),
        clips: clips.iter().map(|n| paths::clip_id(*n)).collect(),
        priority: 0,
        curated_ms: 1_700_000_000_000,
        batch: None,
    };
    let job = jobs::create(session, &new, "test", |_| vec![])
        .await
        .expect("create job");
    archivist_testkit::place_job(session, job, state).await
}

/// Writes `/leases/{job}` with a duration.
pub async fn lease(session: &Session, job: &JobRecord, duration_ms: i64) {
    let path = paths::lease(&job.id);
    let record = LeaseRecord {
        schema: SCHEMA_VERSION,
        job: job.id.clone(),
        episode: job.episode.clone(),
        clips: job.clips.clone(),
        duration_ms,
        holder: Some("researcher-test".into()),
        extensions: 0,
        prefer: None,
        prefer_until_ms: None,
    };
    let data = store::encode(&path, &record).unwrap();
    archivist_testkit::write_node(session, &path, &data).await;
}

/// Reads a lease and its stat.
pub async fn read_lease(session: &Session, job: &str) -> Option<(LeaseRecord, zk::Stat)> {
    store::read::<LeaseRecord>(session, &paths::lease(job))
        .await
        .unwrap()
}

/// Occurrences a clip number is reported with: every 4th clip is found 1-3 times.
pub fn occurrences_for(clip: u32, salt: f64) -> Vec<Occurrence> {
    if clip % 4 != 0 {
        return vec![];
    }
    (0..(clip % 3 + 1))
        .map(|i| Occurrence {
            at: clip as f64 * 3.0 + i as f64 * 100.0 + salt,
            conf: 0.7 + (clip % 10) as f32 / 50.0,
            speed: None,
            part: None,
        })
        .collect()
}

/// Creates `/reports/{job}-{clip}` as the researcher does; returns its name.
pub async fn report(
    session: &Session,
    job: &JobRecord,
    clip: u32,
    occurrences: Vec<Occurrence>,
    is_final: bool,
) -> String {
    let record = ReportRecord {
        schema: SCHEMA_VERSION,
        job: job.id.clone(),
        episode: job.episode.clone(),
        clip: paths::clip_id(clip),
        researcher: format!("researcher-for-{}", job.id),
        occurrences,
        error: None,
        clip_stamp: None,
        episode_duration_s: 3600.0,
        clip_duration_s: 5.0,
        researched_at: archivist_engine::clock::stamp_now(),
        is_final,
    };
    let name = paths::report_name(&job.id, &record.clip);
    let path = paths::report(&name);
    session
        .client()
        .create(
            &path,
            &store::encode(&path, &record).unwrap(),
            &session.create_options(zk::CreateMode::Persistent),
        )
        .await
        .expect("create report");
    name
}

/// The episode's research record in the test tree's database (ZooKeeper holds none
/// since issue 22), with the archive's research `seq` (moves with every write).
pub async fn research(session: &Session, episode: &str) -> Option<(ResearchRecord, i64)> {
    let db = db(session).await;
    let record = archivist_db::research::read(&db, episode).await.unwrap()?;
    let seq = archivist_db::research::last_seq(&db).await.unwrap();
    Some((record, seq))
}

/// Report names still waiting.
pub async fn reports_left(session: &Session) -> Vec<String> {
    store::children(session, paths::REPORTS).await.unwrap()
}

/// Every clip number counted once per run that holds it (a clip stored twice would
/// count twice).
pub fn run_clip_counts(record: &ResearchRecord) -> std::collections::BTreeMap<u32, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for run in &record.runs {
        for n in run.clips.iter() {
            *counts.entry(n).or_insert(0) += 1;
        }
    }
    counts
}

/// The queues holding an entry for the job (the test kit's one copy).
pub use archivist_testkit::queues_holding;
