//! Fixtures: generated audio, catalog and job setup as the planner does it, an in-test
//! recorder stand-in, and an in-process researcher.

use archivist_db::catalog::{self, CatalogRecord};
use archivist_db::Database;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use archivist_engine::jobs::{self, NewJob};
use archivist_engine::lock::JobLock;
use archivist_engine::member::Identity;
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::clipset::ClipSet;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    ClipRecord, JobRecord, LeaseRecord, ReportRecord, ResearchRecord, ResearchRun,
};
use archivist_engine::schema::{JobState, SCHEMA_VERSION};
use archivist_engine::transition::{machine, LockAction, Role, Transition};
use archivist_engine::{store, Session, ZkConfig};
use archivist_researcher::{DownloadSettings, ResearcherSettings};
use archivist_testaudio::{write_wav, BedKind, ClipKind, Placement, Scenario};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Generated audio: one episode and four clips, three of them placed in it.
pub struct Audio {
    pub episode: Arc<Vec<u8>>,
    /// (clip id, wav bytes, expected offsets)
    pub clips: Vec<(String, Arc<Vec<u8>>, Vec<f64>)>,
    pub episode_s: f64,
}

pub fn wav_bytes(samples: &[f32], rate: u32) -> Vec<u8> {
    let path = std::env::temp_dir().join(format!(
        "researcher-fixture-{}-{:016x}.wav",
        std::process::id(),
        rand::random::<u64>()
    ));
    write_wav(&path, samples, rate, 1).expect("write wav");
    let bytes = std::fs::read(&path).expect("read wav");
    let _ = std::fs::remove_file(&path);
    bytes
}

/// The fixture, rendered once per test process.
pub fn audio() -> &'static Audio {
    static AUDIO: OnceLock<Audio> = OnceLock::new();
    AUDIO.get_or_init(|| {
        let mut s = Scenario::new(7, 20.0, BedKind::Speech);
        let sting = s.add_clip("c000001", ClipKind::Sting, 1.0);
        let drop = s.add_clip("c000002", ClipKind::SpokenDrop, 2.0);
        let jingle = s.add_clip("c000003", ClipKind::Jingle, 3.0);
        let _absent = s.add_clip("c000004", ClipKind::Jingle, 3.0);
        s.place(sting, 2.5, Placement::Splice)
            .place(drop, 8.25, Placement::Splice)
            .place(jingle, 14.0, Placement::Splice)
            .place(sting, 17.5, Placement::Splice);
        let r = s.render();
        let clips = r
            .clips
            .iter()
            .map(|(name, samples)| {
                let offsets = r
                    .truth
                    .occurrences
                    .iter()
                    .filter(|o| &o.clip == name)
                    .map(|o| o.offset_s)
                    .collect();
                (name.clone(), Arc::new(wav_bytes(samples, 8000)), offsets)
            })
            .collect();
        Audio {
            episode: Arc::new(wav_bytes(&r.episode, 8000)),
            clips,
            episode_s: r.truth.duration_s,
        }
    })
}

/// A fresh work directory.
pub fn work_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "researcher-test-{name}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).expect("work dir");
    dir
}

/// Settings with test-sized timeouts.
pub fn settings(work: &std::path::Path) -> ResearcherSettings {
    ResearcherSettings::default()
        .with_work_dir(work)
        .with_concurrency(2)
        .with_heartbeat(Duration::from_millis(300))
        .with_poll(Duration::from_millis(200))
        .with_refused_backoff(Duration::from_millis(500))
        .with_download(
            DownloadSettings::default()
                .with_connect_timeout(Duration::from_secs(2))
                .with_read_timeout(Duration::from_secs(5))
                .with_max_attempts(3)
                .with_backoff(Duration::from_millis(10), Duration::from_millis(50)),
        )
}

/// A researcher running in this process.
pub struct Running {
    pub shutdown: CancellationToken,
    pub handle: JoinHandle<Result<(), archivist_researcher::ResearcherError>>,
}

pub fn start(
    config: &ZkConfig,
    db: &Database,
    settings: ResearcherSettings,
    name: &str,
) -> Running {
    let shutdown = CancellationToken::new();
    let config = config.clone();
    let db = db.clone();
    let identity = Identity::named("researcher", name);
    let token = shutdown.clone();
    let handle = tokio::spawn(async move {
        archivist_researcher::run(&config, &db, settings, identity, token).await
    });
    Running { shutdown, handle }
}

impl Running {
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(20), self.handle)
            .await
            .expect("researcher stops")
            .expect("researcher task")
            .expect("researcher ran");
    }
}

/// A fresh ZooKeeper chroot and a fresh database, once per backend the machine offers
/// (SQLite always, PostgreSQL when `ARCHIVIST_TEST_PG` is set).
pub use archivist_testkit::db::fresh_stores as stores;

/// Registers clips in the catalog (the database), their media at `urls`.
pub async fn add_clips(db: &Database, clips: &[(String, String)]) {
    let mut records = Vec::new();
    for (id, url) in clips {
        let now = time::OffsetDateTime::now_utc();
        let record = ClipRecord {
            schema: SCHEMA_VERSION,
            id: id.clone(),
            fields: archivist_testkit::catalog::fields(&format!("clip {id}"), url, now),
        };
        records.push(CatalogRecord::Clip(record));
    }
    catalog::put(db, &records).await.expect("clip records");
}

/// Serves the fixture's first `n` clips from `server` and registers them in the catalog;
/// returns their ids.
pub async fn serve_clips(db: &Database, server: &crate::http::Server, n: usize) -> Vec<String> {
    let catalog: Vec<(String, String)> = audio()
        .clips
        .iter()
        .take(n)
        .map(|(id, wav, _)| {
            let url = server.route(&format!("/clips/{id}.wav"), crate::http::Route::audio(wav));
            (id.clone(), url)
        })
        .collect();
    add_clips(db, &catalog).await;
    catalog.into_iter().map(|(id, _)| id).collect()
}

/// Creates a pending job with its lease, as the planner does.
pub async fn plan(session: &Session, episode: &str, url: &str, clips: &[String]) -> JobRecord {
    plan_preferring(session, episode, url, clips, None).await
}

/// [`plan`], with the planner's affinity hint in the lease: `prefer` is the researcher
/// and the unix ms until which it is preferred.
pub async fn plan_preferring(
    session: &Session,
    episode: &str,
    url: &str,
    clips: &[String],
    prefer: Option<(String, i64)>,
) -> JobRecord {
    let new = NewJob {
        episode: episode.to_string(),
        media_url: url.to_string(),
        clips: clips.to_vec(),
        priority: 0,
        curated_ms: 1_700_000_000_000,
        batch: None,
    };
    let episode = episode.to_string();
    let clip_ids = clips.to_vec();
    jobs::create(session, &new, "test-planner", |id| {
        let lease = LeaseRecord {
            schema: SCHEMA_VERSION,
            job: id.to_string(),
            episode: episode.clone(),
            clips: clip_ids.clone(),
            duration_ms: 60_000,
            holder: None,
            extensions: 0,
            prefer: prefer.as_ref().map(|(who, _)| who.clone()),
            prefer_until_ms: prefer.as_ref().map(|(_, until)| *until),
        };
        let path = paths::lease(id);
        vec![Op::Create {
            data: store::encode(&path, &lease).expect("lease"),
            path,
            mode: Mode::Persistent,
        }]
    })
    .await
    .expect("create job")
}

/// The job once reported or failed (within 60 s).
pub async fn settled(session: &Session, id: &str) -> JobRecord {
    wait_for(
        session,
        id,
        &[JobState::Reported, JobState::Failed],
        Duration::from_secs(60),
    )
    .await
}

pub async fn job(session: &Session, id: &str) -> JobRecord {
    jobs::read(session, id).await.expect("read job").0
}

/// Waits until the job is in one of `states`; panics with the job otherwise.
pub async fn wait_for(
    session: &Session,
    id: &str,
    states: &[JobState],
    timeout: Duration,
) -> JobRecord {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let j = job(session, id).await;
        if states.contains(&j.status) {
            return j;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("job {id} did not reach {states:?} in {timeout:?}: {j:#?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The reports of a job still in /reports.
/// After an operator's fix and `retry`: waits for the job to be reported, checks it was
/// retried exactly when it had failed (`retried`), and returns its two reports (the
/// failures and hostile-server tests share this ending).
pub async fn reported_after_retry(
    session: &Session,
    job: &str,
    what: &str,
    retried: bool,
) -> Vec<ReportRecord> {
    let done = wait_for(
        session,
        job,
        &[JobState::Reported, JobState::Failed],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        done.status,
        JobState::Reported,
        "{what} after retry: {done:#?}"
    );
    assert_eq!(done.retry_count, u32::from(retried));
    let reports = reports(session, job).await;
    assert_eq!(reports.len(), 2, "{what}");
    reports
}

pub async fn reports(session: &Session, job: &str) -> Vec<ReportRecord> {
    let mut out = Vec::new();
    for name in store::children(session, paths::REPORTS).await.unwrap() {
        if !name.starts_with(&format!("{job}-")) {
            continue;
        }
        if let Some((r, _)) = store::read::<ReportRecord>(session, &paths::report(&name))
            .await
            .unwrap()
        {
            out.push(r);
        }
    }
    out
}

/// A minimal stand-in for the recorder: moves every report into the research archive
/// (the database, as the recorder does: the database first, then the report's delete)
/// and returns what it stored.
pub async fn record_reports(session: &Session, db: &Database) -> Vec<ReportRecord> {
    let mut stored = Vec::new();
    for name in store::children(session, paths::REPORTS).await.unwrap() {
        let path = paths::report(&name);
        let Some((report, _)) = store::read::<ReportRecord>(session, &path).await.unwrap() else {
            continue;
        };
        let number = paths::clip_number(&report.clip).expect("clip number");
        archivist_db::research::update(db, &report.episode, |record| {
            assert!(
                !record.is_researched(number),
                "duplicate result for {} in {}",
                report.clip,
                report.episode
            );
            match record.runs.iter_mut().find(|r| r.job == report.job) {
                Some(run) => {
                    run.clips.insert(number);
                }
                None => record.runs.push(ResearchRun {
                    job: report.job.clone(),
                    researcher: report.researcher.clone(),
                    at: report.researched_at,
                    clips: [number].into_iter().collect::<ClipSet>(),
                }),
            }
            if !report.occurrences.is_empty() {
                record
                    .found
                    .insert(report.clip.clone(), report.occurrences.clone());
            }
            record.episode_duration_s = Some(report.episode_duration_s);
        })
        .await
        .expect("store report");
        ops::commit(
            session,
            &[Op::Delete {
                path,
                version: None,
            }],
        )
        .await
        .expect("delete report");
        stored.push(report);
    }
    stored
}

/// The research record of `episode` in the database (panics if there is none).
pub async fn research(db: &Database, episode: &str) -> ResearchRecord {
    archivist_db::research::read(db, episode)
        .await
        .expect("reading research")
        .unwrap_or_else(|| panic!("no research for {episode}"))
}

/// The recorder stand-in's close: `reported -> recorded`, lock released, lease deleted.
pub async fn close_reported(session: &Session, id: &str) {
    let lock = JobLock::try_acquire(session, id, "test-recorder")
        .await
        .unwrap()
        .expect("reported job is unlocked");
    let (job, version) = jobs::read(session, id).await.unwrap();
    assert_eq!(job.status, JobState::Reported);
    Transition::new(Role::Recorder, &job, version, JobState::Recorded)
        .lock(LockAction::Release(lock))
        .event("test-recorder", "record", "ok")
        .with_ops([Op::Delete {
            path: paths::lease(id),
            version: None,
        }])
        .commit(session)
        .await
        .expect("close job");
}

/// What the reaper does to an expired lease on an unlocked leased/researching job.
pub async fn expire(session: &Session, id: &str) {
    let lock = JobLock::try_acquire(session, id, "test-reaper")
        .await
        .unwrap()
        .expect("job is unlocked");
    let (job, version) = jobs::read(session, id).await.unwrap();
    Transition::new(Role::Reaper, &job, version, JobState::Expired)
        .failed()
        .lock(LockAction::Release(lock))
        .edit(|j| j.message = Some("lease expired".into()))
        .event("test-reaper", "expire", "lease expired")
        .with_ops([Op::Delete {
            path: paths::lease(id),
            version: None,
        }])
        .commit(session)
        .await
        .expect("expire job");
}

/// `archivist retry` as docs/protocol.md's admin section says: the failed job goes to
/// `resume_at(last_successful_status)`, retry_count + 1, with a fresh lease, in one multi.
pub async fn retry(session: &Session, id: &str) -> JobRecord {
    let (job, version) = jobs::read(session, id).await.unwrap();
    assert_eq!(job.status, JobState::Failed, "{job:#?}");
    let to = machine().resume_at(job.last_successful_status);
    let lease = LeaseRecord {
        schema: SCHEMA_VERSION,
        job: job.id.clone(),
        episode: job.episode.clone(),
        clips: job.clips.clone(),
        duration_ms: 60_000,
        holder: None,
        extensions: 0,
        prefer: None,
        prefer_until_ms: None,
    };
    let path = paths::lease(id);
    let (next, _) = Transition::new(Role::Admin, &job, version, to)
        .edit(|j| {
            j.retry_count += 1;
            j.message = None;
        })
        .event("test-admin", "retry", "ok")
        .with_ops([Op::Create {
            data: store::encode(&path, &lease).unwrap(),
            path,
            mode: Mode::Persistent,
        }])
        .commit(session)
        .await
        .expect("retry");
    next
}

/// Runs a Debian tool on `input`, returning its stdout (the hostile-server and body
/// tests encode their media with it).
pub fn tool(cmd: &mut std::process::Command, input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} not runnable ({e}); run scripts/deps.sh"));
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("tool ran");
    let _ = feeder.join();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `input` re-encoded by ffmpeg with `args` into `format`, through pipes.
pub fn ffmpeg_to(input: &[u8], format: &str, args: &[&str]) -> Vec<u8> {
    tool(
        std::process::Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-i", "pipe:0"])
            .args(args)
            .args(["-f", format, "pipe:1"]),
        input,
    )
}
