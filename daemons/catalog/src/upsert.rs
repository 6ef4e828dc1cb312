//! Writing a batch of items to the catalog: many requests in flight, each record atomic.
//!
//! One round reads every alias and record (pipelined, see [`crate::resolve`]), then sends
//! the rewrites of existing records and the multis creating new ones, all before
//! awaiting any. A creating multi holds up to `chunk_records` records; for each one it
//! bumps the kind's counter at the exact version expected (the new number is the
//! counter's version after the bump, as `docs/protocol.md` says) and creates the record
//! and its aliases. ZooKeeper applies one session's requests in order and checks a
//! multi's version against the ones before it, so the multis sent back to back each find
//! the version the previous one left: numbers stay dense with no reservation step.
//!
//! Anything that loses a race (another curator, a moved counter, a record rewritten
//! meanwhile) fails as a whole and is re-read and retried in the next round; a record is
//! never half-written. After the writes, pending jobs of episodes whose priority changed
//! are re-ordered.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use archivist_engine::ops::{Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::{clock, store, EngineError, Session};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use time::OffsetDateTime;

use crate::error::{CatalogError, ItemProblem};
use crate::item::{CatalogItem, Kind};
use crate::merge::{new_record, StoredRecord};
use crate::pipeline::{self, SentMulti};
use crate::report::{Change, CurationReport, ItemOutcome};
use crate::reprioritize::reprioritize_episodes;
use crate::resolve::{alias_op, resolve, Create, Plan, Update};
use crate::settings::CurateSettings;

/// Items of one batch that name the same media URL or feed GUID (they would be the same
/// record twice). Each problem names both items.
pub fn duplicates(items: &[CatalogItem]) -> Vec<ItemProblem> {
    let mut seen: HashMap<String, &str> = HashMap::new();
    let mut problems = Vec::new();
    for item in items {
        for key in item.alias_keys() {
            if let Some(first) = seen.get(&key) {
                let what = if key.starts_with("guid-") {
                    "feed GUID"
                } else {
                    "media URL"
                };
                problems.push(ItemProblem::new(
                    &item.label,
                    format!("duplicate: same {what} as {first}"),
                ));
                break;
            }
        }
        for key in item.alias_keys() {
            seen.entry(key).or_insert(&item.label);
        }
    }
    problems
}

fn progress_bar(settings: &CurateSettings, len: usize) -> ProgressBar {
    if !settings.progress || len < 2 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("curating {bar:40} {pos}/{len} ({per_sec}, eta {eta}) {msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// Everything one round collects.
struct Round<'r> {
    report: &'r mut CurationReport,
    retry: Vec<CatalogItem>,
    priority_changes: &'r mut BTreeMap<String, i64>,
    bar: &'r ProgressBar,
}

impl Round<'_> {
    fn done(&mut self, item: &CatalogItem, id: &str, change: Change) {
        let outcome = match &change {
            Change::Created => "created",
            Change::Updated { .. } => "updated",
            Change::Refreshed => "refreshed",
        };
        metrics::counter!("archivist_catalog_records_total", "kind" => item.kind.as_str(), "outcome" => outcome).increment(1);
        tracing::debug!(record = %id, kind = item.kind.as_str(), item = %item.label, outcome, "curated");
        self.report.items.push(ItemOutcome {
            label: item.label.clone(),
            kind: item.kind,
            id: id.to_string(),
            change,
        });
        self.bar.inc(1);
    }

    fn skip(&mut self, problem: ItemProblem) {
        metrics::counter!("archivist_catalog_records_total", "kind" => "any", "outcome" => "skipped").increment(1);
        tracing::warn!(item = %problem.item, reason = %problem.reason, "item skipped");
        self.report.skipped.push(problem);
        self.bar.inc(1);
    }

    /// Sorts a failed multi: a lost session ends the curation; a lost race or a lost
    /// connection sends its items to the next round (re-read, then retried); anything
    /// else skips them, naming the error.
    fn chunk_failed(
        &mut self,
        items: impl IntoIterator<Item = CatalogItem>,
        err: EngineError,
    ) -> Result<(), CatalogError> {
        if err.is_session_lost() {
            return Err(err.into());
        }
        let retryable = err.is_retryable();
        if retryable {
            metrics::counter!("archivist_catalog_conflicts_total").increment(1);
            tracing::debug!(error = %err, "multi raced; its items are retried");
        }
        for item in items {
            if retryable {
                self.retry.push(item);
            } else {
                self.skip(ItemProblem::new(&item.label, format!("not written: {err}")));
            }
        }
        Ok(())
    }
}

/// Registers or refreshes every item (see the module docs). Fails without writing when
/// two items are the same record ([`duplicates`]). Items that cannot be written alone
/// (e.g. a URL already registered as the other kind) are in the report's `skipped`.
///
/// # Errors
/// [`CatalogError::Invalid`] for duplicates, [`CatalogError::Engine`] when ZooKeeper
/// fails (records already written stay; re-running is safe),
/// [`CatalogError::Contention`] when conflicts outlast `max_attempts` rounds.
pub async fn curate(
    session: &Session,
    items: Vec<CatalogItem>,
    settings: &CurateSettings,
) -> Result<CurationReport, CatalogError> {
    let started = Instant::now();
    let problems = duplicates(&items);
    if !problems.is_empty() {
        return Err(CatalogError::Invalid {
            input: "curation".to_string(),
            problems,
        });
    }
    let now = clock::local_now();
    let bar = progress_bar(settings, items.len());
    let mut report = CurationReport::default();
    for item in &items {
        for warning in &item.warnings {
            tracing::warn!(item = %item.label, %warning, "curated with a warning");
            report
                .warnings
                .push(ItemProblem::new(&item.label, warning.clone()));
        }
    }
    let (items, over_limits): (Vec<_>, Vec<_>) =
        items.into_iter().partition(|i| i.check_limits().is_ok());
    for item in over_limits {
        let reason = item.check_limits().err().unwrap_or_default();
        tracing::warn!(item = %item.label, %reason, "item left out");
        report.skipped.push(ItemProblem::new(&item.label, reason));
        bar.inc(1);
    }
    let mut priority_changes = BTreeMap::new();
    let mut todo = items;
    let mut attempts = 0;
    while !todo.is_empty() && attempts < settings.max_attempts {
        attempts += 1;
        let plans = resolve(session, todo, settings.max_in_flight, now).await?;
        let mut round = Round {
            report: &mut report,
            retry: Vec::new(),
            priority_changes: &mut priority_changes,
            bar: &bar,
        };
        let mut updates = Vec::new();
        let mut episodes = Vec::new();
        let mut clips = Vec::new();
        for plan in plans {
            match plan {
                Plan::Skip(problem) => round.skip(problem),
                Plan::Update(u) => updates.push(*u),
                Plan::Create(c) if c.item.kind == Kind::Episode => episodes.push(*c),
                Plan::Create(c) => clips.push(*c),
            }
        }
        write_updates(session, updates, settings, &mut round).await?;
        write_creates(session, Kind::Episode, episodes, settings, now, &mut round).await?;
        write_creates(session, Kind::Clip, clips, settings, now, &mut round).await?;
        todo = round.retry;
    }
    bar.finish_and_clear();
    if !todo.is_empty() {
        return Err(CatalogError::Contention {
            attempts,
            remaining: todo.len(),
        });
    }
    report.reprioritized_jobs = reprioritize_episodes(
        session,
        &priority_changes,
        &settings.curator,
        settings.max_in_flight,
    )
    .await?;
    report.attempts = attempts;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    metrics::histogram!("archivist_catalog_curation_seconds")
        .record(started.elapsed().as_secs_f64());
    tracing::info!(
        curator = %settings.curator,
        created = report.created(),
        updated = report.updated(),
        refreshed = report.refreshed(),
        skipped = report.skipped.len(),
        attempts,
        elapsed_ms = report.elapsed_ms,
        "curation done"
    );
    Ok(report)
}

async fn write_updates(
    session: &Session,
    updates: Vec<Update>,
    settings: &CurateSettings,
    round: &mut Round<'_>,
) -> Result<(), CatalogError> {
    // Two items that turned out to be one record: the later waits for the next round
    // (it would fail on the version the first one moves, and take its chunk with it).
    let mut paths_seen = HashSet::new();
    let mut ready = Vec::with_capacity(updates.len());
    for u in updates {
        if paths_seen.insert(u.path.clone()) {
            ready.push(u);
        } else {
            round.retry.push(u.item);
        }
    }
    let mut updates = ready.into_iter().peekable();
    let window = (settings.max_in_flight / settings.chunk_records.max(1)).max(4);
    while updates.peek().is_some() {
        let mut sent: Vec<(Vec<Update>, SentMulti<'_>)> = Vec::new();
        for _ in 0..window {
            let mut ops = Vec::new();
            let mut members = Vec::new();
            for u in updates.by_ref().take(settings.chunk_records) {
                match u.record.encode(&u.path) {
                    Ok(data) => {
                        ops.push(Op::SetData {
                            path: u.path.clone(),
                            data,
                            version: Some(u.version),
                        });
                        ops.extend(u.alias_ops.iter().cloned());
                        members.push(u);
                    }
                    Err(e) => round.skip(ItemProblem::new(&u.item.label, e.to_string())),
                }
            }
            if members.is_empty() {
                break;
            }
            let future = pipeline::send_multi(session, &ops);
            sent.push((members, future));
        }
        for (members, future) in sent {
            match future.await {
                Ok(()) => {
                    for u in members {
                        updated(round, u);
                    }
                }
                Err(e) => round.chunk_failed(members.into_iter().map(|u| u.item), e)?,
            }
        }
    }
    Ok(())
}

fn updated(round: &mut Round<'_>, u: Update) {
    if u.changed.contains(&"priority") && u.item.kind == Kind::Episode {
        round
            .priority_changes
            .insert(u.record.id().to_string(), u.record.fields().priority);
    }
    let change = if u.changed.is_empty() {
        Change::Refreshed
    } else {
        Change::Updated {
            fields: u.changed.iter().map(|s| s.to_string()).collect(),
        }
    };
    let id = u.record.id().to_string();
    round.done(&u.item, &id, change);
}

fn record_id(kind: Kind, number: u64) -> Option<String> {
    match kind {
        Kind::Episode => Some(paths::episode_id(number)),
        Kind::Clip => u32::try_from(number).ok().map(paths::clip_id),
    }
}

/// The ops creating one record numbered from `version` (the counter's version before
/// this record's bump), or why the item cannot be created.
fn create_ops(
    create: &Create,
    kind: Kind,
    counter: &str,
    version: i32,
    curator: &str,
    now: OffsetDateTime,
) -> Result<(String, Vec<Op>), String> {
    let number = u64::try_from(version).map_err(|_| "negative counter version".to_string())? + 1;
    let id = record_id(kind, number).ok_or_else(|| format!("{counter} is exhausted"))?;
    let record = new_record(&create.item, id.clone(), curator, now);
    let path = StoredRecord::path_of(kind, &id);
    let data = record.encode(&path).map_err(|e| e.to_string())?;
    let mut ops = vec![
        Op::SetData {
            path: counter.to_string(),
            data: Vec::new(),
            version: Some(version),
        },
        Op::Create {
            path,
            data,
            mode: Mode::Persistent,
        },
    ];
    for name in create.item.alias_keys() {
        let stale = create
            .stale
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v);
        ops.push(alias_op(&create.item, &name, &id, stale).map_err(|e| e.to_string())?);
    }
    Ok((id, ops))
}

async fn write_creates(
    session: &Session,
    kind: Kind,
    creates: Vec<Create>,
    settings: &CurateSettings,
    now: OffsetDateTime,
    round: &mut Round<'_>,
) -> Result<(), CatalogError> {
    if creates.is_empty() {
        return Ok(());
    }
    let ids = match kind {
        Kind::Episode => archivist_engine::counter::EPISODES,
        Kind::Clip => archivist_engine::counter::CLIPS,
    };
    let counter = ids.path;
    let stat =
        store::exists(session, counter)
            .await?
            .ok_or_else(|| EngineError::NotInitialised {
                chroot: session.chroot().to_string(),
                missing: counter.to_string(),
            })?;
    let mut version = stat.version;
    let mut creates = creates.into_iter().peekable();
    // Multis per window: enough to keep `max_in_flight` records' worth of requests going.
    let window = (settings.max_in_flight / settings.chunk_records.max(1)).max(4);
    while creates.peek().is_some() {
        let mut sent: Vec<(Vec<(CatalogItem, String)>, SentMulti<'_>)> = Vec::new();
        for _ in 0..window {
            let mut ops = Vec::new();
            let mut members = Vec::new();
            for c in creates.by_ref().take(settings.chunk_records) {
                match create_ops(&c, kind, counter, version, &settings.curator, now) {
                    Ok((id, record_ops)) => {
                        version += 1;
                        ops.extend(record_ops);
                        members.push((c.item, id));
                    }
                    Err(reason) => round.skip(ItemProblem::new(&c.item.label, reason)),
                }
            }
            if members.is_empty() {
                break;
            }
            let future = pipeline::send_multi(session, &ops);
            sent.push((members, future));
        }
        let mut raced = false;
        for (members, future) in sent {
            match future.await {
                Ok(()) => {
                    for (item, id) in members {
                        round.done(&item, &id, Change::Created);
                    }
                }
                Err(e) => {
                    // Later multis expected versions this one would have left: they fail
                    // too, and nothing more is sent this round.
                    if !raced {
                        // A record the counter's next id names exists: the counter is
                        // behind the ids in use. Move it past them, or the next rounds
                        // fail the same way until curation gives up.
                        if let Some(taken) = archivist_engine::counter::taken_id(&ids, &e) {
                            let what = format!("curated {}", kind.as_str());
                            archivist_engine::counter::skip_taken(session, &ids, taken, &what)
                                .await?;
                        }
                    }
                    raced = true;
                    round.chunk_failed(members.into_iter().map(|(item, _)| item), e)?;
                }
            }
        }
        if raced {
            round.retry.extend(creates.by_ref().map(|c| c.item));
        }
    }
    Ok(())
}
