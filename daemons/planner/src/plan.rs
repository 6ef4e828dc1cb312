//! One planning round: expire stale waiting items, then the seed's capacity loop, each
//! added work item picked from the index and created with its lease in one multi.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use archivist_db::Database;
use archivist_engine::clock::zk_now_ms;
use archivist_engine::jobs::{self, NewJob};
use archivist_engine::ops::Op;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::JobRecord;
use archivist_engine::schema::JobState;
use archivist_engine::{lease, member, queue, EngineError, Session};
use tokio_util::sync::CancellationToken;

use crate::capacity::{self, Capacity};
use crate::error::PlannerError;
use crate::expire;
use crate::index::{Index, Pick};
use crate::load::{self, Loaded, Node};
use crate::settings::PlannerSettings;
use crate::watch::{Event, Watches};
use archivist_engine::signal::Signal;

/// Why a round stopped adding work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The capacity check said stop: researchers are gone and work is waiting.
    NoResearchers,
    /// The capacity check said stop: more work waits than researchers (the normal end).
    Surplus,
    /// Nothing is left to plan (every pair researched, leased, held or blocked).
    NoWork,
    /// The round added `researchers + 1` items while researchers kept taking them; the
    /// next wake or tick goes on (this bounds a round against a runaway consumer).
    RoundLimit,
    /// Shutdown was requested.
    Shutdown,
}

/// What a round did.
#[derive(Debug, Clone)]
pub struct RoundReport {
    /// Work items created, in order.
    pub created: Vec<JobRecord>,
    /// Waiting work items expired (job ids).
    pub expired: Vec<String>,
    /// Why it stopped.
    pub stop: Stop,
}

/// How often the planner compares the catalog's and the research archive's last `seq`
/// with its watermarks even without a signal (a curator or recorder that died between
/// its commit and its signal, or whose bump failed): a slow safety net, not the wake-up
/// path.
pub const CATALOG_RECHECK: Duration = Duration::from_secs(120);

/// The planner on one session: its index, kept current by its watches and the
/// database's change watermark.
#[derive(Debug)]
pub struct Planner {
    session: Session,
    db: Database,
    settings: PlannerSettings,
    by: String,
    loaded: Loaded,
    rechecked: Instant,
    watches: Watches,
    stale: bool,
    clock: Option<(i64, Instant)>,
    /// Stray pending entries already warned about (one warning each).
    strays_told: BTreeSet<String>,
    /// The researchers registered at the last capacity check of the round (read there
    /// anyway): who an affinity hint may name, without a read per job.
    registered: BTreeSet<String>,
}

/// A planner exists only while it leads (the daemon makes one when it wins the election
/// and drops it when leadership, the session or the daemon goes). A planner that lost the
/// lead must not keep exporting its last catalog progress as if current: its gauges go to
/// 0, and `archivist_planner_leading` says which planner's series are live.
impl Drop for Planner {
    fn drop(&mut self) {
        metrics::gauge!("archivist_planner_leading").set(0.0);
        for name in [
            "archivist_planner_index_episodes",
            "archivist_planner_index_active_leases",
            "archivist_planner_index_bytes",
            "archivist_catalog_pairs_total",
            "archivist_catalog_progress",
        ] {
            metrics::gauge!(name).set(0.0);
        }
        for state in ["researched", "planned", "unplanned"] {
            metrics::gauge!("archivist_catalog_pairs", "state" => state).set(0.0);
        }
    }
}

/// Researchers' capacity: the sum of `slots` of `/researchers/*` (a researcher running N
/// jobs at once counts N).
pub async fn count_researchers(session: &Session) -> Result<u64, EngineError> {
    Ok(researchers_now(session).await?.0)
}

/// The researchers' capacity ([`count_researchers`]) and their member names, from one
/// listing of `/researchers`.
async fn researchers_now(session: &Session) -> Result<(u64, BTreeSet<String>), EngineError> {
    let members = member::list(session, paths::RESEARCHERS).await?;
    let slots = members.iter().map(|m| u64::from(m.slots)).sum();
    Ok((slots, members.into_iter().map(|m| m.name).collect()))
}

/// Work items waiting in `/queues/pending`, by the engine's one rule
/// ([`queue::count_work`]: the entry parses and is its pending job's own entry), looked at until more
/// than `researchers` are found (all the capacity check needs). A stray entry (made by
/// hand, or whose job is gone) is not work: counted, it stalled planning (`stop=Surplus`).
pub async fn count_pending(
    session: &Session,
    researchers: u64,
) -> Result<queue::WorkCount, EngineError> {
    let enough = usize::try_from(researchers.saturating_add(1)).unwrap_or(usize::MAX);
    queue::count_work(session, JobState::Pending, enough).await
}

fn is_wake(node: &Node, deleted: bool) -> bool {
    match node {
        // New catalog rows, or a hold released, may be new work (a hold placed only
        // removes work; waking costs one pick).
        Node::Researcher | Node::Signal(Signal::Catalog) | Node::Hold(_) => true,
        Node::Signal(Signal::Research) => false,
        // A blocking job going away (an operator deleted a failed, held or cancelled
        // job) frees its pairs: plan them now rather than at the next tick.
        Node::QueueEntry(state, _) => {
            *state == JobState::Pending || (deleted && load::BLOCKING_STATES.contains(state))
        }
        Node::Lease(_) => deleted,
        Node::Other => false,
    }
}

impl Planner {
    /// Sets the watches and loads the index. Refuses invalid settings.
    pub async fn start(
        session: &Session,
        db: &Database,
        settings: PlannerSettings,
        by: &str,
    ) -> Result<Planner, PlannerError> {
        settings.validate()?;
        let watches = Watches::set(session).await?;
        let started = Instant::now();
        let loaded = load::load(session, db, settings.work_item_ttl_ms()).await?;
        let index = &loaded.index;
        let took = started.elapsed();
        metrics::histogram!("archivist_planner_index_load_seconds").record(took.as_secs_f64());
        let stats = index.stats();
        tracing::info!(
            episodes = stats.episodes,
            clips = stats.active_clips,
            leases = stats.leases,
            blocking_jobs = stats.blocking_jobs,
            heap_bytes = stats.heap_bytes,
            took_ms = took.as_millis() as u64,
            "planner index loaded"
        );
        let mut planner = Planner {
            session: session.clone(),
            db: db.clone(),
            settings,
            by: by.to_string(),
            loaded,
            rechecked: Instant::now(),
            watches,
            stale: false,
            clock: None,
            strays_told: BTreeSet::new(),
            registered: BTreeSet::new(),
        };
        planner.refresh().await?;
        metrics::gauge!("archivist_planner_leading").set(1.0);
        Ok(planner)
    }

    /// The index (for tests and the benchmark).
    pub fn index(&self) -> &Index {
        &self.loaded.index
    }

    /// The catalog `seq` the index has read up to.
    pub fn catalog_seq(&self) -> i64 {
        self.loaded.catalog_seq
    }

    /// Whether the next round reloads the whole index (events may have been lost, or a
    /// write may have applied unseen); for tests of when a reload is due.
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// The settings in use.
    pub fn settings(&self) -> &PlannerSettings {
        &self.settings
    }

    async fn reload(&mut self) -> Result<(), EngineError> {
        tracing::info!("reloading the planner index (events may have been lost)");
        self.loaded = load::load(&self.session, &self.db, self.settings.work_item_ttl_ms()).await?;
        self.stale = false;
        metrics::counter!("archivist_planner_index_reloads_total").increment(1);
        Ok(())
    }

    async fn handle(&mut self, event: Event) -> Result<bool, EngineError> {
        match event {
            Event::Node { path, deleted } => {
                let node = load::apply(
                    &self.session,
                    &self.db,
                    &mut self.loaded,
                    &path,
                    deleted,
                    self.settings.work_item_ttl_ms(),
                )
                .await?;
                Ok(is_wake(&node, deleted))
            }
            Event::Disconnected => {
                self.stale = true;
                Ok(false)
            }
            Event::Reconnected => {
                self.stale = true;
                Ok(true)
            }
            Event::Lost => Err(EngineError::SessionLost(
                "planner watches saw the session end".into(),
            )),
        }
    }

    /// Applies every event that has arrived, reloading if events may have been lost.
    /// Returns whether any of them should wake the planner.
    pub async fn refresh(&mut self) -> Result<bool, EngineError> {
        let mut wake = false;
        while let Some(event) = self.watches.try_next() {
            wake |= self.handle(event).await?;
        }
        if self.stale && self.session.state() == archivist_engine::zk::SessionState::SyncConnected {
            self.reload().await?;
            wake = true;
        }
        if self.rechecked.elapsed() >= CATALOG_RECHECK {
            self.rechecked = Instant::now();
            let before = self.loaded.catalog_seq;
            let loaded = &mut self.loaded;
            loaded.catalog_seq =
                load::read_catalog(&self.db, &mut loaded.index, &loaded.holds, before).await?;
            if loaded.catalog_seq > before {
                tracing::warn!(from = before, to = loaded.catalog_seq, "catalog changes arrived without a signal (a curator stopped between its commit and /signals/catalog?); read now");
                wake = true;
            }
            let before = loaded.research_seq;
            loaded.research_seq = load::read_research(&self.db, &mut loaded.index, before).await?;
            if loaded.research_seq > before {
                tracing::warn!(from = before, to = loaded.research_seq, "research changes arrived without a signal (a recorder stopped between its commit and /signals/research?); read now");
            }
        }
        Ok(wake)
    }

    /// Waits up to `timeout` for a change that should wake the planner (researchers,
    /// the pending queue, the catalog, a lease or research record going away), applying
    /// every event on the way. Returns whether it was woken (false: timed out).
    pub async fn wait(&mut self, timeout: Duration) -> Result<bool, EngineError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let event = tokio::select! {
                e = self.watches.next() => e,
                _ = tokio::time::sleep_until(deadline) => return Ok(false),
            };
            if self.handle(event).await? | self.refresh().await? {
                return Ok(true);
            }
        }
    }

    /// Warns once about each stray pending entry (not counted as waiting work).
    fn tell_strays(&mut self, strays: &[String]) {
        let new: Vec<&String> = strays
            .iter()
            .filter(|s| !self.strays_told.contains(*s))
            .collect();
        if new.is_empty() {
            return;
        }
        tracing::warn!(
            entries = ?new,
            "stray entries in /queues/pending (not a queue entry, no such job, or a job in another state) are not counted as waiting work; `archivist fsck --repair` removes them"
        );
        self.strays_told.extend(new.into_iter().cloned());
    }

    /// Reports the index and catalog-progress gauges (set to 0 when this planner is
    /// dropped: see its `Drop`).
    fn report_gauges(&self) {
        let stats = self.loaded.index.stats();
        metrics::gauge!("archivist_planner_index_episodes").set(stats.episodes as f64);
        metrics::gauge!("archivist_planner_index_active_leases").set(stats.active_leases as f64);
        metrics::gauge!("archivist_planner_index_bytes").set(stats.heap_bytes as f64);
        // Catalog-level progress: of every (episode, clip) pair the catalog asks for, how
        // many are researched, planned (leased or waiting) or not planned yet.
        let planned = stats
            .pairs
            .saturating_sub(stats.pairs_researched + stats.pairs_unplanned);
        metrics::gauge!("archivist_catalog_pairs_total").set(stats.pairs as f64);
        for (state, n) in [
            ("researched", stats.pairs_researched),
            ("planned", planned),
            ("unplanned", stats.pairs_unplanned),
        ] {
            metrics::gauge!("archivist_catalog_pairs", "state" => state).set(n as f64);
        }
        let progress = if stats.pairs == 0 {
            1.0
        } else {
            stats.pairs_researched as f64 / stats.pairs as f64
        };
        metrics::gauge!("archivist_catalog_progress").set(progress);
    }

    /// Reads ZooKeeper's time (a write to `/clock`, whose mtime the server stamps). Being
    /// a write, every change committed before it has been notified to this session when
    /// it returns, so the next [`Planner::refresh`] sees them all.
    async fn sync_clock(&mut self) -> Result<i64, EngineError> {
        let now = zk_now_ms(&self.session).await?;
        self.clock = Some((now, Instant::now()));
        Ok(now)
    }

    /// ZooKeeper's time now: the last reading plus the monotonic time since (no host
    /// wall clock is involved; a round lasts seconds against leases of minutes).
    fn now_ms(&self) -> i64 {
        match self.clock {
            Some((at, read)) => {
                at.saturating_add(i64::try_from(read.elapsed().as_millis()).unwrap_or(i64::MAX))
            }
            None => self.loaded.index.now_ms(),
        }
    }

    /// Chooses the next work item on a fresh view: reads ZooKeeper's time, applies every
    /// event that arrived, then asks the index.
    pub async fn pick(&mut self) -> Result<Option<Pick>, EngineError> {
        self.sync_clock().await?;
        self.pick_now().await
    }

    /// Chooses the next work item inside a round: the clock was read at the round's start
    /// and every item since was created by a write of this session, so applying the
    /// events that arrived is enough to be current.
    async fn pick_now(&mut self) -> Result<Option<Pick>, EngineError> {
        self.refresh().await?;
        let started = Instant::now();
        let pick = self
            .loaded
            .index
            .pick(self.now_ms(), self.settings.max_clips);
        metrics::histogram!("archivist_planner_pick_seconds")
            .record(started.elapsed().as_secs_f64());
        Ok(pick)
    }

    /// Creates the job and its lease in one multi (bump the job counter, create the job,
    /// its pending queue entry and `/leases/{job}` with no holder), and notes the lease
    /// in the index at once so the next pick does not choose the same clips.
    pub async fn create(&mut self, pick: &Pick) -> Result<JobRecord, EngineError> {
        let new = NewJob {
            episode: pick.episode.clone(),
            media_url: pick.media_url.clone(),
            clips: pick.clips.clone(),
            priority: pick.priority,
            curated_ms: pick.curated_ms,
            batch: None,
        };
        let duration_ms = self.settings.lease_duration_ms();
        // Built once with a placeholder id (same length as a real one): a lease that
        // cannot be made refuses the job before anything is written.
        let mut template =
            lease::new_record(&paths::job_id(0), &pick.episode, &pick.clips, duration_ms)?;
        if let Some(holder) = self.preferred_researcher(&pick.episode).await {
            let grace = i64::try_from(self.settings.affinity_grace.as_millis()).unwrap_or(0);
            template.prefer = Some(holder);
            template.prefer_until_ms = Some(self.now_ms().saturating_add(grace));
        }
        lease::create_op(&template)?;
        let lease_op = |job: &str| {
            let mut record = template.clone();
            record.job = job.to_string();
            match lease::create_op(&record) {
                Ok(op) => vec![op],
                // Unreachable after the check above; fail the multi rather than create a
                // job without its lease.
                Err(_) => vec![Op::Check {
                    path: paths::lease(job),
                    version: -2,
                }],
            }
        };
        // The archive's highest job id, read before each job (one indexed probe): a job
        // counter moved back must not re-issue an id the archive holds.
        let archived = archivist_engine::counter::Archived::from_highest_job(
            archivist_db::research::highest_job(&self.db)
                .await
                .map_err(crate::load::db_error)?
                .as_deref(),
        );
        let job = match jobs::create_past(&self.session, &new, &self.by, &archived, lease_op).await
        {
            Ok(job) => job,
            Err(e) => {
                // On connection loss the multi may have applied unseen: reload. A failed
                // precondition applied nothing (and the watch reports whatever moved):
                // reloading the whole index every round for it (a deleted queue
                // directory fails every create) cost a full read per tick.
                if !matches!(e, EngineError::Precondition { .. }) {
                    self.stale = true;
                }
                return Err(e);
            }
        };
        let expires = lease::expires_at(self.now_ms(), duration_ms);
        self.loaded
            .index
            .upsert_lease(&job.id, &job.episode, pick.clip_numbers.clone(), expires);
        self.loaded.index.add_job(
            &job.id,
            JobState::Pending,
            &job.episode,
            pick.clip_numbers.clone(),
        );
        metrics::counter!("archivist_planner_work_items_created_total").increment(1);
        tracing::info!(
            job = %job.id,
            episode = %job.episode,
            state = %job.status,
            clips = job.clips.len(),
            priority = job.priority,
            "work item created with its lease"
        );
        Ok(job)
    }

    /// Affinity: the registered researcher that keeps the episode's pinned audio in its
    /// own store (`renditions::holder`), which a new work item of the episode is left to
    /// for `affinity_grace`. None when the hint is off, nobody is known to hold it, the
    /// holder was not registered at the round's last capacity check (a gone researcher
    /// is preferred by no one), or the database cannot say (a hint is never worth failing
    /// a job over).
    async fn preferred_researcher(&self, episode: &str) -> Option<String> {
        if self.settings.affinity_grace.is_zero() || self.registered.is_empty() {
            return None;
        }
        let holder = archivist_db::renditions::holder(&self.db, episode)
            .await
            .ok()
            .flatten()?;
        self.registered.contains(&holder).then_some(holder)
    }

    /// One round: expire waiting items past their TTL, then run the capacity loop,
    /// re-counting researchers and waiting items before each item (the seed's "return
    /// to step 1").
    pub async fn round(
        &mut self,
        shutdown: &CancellationToken,
    ) -> Result<RoundReport, EngineError> {
        metrics::counter!("archivist_planner_rounds_total").increment(1);
        let now = self.sync_clock().await?;
        self.refresh().await?;
        let expired = expire::expire_waiting_at(
            &self.session,
            self.settings.work_item_ttl_ms(),
            now,
            &self.by,
        )
        .await?;
        let mut created = Vec::new();
        let stop = loop {
            if shutdown.is_cancelled() {
                break Stop::Shutdown;
            }
            let (researchers, registered) = researchers_now(&self.session).await?;
            self.registered = registered;
            let pending = count_pending(&self.session, researchers).await?;
            // Strays proven so are removed (each logged once, by the engine), so no later
            // round reads them again; the rest (names that do not parse) cost nothing to
            // find and are left to `fsck --repair`, warned about once.
            queue::remove_strays(&self.session, &pending.proven).await?;
            let unproven: Vec<String> = pending
                .strays
                .iter()
                .filter(|name| !pending.proven.iter().any(|p| &p.name == *name))
                .cloned()
                .collect();
            self.tell_strays(&unproven);
            match capacity::check(researchers, pending.work as u64) {
                Capacity::Add => {}
                Capacity::NoResearchers => break Stop::NoResearchers,
                Capacity::Surplus => break Stop::Surplus,
            }
            if created.len() as u64 > researchers {
                break Stop::RoundLimit;
            }
            let Some(pick) = self.pick_now().await? else {
                break Stop::NoWork;
            };
            created.push(self.create(&pick).await?);
        };
        self.report_gauges();
        tracing::debug!(
            created = created.len(),
            expired = expired.len(),
            ?stop,
            "planning round done"
        );
        Ok(RoundReport {
            created,
            expired,
            stop,
        })
    }
}
