//! `status`: researchers and their load, jobs per state, leases, catalog size, research
//! progress, the oldest waiting job and batch progress, as one serialisable report.

use std::collections::{BTreeMap, BTreeSet};

use archivist_engine::schema::records::MemberRecord;
use archivist_engine::schema::records::{BatchRecord, JobRecord, LeaseRecord};
use archivist_engine::schema::{paths, BatchState, JobState};
use archivist_engine::{clock, leader, member, queue, store, Session};
use serde::Serialize;

use archivist_db::Database;
use archivist_db::{catalog, research};
use archivist_engine::schema::clipset::ClipSet;
use archivist_engine::schema::records::AliasTarget;

use crate::control::{self, PauseReport};
use crate::error::{AdminError, Result};
use crate::jobs::LeaseView;
use crate::scan::{self, count_children};
use crate::settings::{AdminSettings, Progress, Silent};

/// A live researcher and the jobs it works on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResearcherLoad {
    /// Identity.
    pub name: String,
    /// Host.
    pub host: String,
    /// archivist version.
    pub version: String,
    /// Jobs it runs at once.
    pub slots: u32,
    /// Jobs in `leased`/`researching` whose holder is this researcher.
    pub load: usize,
    /// Those jobs.
    pub jobs: Vec<String>,
}

/// A job a researcher is working on, with its progress (weighted steps, only forward).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActiveJob {
    /// Job id.
    pub job: String,
    /// Episode.
    pub episode: String,
    /// `leased` (downloading, decoding) or `researching` (matching clips).
    pub state: JobState,
    /// The researcher holding it.
    pub holder: Option<String>,
    /// Fraction done in [0, 1].
    pub progress: f64,
    /// Clips reported so far, of `clips`.
    pub clips_done: u32,
    /// Clips in the job.
    pub clips: usize,
    /// Bytes downloaded so far.
    pub bytes: u64,
}

/// Another live daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DaemonView {
    /// Identity.
    pub name: String,
    /// Role.
    pub role: String,
    /// Host.
    pub host: String,
    /// archivist version.
    pub version: String,
}

/// Leases by state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseSummary {
    /// Leases not yet expired (valid ones only).
    pub active: usize,
    /// Leases whose duration is invalid (not positive, or over the 30-day maximum):
    /// counted neither active nor expired; `fsck` reports them (`lease_invalid`, or
    /// `lease_without_job` first when their job is gone).
    pub invalid: usize,
    /// Leases whose data does not decode: counted neither active nor expired (the
    /// planner holds the job's pairs until the node's creation plus the work-item TTL;
    /// `fsck` reports them `unparsable`). Shown as expired before (outside 17d finding 17).
    pub undecodable: Vec<String>,
    /// Leases whose job does not exist (left by a `deleteall /jobs/J`, a partial restore,
    /// or made by hand): counted apart from the others, whatever their duration says
    /// (outside 17h F8: shown as ordinary "active" leases). The planner holds their
    /// pairs only until the node's creation plus the work-item TTL, the reaper removes
    /// them, `fsck` reports `lease_without_job`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub without_job: Vec<String>,
    /// Leases past expiry (the reaper revokes them).
    pub expired: usize,
    /// The expired ones.
    pub expired_leases: Vec<LeaseView>,
}

/// Catalog size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CatalogSize {
    /// Episodes.
    pub episodes: usize,
    /// Clips.
    pub clips: usize,
}

/// Research progress of one episode.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct EpisodeProgress {
    /// Episode id.
    pub episode: String,
    /// Title.
    pub title: String,
    /// Catalog clips researched in it.
    pub researched: usize,
    /// Catalog clips.
    pub clips: usize,
    /// Clips found in it.
    pub found: usize,
    /// researched / clips.
    pub fraction: f64,
    /// Held by an operator.
    pub held: bool,
}

/// Research progress overall.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResearchProgress {
    /// (episode, clip) pairs of the catalog researched.
    pub researched_pairs: u64,
    /// episodes x clips.
    pub total_pairs: u64,
    /// researched / total (1 when there is nothing to research).
    pub fraction: f64,
    /// Pairs where the clip was found.
    pub found_pairs: u64,
    /// Episodes with a research record.
    pub episodes_with_research: usize,
    /// Episodes' pinned audio, and those whose server started serving other audio
    /// (docs/researcher.md, "Renditions and the media store").
    pub renditions: RenditionCounts,
    /// Research records that do not decode, with why: not counted above (what they
    /// hold is unknown), and left out of planning until repaired (`fsck` lists them).
    pub unreadable: Vec<Unreadable>,
    /// Per episode, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_episode: Option<Vec<EpisodeProgress>>,
}

/// Renditions in `status`: the episodes pinned to the audio they are researched on, those
/// whose audio changed at some time, and those whose server serves other audio now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RenditionCounts {
    /// Episodes with a pinned rendition.
    pub pinned: i64,
    /// Episodes with more than one rendition (their audio changed at some time).
    pub changed: i64,
    /// Pinned episodes whose server, when last asked, served other audio than the pin.
    pub serving_other: i64,
}

/// A record that exists but does not decode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    /// Where it is: a ZooKeeper path, or for research in the database
    /// `database research of {episode}` ([`archivist_db::research::place`]).
    pub path: String,
    /// Why it does not decode.
    pub error: String,
}

impl Unreadable {
    /// Every node of a scan whose record did not decode.
    pub fn of<T>(loaded: &[scan::Loaded<T>]) -> Vec<Unreadable> {
        loaded
            .iter()
            .filter_map(|n| {
                n.record.as_ref().err().map(|e| Unreadable {
                    path: n.path.clone(),
                    error: e.to_string(),
                })
            })
            .collect()
    }
}

/// The job that has waited longest in `pending`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiting {
    /// Job id.
    pub job: String,
    /// Its priority.
    pub priority: i64,
    /// ms since the job was created (ZooKeeper's clock), never negative.
    pub waiting_ms: i64,
    /// Set when the job is newer than the clock `status` judges by (`/clock`'s last
    /// stamp, a lower bound of ZooKeeper's time): by how many ms. `waiting_ms` is then 0
    /// ("just now"), not a negative wait (outside 17h F6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_behind_ms: Option<i64>,
    /// Its place in processing order (0: next).
    pub position: usize,
    /// Why its record does not decode, if it does not (no daemon can act on it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// A waiting job whose record does not decode: no researcher can claim it; the
/// work-item TTL expires it by its node's age (`archivist_engine::lease`), or
/// `archivist delete J --force` removes it at once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnreadableWaiting {
    /// Job id.
    pub job: String,
    /// Why its record does not decode.
    pub error: String,
}

/// A job outside `pending` whose record does not decode: its state is only known from
/// the queue it is in, no daemon can move it (the reaper cannot expire it, a researcher
/// cannot record its failure), so `status` names it rather than counting it silently.
/// `archivist fsck` reports it `unparsable`; `archivist delete J --force` removes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnreadableJob {
    /// Job id.
    pub job: String,
    /// The queue it is in.
    pub queue: JobState,
    /// Why its record does not decode.
    pub error: String,
}

/// One batch's progress (pairs done / total), as its batcher last saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchLine {
    /// Batch id.
    pub id: String,
    /// Name, if any.
    pub name: Option<String>,
    /// State.
    pub status: BatchState,
    /// Pairs recorded or failed.
    pub done: u64,
    /// Pairs failed.
    pub failed: u64,
    /// All pairs.
    pub total: u64,
    /// done / total (1 when there are no pairs).
    pub fraction: f64,
}

/// Batches that are not deleted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchesStatus {
    /// Whether the collection-wide batch hold is on.
    pub held: bool,
    /// One line per batch, oldest first.
    pub batches: Vec<BatchLine>,
}

/// `status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    /// The tree's chroot.
    pub chroot: String,
    /// ZooKeeper's clock as the daemons last stamped it on `/clock` (read without
    /// writing; a lower bound, seconds behind at most while a planner or reaper runs).
    pub now_ms: i64,
    /// Set when `/clock` is missing (deleted by hand): `now_ms` is this host's clock and
    /// the note says to run `archivist init`. The rest of the view is shown all the same
    /// (it refused entirely before: outside 17d finding 16e).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_note: Option<String>,
    /// Live researchers.
    pub researchers: Vec<ResearcherLoad>,
    /// Jobs in `leased` or `researching`, with their progress.
    pub active_jobs: Vec<ActiveJob>,
    /// Sum of their slots.
    pub slots: u64,
    /// Other live daemons.
    pub daemons: Vec<DaemonView>,
    /// Who leads each election (`planner`, `reaper`): the name in the live candidate
    /// that leads ([`leader::leader_node`]), or `None` when no live daemon is a
    /// candidate (nothing is planned or reaped). Before, a daemon listed as running was
    /// taken for the leader while a hand-made node blocked the election (outside 17i G1).
    pub leaders: BTreeMap<String, Option<String>>,
    /// Jobs per state: the entries of each queue that are work (the planner's count for
    /// `pending`, [`queue::count_work`] for every queue: the name parses, the job exists,
    /// and the entry is its own in that state; a stray or a duplicate is not a job).
    pub jobs: BTreeMap<JobState, usize>,
    /// Entries of `/queues/pending` that are not work (not a queue entry's name, or no
    /// such job): left out of `jobs`, as the planner leaves them out.
    pub pending_strays: Vec<String>,
    /// The same for every other queue: entries left out of `jobs` (the reaper removes the
    /// proven ones of [`queue::STRAY_CHECKED`], `fsck --repair` the rest). Only states
    /// with strays are listed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub queue_strays: BTreeMap<JobState, Vec<String>>,
    /// Paused states.
    pub paused: Vec<PauseReport>,
    /// Nodes under `/control/pause` that pause nothing (not a state daemons claim from).
    pub ignored_pauses: Vec<String>,
    /// Leases.
    pub leases: LeaseSummary,
    /// Reports waiting for a recorder.
    pub reports_waiting: usize,
    /// Catalog size.
    pub catalog: CatalogSize,
    /// Research progress.
    pub research: ResearchProgress,
    /// The oldest waiting job.
    pub oldest_waiting: Option<Waiting>,
    /// Waiting jobs whose record does not decode.
    pub unreadable_waiting: Vec<UnreadableWaiting>,
    /// Jobs in any other queue whose record does not decode.
    pub unreadable_jobs: Vec<UnreadableJob>,
    /// Batch progress.
    pub batches: BatchesStatus,
}

/// The leases among `views` whose job does not exist (read pipelined, in chunks).
async fn jobless(session: &Session, views: &[LeaseView]) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for chunk in views.chunks(256) {
        let stats: Vec<_> = chunk
            .iter()
            .map(|v| session.client().check_stat(&paths::job(&v.job)))
            .collect();
        for (view, stat) in chunk
            .iter()
            .zip(archivist_engine::ops::await_all(stats).await)
        {
            let stat = stat.map_err(|e| {
                archivist_engine::EngineError::zk("exists", paths::job(&view.job), e)
            })?;
            if stat.is_none() {
                found.push(view.job.clone());
            }
        }
    }
    Ok(found)
}

/// A sink for the per-episode rows of `status --episodes`.
pub type EpisodeSink<'a> = &'a mut (dyn FnMut(EpisodeProgress) -> Result<()> + Send);

/// Builds the status report. `per_episode` adds a row per catalog episode, in memory
/// (tests and small catalogs; the CLI hands them to a sink with [`status_each`]).
pub async fn status(
    session: &Session,
    db: &Database,
    settings: &AdminSettings,
    per_episode: bool,
    progress: &dyn Progress,
) -> Result<StatusReport> {
    if !per_episode {
        return status_each(session, db, settings, None, progress).await;
    }
    let mut rows = Vec::new();
    let mut report = status_each(
        session,
        db,
        settings,
        Some(&mut |row| {
            rows.push(row);
            Ok(())
        }),
        progress,
    )
    .await?;
    report.research.per_episode = Some(rows);
    Ok(report)
}

/// [`status`], each per-episode row handed to `per_episode` as it is made (catalog
/// order) instead of collected, so `status --episodes` keeps flat memory at any catalog
/// size (outside 22 finding 9); the report's `per_episode` stays `None`.
pub async fn status_each(
    session: &Session,
    db: &Database,
    settings: &AdminSettings,
    per_episode: Option<EpisodeSink<'_>>,
    progress: &dyn Progress,
) -> Result<StatusReport> {
    // Read-only: ZooKeeper's clock as daemons last stamped it (no write, so the
    // read-only role can run `status`).
    let (now_ms, clock_note) = match clock::observed_ms(session).await {
        Ok(ms) => (ms, None),
        Err(archivist_engine::EngineError::NotInitialised { missing, .. }) => (
            clock::to_unix_ms(clock::stamp_now()),
            Some(format!(
                "{missing} is missing (deleted by hand?): run `archivist init`; times below are by this host's clock, and the planner and reaper fail until it is back"
            )),
        ),
        Err(e) => return Err(e.into()),
    };
    let mut jobs = BTreeMap::new();
    // The planner's rule for waiting work, so status and planner agree on "pending";
    // the same rule for every other queue (the reaper's gauge and removal, `jobs list`):
    // an entry counts when it is its job's own entry in that state
    // (`queue::is_its_entry`); strays and duplicates are named apart.
    let pending = queue::count_work(session, JobState::Pending, usize::MAX).await?;
    jobs.insert(JobState::Pending, pending.work);
    let mut queue_strays = BTreeMap::new();
    for state in JobState::ALL {
        if state == JobState::Pending {
            continue;
        }
        let count = queue::count_work(session, state, usize::MAX).await?;
        jobs.insert(state, count.work);
        if !count.strays.is_empty() {
            queue_strays.insert(state, count.strays);
        }
    }

    // Researchers and their load: jobs being worked on, by holder.
    let mut working: Vec<String> = Vec::new();
    for state in [JobState::Leased, JobState::Researching] {
        let (entries, _) = queue::list(session, state).await?;
        working.extend(entries.into_iter().map(|e| paths::job(&e.job)));
    }
    let working = scan::load::<JobRecord>(session, working, settings, &Silent, "jobs").await?;
    let mut by_holder: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let active_jobs = working
        .iter()
        .filter_map(|n| n.ok())
        .map(|job| ActiveJob {
            job: job.id.clone(),
            episode: job.episode.clone(),
            state: job.status,
            holder: job.holder.clone(),
            progress: job.progress.fraction,
            clips_done: job.progress.clips_done,
            clips: job.clips.len(),
            bytes: job.progress.bytes,
        })
        .collect();
    for job in working.iter().filter_map(|n| n.ok()) {
        if let Some(holder) = &job.holder {
            by_holder
                .entry(holder.clone())
                .or_default()
                .push(job.id.clone());
        }
    }
    let researchers: Vec<ResearcherLoad> = member::list(session, paths::RESEARCHERS)
        .await?
        .into_iter()
        .map(|m| {
            let jobs = by_holder.get(&m.name).cloned().unwrap_or_default();
            ResearcherLoad {
                load: jobs.len(),
                jobs,
                name: m.name,
                host: m.host,
                version: m.version,
                slots: m.slots,
            }
        })
        .collect();
    let slots = researchers.iter().map(|r| u64::from(r.slots)).sum();
    let daemons = member::list(session, paths::DAEMONS)
        .await?
        .into_iter()
        .map(|m| DaemonView {
            name: m.name,
            role: m.role,
            host: m.host,
            version: m.version,
        })
        .collect();

    let leaders = leaders(session).await?;

    let leases = scan::load_dir::<LeaseRecord>(session, paths::LEASES, settings, progress).await?;
    let views: Vec<LeaseView> = leases.iter().map(|l| LeaseView::of(l, now_ms)).collect();
    let without_job = jobless(session, &views).await?;
    let views: Vec<LeaseView> = views
        .into_iter()
        .filter(|v| !without_job.contains(&v.job))
        .collect();
    let invalid = views.iter().filter(|v| v.invalid.is_some()).count();
    let undecodable: Vec<String> = views
        .iter()
        .filter(|v| v.error.is_some())
        .map(|v| v.job.clone())
        .collect();
    let expired_leases: Vec<LeaseView> = views
        .iter()
        .filter(|v| v.expired && v.invalid.is_none() && v.error.is_none())
        .cloned()
        .collect();
    let leases = LeaseSummary {
        active: views.len() - expired_leases.len() - invalid - undecodable.len(),
        invalid,
        undecodable,
        without_job,
        expired: expired_leases.len(),
        expired_leases,
    };

    // The catalog lives in the database (issue 22).
    let counts = catalog::counts(db).await?;
    let catalog = CatalogSize {
        episodes: counts.episodes as usize,
        clips: counts.clips as usize,
    };
    let research = research_progress(session, db, settings, per_episode, progress).await?;
    let (oldest_waiting, unreadable_waiting) =
        waiting(session, settings, now_ms, &pending.strays).await?;

    Ok(StatusReport {
        chroot: session.chroot().to_string(),
        now_ms,
        clock_note,
        researchers,
        active_jobs,
        slots,
        daemons,
        leaders,
        jobs,
        pending_strays: pending.strays,
        queue_strays,
        paused: control::pauses(session).await?,
        ignored_pauses: control::ignored_pauses(session).await?,
        leases,
        reports_waiting: count_children(session, paths::REPORTS).await?,
        catalog,
        research,
        oldest_waiting,
        unreadable_waiting,
        unreadable_jobs: unreadable_jobs(session, settings).await?,
        batches: batches(session, settings, progress).await?,
    })
}

/// Progress of every batch that is not deleted (unreadable records are left out).
pub async fn batches(
    session: &Session,
    settings: &AdminSettings,
    progress: &dyn Progress,
) -> Result<BatchesStatus> {
    let records =
        scan::load_dir::<BatchRecord>(session, paths::BATCHES, settings, progress).await?;
    let batches = records
        .iter()
        .filter_map(|n| n.ok())
        .filter(|b| b.status != BatchState::Deleted)
        .map(|b| BatchLine {
            id: b.id.clone(),
            name: b.name.clone(),
            status: b.status,
            done: b.progress.done(),
            failed: b.progress.failed,
            total: b.progress.total,
            fraction: fraction(b.progress.done(), b.progress.total),
        })
        .collect();
    Ok(BatchesStatus {
        held: store::exists(session, paths::HOLD_BATCHES).await?.is_some(),
        batches,
    })
}

/// Pairs researched over episodes x clips of the catalog (research of clips or episodes
/// no longer in the catalog does not count).
pub async fn research_progress(
    session: &Session,
    db: &Database,
    settings: &AdminSettings,
    per_episode: Option<EpisodeSink<'_>>,
    progress: &dyn Progress,
) -> Result<ResearchProgress> {
    let clip_ids: BTreeSet<String> = catalog::ids(db, AliasTarget::Clip)
        .await?
        .into_iter()
        .collect();
    let clip_numbers: ClipSet = clip_ids
        .iter()
        .filter_map(|c| paths::clip_number(c))
        .collect();
    let episode_ids = catalog::ids(db, AliasTarget::Episode).await?;
    // The archive a page of episodes at a time (bounded memory at any size); only the
    // two counts per episode are kept.
    let mut by_episode: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut unreadable = Vec::new();
    progress.begin(
        "research",
        research::counts(db).await?.episodes.max(0) as u64,
    );
    let mut after: Option<String> = None;
    loop {
        let page = research::page_each(db, after.as_deref(), settings.batch_size.max(1)).await?;
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        progress.advance(page.len() as u64);
        for (episode, read) in page {
            let record = match read {
                Ok(record) => record,
                Err(e) => {
                    unreadable.push(Unreadable {
                        path: research::place(&episode),
                        error: e.to_string(),
                    });
                    continue;
                }
            };
            let researched = record.researched().count_in(&clip_numbers);
            let found = record
                .found
                .iter()
                .filter(|(clip, occ)| !occ.is_empty() && clip_ids.contains(*clip))
                .count();
            by_episode.insert(episode, (researched, found));
        }
    }
    progress.end();
    let episodes: BTreeSet<&String> = episode_ids.iter().collect();
    let (mut researched_pairs, mut found_pairs) = (0u64, 0u64);
    for (episode, (r, f)) in &by_episode {
        if episodes.contains(episode) {
            researched_pairs += *r as u64;
            found_pairs += *f as u64;
        }
    }
    let total_pairs = episode_ids.len() as u64 * clip_numbers.len() as u64;
    if let Some(sink) = per_episode {
        // Titles from the database, a page of the catalog at a time; holds from
        // `/control/hold` (issue 22). A tree made before holds moved there has none.
        let holds: BTreeSet<String> = if store::exists(session, paths::HOLDS).await?.is_some() {
            store::children(session, paths::HOLDS)
                .await?
                .into_iter()
                .collect()
        } else {
            BTreeSet::new()
        };
        let clips = clip_numbers.len();
        let mut failed: Option<AdminError> = None;
        catalog::each_record(db, AliasTarget::Episode, |page| {
            for record in page {
                if failed.is_some() {
                    return;
                }
                let archivist_db::catalog::CatalogRecord::Episode(e) = record else {
                    continue;
                };
                let (researched, found) = by_episode.get(&e.id).copied().unwrap_or((0, 0));
                let row = EpisodeProgress {
                    held: holds.contains(&e.id),
                    episode: e.id,
                    title: e.fields.title,
                    researched,
                    clips,
                    found,
                    fraction: fraction(researched as u64, clips as u64),
                };
                if let Err(err) = sink(row) {
                    failed = Some(err);
                }
            }
        })
        .await?;
        if let Some(err) = failed {
            return Err(err);
        }
    }
    Ok(ResearchProgress {
        researched_pairs,
        total_pairs,
        fraction: fraction(researched_pairs, total_pairs),
        found_pairs,
        episodes_with_research: by_episode.len(),
        renditions: {
            let c = archivist_db::renditions::counts(db).await?;
            RenditionCounts {
                pinned: c.pinned,
                changed: c.changed,
                serving_other: c.serving_other,
            }
        },
        unreadable,
        per_episode: None,
    })
}

fn fraction(done: u64, total: u64) -> f64 {
    if total == 0 {
        1.0
    } else {
        done as f64 / total as f64
    }
}

/// Every job outside `pending` whose record does not decode, by the queue it is in
/// (outside 17d finding 5: a `leased` job hand-edited to garbage was only a count, and
/// the "In progress" table left it out without a word).
async fn unreadable_jobs(
    session: &Session,
    settings: &AdminSettings,
) -> Result<Vec<UnreadableJob>> {
    let mut out = Vec::new();
    for state in JobState::ALL {
        if state == JobState::Pending {
            continue;
        }
        let (entries, _) = queue::list(session, state).await?;
        let job_paths: Vec<String> = entries.iter().map(|e| paths::job(&e.job)).collect();
        let loaded = scan::load::<JobRecord>(session, job_paths, settings, &Silent, "jobs").await?;
        out.extend(loaded.iter().filter_map(|l| {
            l.record.as_ref().err().map(|e| UnreadableJob {
                job: l.name.clone(),
                queue: state,
                error: e.to_string(),
            })
        }));
    }
    Ok(out)
}

/// The pending job created longest ago (queue order is by priority, so this is not
/// necessarily the next one served), saying whether its record decodes.
pub async fn oldest_waiting(
    session: &Session,
    settings: &AdminSettings,
    now_ms: i64,
) -> Result<Option<Waiting>> {
    let pending = queue::count_work(session, JobState::Pending, usize::MAX).await?;
    Ok(waiting(session, settings, now_ms, &pending.strays).await?.0)
}

/// How long a job created at `ctime_ms` has waited at `now_ms`, never negative, and by
/// how much `now_ms` is behind its creation when it is (`/clock`'s last stamp can be
/// older than a job the planner just created).
pub fn waited(now_ms: i64, ctime_ms: i64) -> (i64, Option<i64>) {
    let waited = now_ms.saturating_sub(ctime_ms);
    if waited < 0 {
        (0, Some(waited.saturating_neg()))
    } else {
        (waited, None)
    }
}

/// The oldest waiting job, and every waiting job whose record does not decode: no
/// daemon can claim, expire or move such a job (its state cannot be read), so it would
/// wait for ever while status showed it as plain waiting work. `strays` are the entries
/// [`queue::count_work`] found not to be work (a recorded job's entry copied into
/// `/queues/pending` is not a waiting job).
async fn waiting(
    session: &Session,
    settings: &AdminSettings,
    now_ms: i64,
    strays: &[String],
) -> Result<(Option<Waiting>, Vec<UnreadableWaiting>)> {
    let (mut entries, _) = queue::list(session, JobState::Pending).await?;
    let strays: std::collections::BTreeSet<&str> = strays.iter().map(String::as_str).collect();
    entries.retain(|e| !strays.contains(e.name().as_str()));
    let job_paths: Vec<String> = entries.iter().map(|e| paths::job(&e.job)).collect();
    let loaded =
        scan::load::<JobRecord>(session, job_paths.clone(), settings, &Silent, "jobs").await?;
    let unreadable: Vec<UnreadableWaiting> = loaded
        .iter()
        .filter_map(|l| {
            l.record.as_ref().err().map(|e| UnreadableWaiting {
                job: l.name.clone(),
                error: e.to_string(),
            })
        })
        .collect();
    let oldest = loaded
        .iter()
        .filter_map(|l| {
            let position = job_paths.iter().position(|p| *p == l.path)?;
            Some((position, l))
        })
        .min_by_key(|(_, l)| l.stat.ctime_ms)
        .map(|(position, l)| Waiting {
            job: l.name.clone(),
            priority: entries[position].priority,
            waiting_ms: waited(now_ms, l.stat.ctime_ms).0,
            clock_behind_ms: waited(now_ms, l.stat.ctime_ms).1,
            position,
            unreadable: l.record.as_ref().err().map(|e| e.to_string()),
        });
    Ok((oldest, unreadable))
}

/// Who leads each role's election under `/election`: the name recorded in its leading
/// live candidate (the node's name when its record does not decode), `None` when the
/// role has no live candidate.
async fn leaders(session: &Session) -> Result<BTreeMap<String, Option<String>>> {
    let mut out = BTreeMap::new();
    for role in store::children(session, paths::ELECTION).await? {
        let Some(node) = leader::leader_node(session, &role).await? else {
            out.insert(role, None);
            continue;
        };
        let path = format!("{}/{node}", paths::election(&role));
        let name = match store::read_raw(session, &path).await? {
            Some((bytes, _)) => {
                archivist_engine::schema::records::decode::<MemberRecord>(&path, &bytes)
                    .map(|m| m.name)
                    .unwrap_or(node)
            }
            // Gone meanwhile: the next candidate leads; a later look names it.
            None => node,
        };
        out.insert(role, Some(name));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside 17h F6: `status` printed "waiting -598ms" for a job newer than `/clock`'s
    /// last stamp. The wait is clamped to 0 and the lag is said.
    #[test]
    fn a_job_newer_than_the_clock_waited_no_time_and_the_lag_is_said() {
        assert_eq!(waited(10_000, 4_000), (6_000, None));
        assert_eq!(waited(10_000, 10_000), (0, None));
        assert_eq!(waited(10_000, 10_598), (0, Some(598)));
    }
}
