use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use archivist_db::catalog::{self, CatalogRecord};
use archivist_db::Database;
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::records::{
    CatalogFields, ClipRecord, EpisodeRecord, JobRecord, LeaseRecord, MemberRecord, ResearchRecord,
    ResearchRun,
};
use archivist_engine::schema::{JobState, SCHEMA_VERSION};
use archivist_engine::signal::{self, Signal};
use archivist_engine::{store, Session};
use archivist_planner::PlannerSettings;
use time::OffsetDateTime;

pub const DAY_MS: i64 = 86_400_000;
pub const BASE_MS: i64 = 1_700_000_000_000;

pub fn at(ms: i64) -> OffsetDateTime {
    archivist_engine::clock::to_datetime(ms)
}

pub fn fields(title: &str, priority: i64, curated_ms: i64) -> CatalogFields {
    CatalogFields {
        priority,
        // Re-curation moves this; the planner must not use it.
        last_curated: at(BASE_MS + 1000 * DAY_MS - curated_ms),
        ..archivist_testkit::catalog::fields(
            title,
            &format!("http://127.0.0.1:1/{title}.mp3"),
            at(curated_ms),
        )
    }
}

pub fn episode_id(n: u64) -> String {
    paths::episode_id(n)
}

/// A fresh ZooKeeper chroot and a fresh database, once per backend the machine offers
/// (SQLite always, PostgreSQL when `ARCHIVIST_TEST_PG` is set).
pub use archivist_testkit::db::fresh_stores as stores;

/// Stores a catalog record as curators do (the database, then `/signals/catalog`), and
/// its hold as operators do (`/control/hold/{id}`).
async fn put_record(session: &Session, db: &Database, record: CatalogRecord, held: bool) {
    let id = record.id().to_string();
    catalog::put(db, &[record]).await.unwrap();
    let hold = paths::hold(&id);
    if held {
        write(session, paths::HOLDS, b"").await;
        write(session, &hold, b"by: test\n").await;
    } else {
        store::delete_if_present(session, &hold).await.unwrap();
    }
    signal::bump(session, Signal::Catalog, "test")
        .await
        .unwrap();
}

pub async fn put_episode(
    session: &Session,
    db: &Database,
    n: u64,
    priority: i64,
    curated_ms: i64,
    held: bool,
) -> String {
    let id = episode_id(n);
    let record = EpisodeRecord {
        schema: SCHEMA_VERSION,
        id: id.clone(),
        air_date: None,
        fields: fields(&id, priority, curated_ms),
    };
    put_record(session, db, CatalogRecord::Episode(record), held).await;
    id
}

pub async fn put_clip(
    session: &Session,
    db: &Database,
    n: u32,
    priority: i64,
    curated_ms: i64,
    held: bool,
) -> String {
    let id = paths::clip_id(n);
    let record = ClipRecord {
        schema: SCHEMA_VERSION,
        id: id.clone(),
        fields: fields(&id, priority, curated_ms),
    };
    put_record(session, db, CatalogRecord::Clip(record), held).await;
    id
}

/// Stores research as the recorder does: the database (replacing the episode's
/// record), then `/signals/research`.
pub async fn put_research(session: &Session, db: &Database, episode: &str, clips: &[u32]) {
    let mut record = ResearchRecord::new(episode);
    if !clips.is_empty() {
        record.runs.push(ResearchRun {
            job: "j0000099999".into(),
            researcher: "test".into(),
            at: at(BASE_MS),
            clips: clips.iter().copied().collect(),
        });
    }
    archivist_db::research::update(db, episode, |r| *r = record)
        .await
        .unwrap();
    signal::bump(session, Signal::Research, "test")
        .await
        .unwrap();
}

pub async fn put_lease(
    session: &Session,
    job: &str,
    episode: &str,
    clips: &[u32],
    duration_ms: i64,
) {
    let record = LeaseRecord {
        schema: SCHEMA_VERSION,
        job: job.to_string(),
        episode: episode.to_string(),
        clips: clips.iter().map(|n| paths::clip_id(*n)).collect(),
        duration_ms,
        holder: Some("someone".into()),
        extensions: 0,
        prefer: None,
        prefer_until_ms: None,
    };
    let path = paths::lease(job);
    write(session, &path, &store::encode(&path, &record).unwrap()).await;
}

pub use archivist_testkit::write_node as write;

/// Registers a fake researcher (an ephemeral member node with `slots`) on `session`.
pub async fn register_researcher(session: &Session, name: &str, slots: u32) {
    let record = MemberRecord {
        schema: SCHEMA_VERSION,
        role: "researcher".into(),
        name: name.into(),
        slots,
        version: "test".into(),
        host: "test".into(),
        pid: 1,
        metrics: None,
        started: at(BASE_MS),
        work_item_ttl_ms: None,
    };
    let path = paths::researcher(name);
    ops::commit(
        session,
        &[Op::Create {
            path: path.clone(),
            data: store::encode(&path, &record).unwrap(),
            mode: Mode::Ephemeral,
        }],
    )
    .await
    .unwrap();
}

pub fn settings() -> PlannerSettings {
    PlannerSettings::default()
        .with_tick(Duration::from_millis(200))
        .with_max_clips(10)
}

pub async fn all_jobs(session: &Session) -> Vec<(JobRecord, i64)> {
    let mut out = Vec::new();
    for id in store::children(session, paths::JOBS).await.unwrap() {
        if let Some((job, stat)) = store::read::<JobRecord>(session, &paths::job(&id))
            .await
            .unwrap()
        {
            out.push((job, stat.ctime));
        }
    }
    out.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    out
}

pub async fn pending_len(session: &Session) -> u64 {
    archivist_planner::plan::count_pending(session, u64::MAX)
        .await
        .unwrap()
        .work as u64
}

/// Every inconsistency in the tree the planner writes: a job in no queue or in the wrong
/// one, a queue entry without its job, a pending job without its lease (or with a lease
/// on other work), a lease without its job, and any (episode, clip) in two live works.
pub async fn inconsistencies(session: &Session) -> Vec<String> {
    let mut problems = Vec::new();
    let jobs = all_jobs(session).await;
    let mut entries: BTreeMap<String, Vec<JobState>> = BTreeMap::new();
    for state in JobState::ALL {
        for name in store::children(session, &paths::queue(state))
            .await
            .unwrap()
        {
            match QueueEntry::parse(&name) {
                Ok(e) => entries.entry(e.job).or_default().push(state),
                Err(_) => problems.push(format!("bad queue entry {name}")),
            }
        }
    }
    let leases = store::children(session, paths::LEASES).await.unwrap();
    let mut pairs: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (job, _) in &jobs {
        match entries.get(&job.id).map(Vec::as_slice) {
            Some([s]) if *s == job.status => {}
            other => problems.push(format!(
                "{} is {} but queued in {other:?}",
                job.id, job.status
            )),
        }
        if job.status == JobState::Pending {
            match store::read::<LeaseRecord>(session, &paths::lease(&job.id))
                .await
                .unwrap()
            {
                Some((lease, _)) if lease.episode == job.episode && lease.clips == job.clips => {}
                Some(_) => problems.push(format!("{}: lease on other work", job.id)),
                None => problems.push(format!("{}: pending without its lease", job.id)),
            }
        }
        if matches!(
            job.status,
            JobState::Pending | JobState::Leased | JobState::Researching
        ) {
            for clip in &job.clips {
                pairs
                    .entry((job.episode.clone(), clip.clone()))
                    .or_default()
                    .push(job.id.clone());
            }
        }
    }
    for job in entries.keys() {
        if !jobs.iter().any(|(j, _)| &j.id == job) {
            problems.push(format!("queue entry for missing job {job}"));
        }
    }
    for lease in &leases {
        if !jobs.iter().any(|(j, _)| &j.id == lease) {
            problems.push(format!("lease {lease} without its job"));
        }
    }
    for ((episode, clip), holders) in pairs {
        if holders.len() > 1 {
            problems.push(format!(
                "({episode}, {clip}) in several live jobs: {holders:?}"
            ));
        }
    }
    problems
}

/// Every (episode, clip) pair any job was ever created for, with multiplicity.
pub async fn planned_pairs(session: &Session) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for (job, _) in all_jobs(session).await {
        for clip in job.clips {
            *out.entry((job.episode.clone(), clip)).or_insert(0) += 1;
        }
    }
    out
}

pub fn all_pairs(episodes: &[String], clips: &[String]) -> BTreeSet<(String, String)> {
    episodes
        .iter()
        .flat_map(|e| clips.iter().map(move |c| (e.clone(), c.clone())))
        .collect()
}
