//! Filling the index from the database and ZooKeeper and keeping it current.
//!
//! [`load`] reads the catalog from the database (a page at a time, in `seq` order, up to
//! the catalog's last `seq`, which becomes the watermark) and the research archive (a
//! page of episodes at a time, in episode order, after reading the research watermark
//! first), then the holds, leases and blocking jobs from ZooKeeper, many reads in flight
//! at a time (ZooKeeper pipelining). [`apply`] handles one watch event: a catalog or
//! research signal reads the rows changed after its watermark ([`read_catalog`],
//! [`read_research`]); any other event re-reads the node it names. So replaying an
//! event, or seeing an event for a change the load already saw, leaves the index the
//! same. Unreadable records are logged and skipped: one bad record must not stop
//! planning for everything else.

use std::collections::BTreeSet;

use archivist_db::catalog::{self, CatalogRecord, EpisodeSummary, Versioned};
use archivist_db::research;
use archivist_db::{Database, DbError};
use archivist_engine::schema::paths;
use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::records::{self, clip_stamp, JobRecord, LeaseRecord, Record};
use archivist_engine::schema::JobState;
use archivist_engine::signal::Signal;
use archivist_engine::zk;
use archivist_engine::{store, EngineError, Session};

use crate::index::{ClipInfo, EpisodeInfo, ErrorMark, Index};

/// Job states whose jobs keep their clips out of planning (besides leases): waiting,
/// held by an operator, failed and waiting for an operator, or cancelled by one. An
/// operator's `cancel` means "stop this work and do not plan these pairs again"; the
/// cancelled job stays (the reaper keeps it, like a failed one) until an operator
/// deletes it, which lets the planner plan its unrecorded pairs again.
pub const BLOCKING_STATES: [JobState; 4] = [
    JobState::Pending,
    JobState::Held,
    JobState::Failed,
    JobState::Cancelled,
];

/// Reads in flight at once while loading.
const BATCH: usize = 1_000;

/// Episodes' research read from the database per page (memory stays bounded by the
/// page, not the archive).
const RESEARCH_PAGE: usize = 500;

/// What a watched path is, for the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// `/signals/catalog` or `/signals/research`: the database changed.
    Signal(Signal),
    /// `/control/hold/{id}`: an operator's hold of an episode or clip.
    Hold(String),
    /// `/leases/{job}`
    Lease(String),
    /// `/queues/{state}/{entry}`
    QueueEntry(JobState, String),
    /// `/researchers/{member}`
    Researcher,
    /// Anything else (directories, aliases).
    Other,
}

/// Classifies a path relative to the chroot.
pub fn classify(path: &str) -> Node {
    let child = |dir: &str| {
        path.strip_prefix(dir)
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|name| !name.is_empty() && !name.contains('/'))
            .map(str::to_string)
    };
    if let Some(signal) = Signal::of_path(path) {
        return Node::Signal(signal);
    }
    if let Some(id) = child(paths::HOLDS) {
        return Node::Hold(id);
    }
    if let Some(id) = child(paths::LEASES) {
        return Node::Lease(id);
    }
    if child(paths::RESEARCHERS).is_some() {
        return Node::Researcher;
    }
    if let Some(rest) = path.strip_prefix("/queues/") {
        if let Some((state, entry)) = rest.split_once('/') {
            if let Ok(state) = state.parse::<JobState>() {
                if !entry.is_empty() && !entry.contains('/') {
                    return Node::QueueEntry(state, entry.to_string());
                }
            }
        }
    }
    Node::Other
}

fn decode<T: Record>(path: &str, bytes: &[u8]) -> Option<T> {
    match records::decode::<T>(path, bytes) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(error = %e, "unreadable record; the planner ignores it");
            None
        }
    }
}

fn unix_ms(t: time::OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

fn clip_numbers(ids: &[String]) -> Vec<u32> {
    ids.iter().filter_map(|id| paths::clip_number(id)).collect()
}

/// Reads many nodes with their stats, `BATCH` in flight at a time; missing nodes are
/// `None`.
async fn read_many(
    session: &Session,
    node_paths: Vec<String>,
) -> Result<Vec<(String, Option<(Vec<u8>, zk::Stat)>)>, EngineError> {
    let mut out = Vec::with_capacity(node_paths.len());
    for chunk in node_paths.chunks(BATCH) {
        let futures: Vec<_> = chunk.iter().map(|p| session.client().get_data(p)).collect();
        let results = archivist_engine::ops::await_all(futures).await;
        for (path, result) in chunk.iter().zip(results) {
            match result {
                Ok(found) => out.push((path.clone(), Some(found))),
                Err(zk::Error::NoNode) => out.push((path.clone(), None)),
                Err(e) => return Err(EngineError::zk("get", path.clone(), e)),
            }
        }
    }
    Ok(out)
}

async fn children_paths(session: &Session, dir: &str) -> Result<Vec<String>, EngineError> {
    Ok(store::children(session, dir)
        .await?
        .into_iter()
        .map(|c| format!("{dir}/{c}"))
        .collect())
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A database error on its way through the engine (the planner's rounds speak
/// [`EngineError`]); its type is kept ([`EngineError::daemon`]).
pub(crate) fn db_error(err: DbError) -> EngineError {
    EngineError::daemon(crate::error::PlannerError::Db(err))
}

/// The holds in force: ids of held episodes and clips (`/control/hold/*`).
pub type Holds = BTreeSet<String>;

fn put_episode(index: &mut Index, holds: &Holds, e: EpisodeSummary) {
    index.upsert_episode(
        &e.id,
        EpisodeInfo {
            priority: e.priority,
            curated_ms: e.initial_curated_ms,
            held: holds.contains(&e.id),
            media_url: e.media_url,
        },
    )
}

fn put_clip(index: &mut Index, holds: &Holds, v: Versioned) {
    let CatalogRecord::Clip(r) = v.record else {
        return;
    };
    let Some(number) = paths::clip_number(&r.id) else {
        tracing::warn!(clip = %r.id, "clip id is not c + number; the planner ignores it");
        return;
    };
    index.set_clip_stamp(number, clip_stamp(&r.fields), r.fields.last_curated);
    index.upsert_clip(
        number,
        ClipInfo {
            priority: r.fields.priority,
            curated_ms: unix_ms(r.fields.initial_curated),
            held: holds.contains(&r.id),
            id: r.id,
        },
    )
}

/// Applies a hold (or its release) of an episode or clip the index knows.
pub fn put_hold(index: &mut Index, id: &str, held: bool) {
    if let Some(number) = paths::clip_number(id) {
        if let Some(mut info) = index.clip_info(number).cloned() {
            info.held = held;
            index.upsert_clip(number, info);
        }
    } else if let Some(mut info) = index.episode_info(id).cloned() {
        info.held = held;
        index.upsert_episode(id, info);
    }
}

/// Reads the catalog rows committed after `after` into the index (clips first: an
/// episode's free count needs the active clips) and returns the new watermark, the
/// catalog's last `seq` read before the rows (see `archivist_db::catalog`).
pub async fn read_catalog(
    db: &Database,
    index: &mut Index,
    holds: &Holds,
    after: i64,
) -> Result<i64, EngineError> {
    let upto = catalog::last_seq(db).await.map_err(db_error)?;
    if upto <= after {
        return Ok(after);
    }
    catalog::clips_since(db, after, upto, |page| {
        for v in page {
            put_clip(index, holds, v);
        }
    })
    .await
    .map_err(db_error)?;
    catalog::episodes_since(db, after, upto, |page| {
        for e in page {
            put_episode(index, holds, e);
        }
    })
    .await
    .map_err(db_error)?;
    Ok(upto)
}

fn put_research(index: &mut Index, (episode, read): research::EachRecord) {
    match read {
        Ok(r) => {
            let errors = r
                .errors
                .keys()
                .filter_map(|clip| {
                    let number = paths::clip_number(clip)?;
                    Some(ErrorMark {
                        clip: number,
                        stamp: r.error_stamps.get(clip).cloned(),
                        run_at: r.run_at(number),
                    })
                })
                .collect();
            index.set_research_with_errors(
                &episode,
                r.runs.iter().flat_map(|run| run.clips.iter()),
                errors,
            )
        }
        Err(e) => {
            // Unknown research is not "nothing researched": planning its pairs again
            // would loop (the recorder cannot store into it either). Leave the episode
            // out and say why; `fsck` and `status` report the record too. The planner
            // reads it again when it changes or at its next load.
            tracing::error!(episode, error = %e, "unreadable research record: the episode is left out of planning until it is repaired (see `archivist fsck`; restart the planner after a repair by hand)");
            metrics::counter!("archivist_planner_unreadable_research_total").increment(1);
            index.set_research_unreadable(&episode);
        }
    }
}

/// Reads the research archive into the index, a page of episodes at a time, and
/// returns the watermark read before the first page. An episode written during the
/// load is read either way (its key does not move), and again from the watermark at the
/// next [`read_research`].
async fn load_research(db: &Database, index: &mut Index) -> Result<i64, EngineError> {
    let watermark = research::last_seq(db).await.map_err(db_error)?;
    let mut after: Option<String> = None;
    loop {
        let page = research::page_each(db, after.as_deref(), RESEARCH_PAGE)
            .await
            .map_err(db_error)?;
        let full = page.len() >= RESEARCH_PAGE;
        for each in page {
            after = Some(each.0.clone());
            put_research(index, each);
        }
        if !full {
            return Ok(watermark);
        }
    }
}

/// Reads the research changed after the watermark `after` into the index and returns
/// the new watermark (the research `seq` read before the rows, as [`read_catalog`]).
pub async fn read_research(
    db: &Database,
    index: &mut Index,
    after: i64,
) -> Result<i64, EngineError> {
    let upto = research::last_seq(db).await.map_err(db_error)?;
    let mut from = after;
    while from < upto {
        let page = research::changed_between(db, from, upto, RESEARCH_PAGE)
            .await
            .map_err(db_error)?;
        let full = page.len() >= RESEARCH_PAGE;
        for (seq, each) in page {
            from = from.max(seq);
            put_research(index, each);
        }
        if !full {
            break;
        }
    }
    Ok(upto.max(after))
}

/// Puts a lease read at `path` into the index, counting until `lease::counts_until` (the
/// engine's one rule): its expiry when it decodes and its job exists; its node's
/// creation plus the work-item TTL when its job does not exist (outside 17h F8: such a
/// lease kept its pairs out of planning for its whole duration, up to 30 days) or when
/// it does not decode. A lease whose data does not decode still says the job is leased;
/// what it covers is read from its job. Dropping it instead
/// planned the running job's pairs again at once (outside 17d finding 17). With neither
/// lease nor job readable the pairs are unknown and the lease is left out, said once per
/// change of the node.
///
/// A missing lease is no lease, except for a job still running: in `leased` or
/// `researching` with its lock held (the lock is ephemeral: it exists while its holder's
/// session lives). Such a lease was deleted by hand while the researcher works on, and
/// its pairs count as leased while the lock is held ([`running_without_lease`]); before,
/// the planner planned the episode again at once and it was researched twice (outside
/// 17g finding 7). A lease the index already held as expired was revoked by the reaper
/// (an expired lease of a locked job, docs/protocol.md): it stays gone, so its pairs are
/// planned again as documented. When the lock goes away the reaper expires the job, its
/// queue entry moves, and [`apply`] re-checks it here.
async fn put_lease(
    session: &Session,
    index: &mut Index,
    path: &str,
    found: Option<(&[u8], &zk::Stat)>,
    ttl_ms: i64,
) -> Result<(), EngineError> {
    let job = name_of(path);
    let Some((data, stat)) = found else {
        let expired = index
            .lease_expires(job)
            .is_some_and(|at| at <= index.now_ms());
        match running_without_lease(session, job).await? {
            Some(record) if !expired => {
                if index.lease_expires(job) != Some(i64::MAX) {
                    tracing::warn!(job, episode = %record.episode, state = %record.status, path, "lease missing of a running job (deleted by hand?): its pairs count as leased while its lock is held (see `archivist fsck`)");
                }
                index.upsert_lease(job, &record.episode, clip_numbers(&record.clips), i64::MAX);
            }
            _ => index.remove_lease(job),
        }
        return Ok(());
    };
    let ttl_until = |duration: Option<i64>, job_exists: bool| {
        archivist_engine::lease::counts_until(duration, job_exists, stat.mtime, stat.ctime, ttl_ms)
    };
    if let Some(r) = decode::<LeaseRecord>(path, data) {
        let job_exists = store::exists(session, &paths::job(job)).await?.is_some();
        if !job_exists
            && archivist_engine::logs::first_time(&format!("jobless lease {path} {}", stat.ctime))
        {
            tracing::warn!(job, episode = %r.episode, path, "lease without a job: its pairs count as leased only until the node's creation plus the work-item TTL (the reaper removes it; see `archivist fsck`)");
        }
        index.upsert_lease(
            job,
            &r.episode,
            clip_numbers(&r.clips),
            ttl_until(Some(r.duration_ms), job_exists),
        );
        return Ok(());
    }
    match store::read::<JobRecord>(session, &paths::job(job)).await {
        Ok(Some((record, _))) => {
            tracing::warn!(job, episode = %record.episode, path, "undecodable lease: its job's pairs count as leased until the node's creation plus the work-item TTL");
            index.upsert_lease(
                job,
                &record.episode,
                clip_numbers(&record.clips),
                ttl_until(None, true),
            );
        }
        Ok(None) | Err(EngineError::Record(_)) => {
            tracing::warn!(job, path, "undecodable lease of a job that is missing or does not decode either: what it covers is unknown (see `archivist fsck`)");
            index.remove_lease(job);
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// The job `job` if it is running although its lease is missing: in `leased` or
/// `researching` with its lock held by a live session (an unreadable or missing job is
/// not).
async fn running_without_lease(
    session: &Session,
    job: &str,
) -> Result<Option<JobRecord>, EngineError> {
    let record = match store::read::<JobRecord>(session, &paths::job(job)).await {
        Ok(Some((record, _))) => record,
        Ok(None) | Err(EngineError::Record(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    if !matches!(record.status, JobState::Leased | JobState::Researching) {
        return Ok(None);
    }
    Ok(store::exists(session, &paths::job_lock(job))
        .await?
        .map(|_| record))
}

/// Puts the job named by the entry `name` of `state`'s queue into the index, when the
/// entry is the job's own (`queue::is_its_entry`, the engine's one rule): a stray copy
/// of its entry in another blocking queue (`held` made by hand for a pending job) made
/// the index hold the job in that state too, keeping its pairs out of planning after
/// the job itself finished (outside 17h F10).
fn put_job(index: &mut Index, state: JobState, name: &str, path: &str, data: Option<&[u8]>) {
    if let Some(job) = data.and_then(|d| decode::<JobRecord>(path, d)) {
        if archivist_engine::queue::is_its_entry(&job, state, name) {
            index.add_job(&job.id, state, &job.episode, clip_numbers(&job.clips));
        }
    }
}

/// What the planner has read: the index, the holds in force and the catalog
/// watermark.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The index.
    pub index: Index,
    /// Held episode and clip ids.
    pub holds: Holds,
    /// The catalog's `seq` read up to.
    pub catalog_seq: i64,
    /// The research archive's `seq` read up to.
    pub research_seq: i64,
}

/// Loads the whole index (`ttl_ms`: the work-item TTL, for an undecodable lease). Set
/// the watches first, then load, then apply the events that arrived meanwhile: nothing
/// is missed.
pub async fn load(session: &Session, db: &Database, ttl_ms: i64) -> Result<Loaded, EngineError> {
    let mut index = Index::new();
    let holds: Holds = store::children(session, paths::HOLDS)
        .await?
        .into_iter()
        .collect();
    let catalog_seq = read_catalog(db, &mut index, &holds, 0).await?;
    let research_seq = load_research(db, &mut index).await?;
    for (path, found) in read_many(session, children_paths(session, paths::LEASES).await?).await? {
        put_lease(
            session,
            &mut index,
            &path,
            found.as_ref().map(|(d, s)| (d.as_slice(), s)),
            ttl_ms,
        )
        .await?;
    }
    // Running jobs whose lease node is missing (deleted by hand): `put_lease` decides
    // whether their pairs count as leased. Their leases were never listed above.
    for state in [JobState::Leased, JobState::Researching] {
        for name in store::children(session, &paths::queue(state)).await? {
            let Ok(entry) = QueueEntry::parse(&name) else {
                continue;
            };
            if index.lease_expires(&entry.job).is_none() {
                put_lease(session, &mut index, &paths::lease(&entry.job), None, ttl_ms).await?;
            }
        }
    }
    for state in BLOCKING_STATES {
        let entries: Vec<QueueEntry> = store::children(session, &paths::queue(state))
            .await?
            .iter()
            .filter_map(|name| QueueEntry::parse(name).ok())
            .collect();
        let job_paths: Vec<String> = entries.iter().map(|e| paths::job(&e.job)).collect();
        for (entry, (path, found)) in entries.iter().zip(read_many(session, job_paths).await?) {
            put_job(
                &mut index,
                state,
                &entry.name(),
                &path,
                found.as_ref().map(|(d, _)| d.as_slice()),
            );
        }
    }
    Ok(Loaded {
        index,
        holds,
        catalog_seq,
        research_seq,
    })
}

/// Applies one watch event on `path` (`deleted`: the node is gone) by re-reading what
/// it names (for a catalog signal: the rows after the watermark in `loaded`; `ttl_ms`:
/// the work-item TTL, for an undecodable lease). Returns what the path was.
pub async fn apply(
    session: &Session,
    db: &Database,
    loaded: &mut Loaded,
    path: &str,
    deleted: bool,
    ttl_ms: i64,
) -> Result<Node, EngineError> {
    let node = classify(path);
    let index = &mut loaded.index;
    let read = |p: String| async move {
        if deleted {
            Ok(None)
        } else {
            store::read_raw(session, &p).await
        }
    };
    match &node {
        Node::Signal(Signal::Catalog) => {
            loaded.catalog_seq = read_catalog(db, index, &loaded.holds, loaded.catalog_seq).await?;
        }
        Node::Signal(Signal::Research) => {
            loaded.research_seq = read_research(db, index, loaded.research_seq).await?;
        }
        Node::Hold(id) => {
            let held = !deleted;
            if held {
                loaded.holds.insert(id.clone());
            } else {
                loaded.holds.remove(id);
            }
            put_hold(index, id, held);
        }
        Node::Lease(_) => {
            let found = read(path.to_string()).await?;
            put_lease(
                session,
                index,
                path,
                found.as_ref().map(|(d, s)| (d.as_slice(), s)),
                ttl_ms,
            )
            .await?;
        }
        Node::QueueEntry(state, entry) if BLOCKING_STATES.contains(state) => {
            let Ok(entry) = QueueEntry::parse(entry) else {
                return Ok(node);
            };
            if deleted {
                // A stray or duplicate entry going (the planner and reaper remove the
                // proven ones) leaves the job's own entry, and the job, in place.
                let job_path = paths::job(&entry.job);
                let own_elsewhere = store::read_raw(session, &job_path)
                    .await?
                    .and_then(|(d, _)| records::decode::<JobRecord>(&job_path, &d).ok())
                    .is_some_and(|job| {
                        job.status == *state
                            && !archivist_engine::queue::is_its_entry(&job, *state, &entry.name())
                    });
                if !own_elsewhere {
                    index.remove_job(&entry.job, *state);
                }
            } else {
                let job_path = paths::job(&entry.job);
                let found = store::read_raw(session, &job_path).await?;
                put_job(
                    index,
                    *state,
                    &entry.name(),
                    &job_path,
                    found.as_ref().map(|(d, _)| d.as_slice()),
                );
            }
        }
        // A running job leaving `leased`/`researching` whose lease the index holds
        // without its node (a lease deleted by hand, see `put_lease`): re-check it, so
        // its pairs are planned again once it is expired or done.
        Node::QueueEntry(JobState::Leased | JobState::Researching, entry) if deleted => {
            let Ok(entry) = QueueEntry::parse(entry) else {
                return Ok(node);
            };
            if index.lease_expires(&entry.job) == Some(i64::MAX) {
                let lease_path = paths::lease(&entry.job);
                let found = store::read_raw(session, &lease_path).await?;
                put_lease(
                    session,
                    index,
                    &lease_path,
                    found.as_ref().map(|(d, s)| (d.as_slice(), s)),
                    ttl_ms,
                )
                .await?;
            }
        }
        Node::QueueEntry(..) | Node::Researcher | Node::Other => {}
    }
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_classified() {
        assert_eq!(classify("/signals/catalog"), Node::Signal(Signal::Catalog));
        assert_eq!(
            classify("/signals/research"),
            Node::Signal(Signal::Research)
        );
        assert_eq!(
            classify("/control/hold/e0000001"),
            Node::Hold("e0000001".into())
        );
        assert_eq!(
            classify("/leases/j0000000001"),
            Node::Lease("j0000000001".into())
        );
        assert_eq!(classify("/researchers/r1"), Node::Researcher);
        assert_eq!(
            classify("/queues/pending/x-y-j1"),
            Node::QueueEntry(JobState::Pending, "x-y-j1".into())
        );
        for other in [
            "/catalog/episodes/e0000001",
            "/research/e0000001",
            "/signals",
            "/control/hold",
            "/queues/bogus/x",
            "/leases",
        ] {
            assert_eq!(classify(other), Node::Other, "{other}");
        }
    }
}
