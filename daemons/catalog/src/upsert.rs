//! Writing a batch of items to the catalog: each chunk of records in one transaction.
//!
//! One round reads every alias and record from the database (see [`crate::resolve`]),
//! merges each item into what is stored ([`crate::merge`], the one set of rules), and
//! writes the outcome in chunks of `chunk_records` records, each chunk one transaction
//! (`archivist_db::catalog::write`): every record with its aliases and, for new records,
//! its number from the database's counter, or nothing. A chunk that loses a race (a
//! record written since it was read, an alias another curator created meanwhile) is
//! rolled back whole; its items are read again and retried in the next round. After each
//! committed chunk the curator bumps `/signals/catalog` so the planner reads the change
//! at once. After the writes, pending jobs of episodes whose priority changed are
//! re-ordered (in ZooKeeper, where jobs live).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use archivist_db::catalog::{self, CatalogBatch, NewRecord, RecordUpdate};
use archivist_db::{Database, DbError};
use archivist_engine::{clock, signal, Session};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use time::OffsetDateTime;

use crate::error::{CatalogError, ItemProblem};
use crate::item::{CatalogItem, Kind};
use crate::merge::new_record;
use crate::report::{Change, CurationReport, ItemOutcome};
use crate::reprioritize::reprioritize_episodes;
use crate::resolve::{resolve, Create, Plan, Update};
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

    /// A chunk that lost a race: its items go to the next round (read again, then
    /// retried).
    fn chunk_raced(&mut self, items: impl IntoIterator<Item = CatalogItem>, err: &DbError) {
        metrics::counter!("archivist_catalog_conflicts_total").increment(1);
        tracing::debug!(error = %err, "catalog batch raced; its items are retried");
        self.retry.extend(items);
    }
}

/// Registers or refreshes every item (see the module docs). Fails without writing when
/// two items are the same record ([`duplicates`]). Items that cannot be written alone
/// (e.g. a URL already registered as the other kind) are in the report's `skipped`.
/// `session` is for the wake-up signal and the re-ordering of pending jobs.
///
/// # Errors
/// [`CatalogError::Invalid`] for duplicates, [`CatalogError::Db`] when the database
/// fails and [`CatalogError::Engine`] when ZooKeeper does (chunks already committed stay;
/// re-running is safe), [`CatalogError::Contention`] when conflicts outlast
/// `max_attempts` rounds.
pub async fn curate(
    session: &Session,
    db: &Database,
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
    let now = clock::stamp_now();
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
        let plans = resolve(db, todo, now).await?;
        let mut round = Round {
            report: &mut report,
            retry: Vec::new(),
            priority_changes: &mut priority_changes,
            bar: &bar,
        };
        let mut writes = Vec::new();
        let mut records_seen = HashSet::new();
        for plan in plans {
            match plan {
                Plan::Skip(problem) => round.skip(problem),
                // Two items that turned out to be one record: the later waits for the
                // next round (its version check would fail on the first one's write).
                Plan::Update(u) if !records_seen.insert(u.record.id().to_string()) => {
                    round.retry.push(u.item)
                }
                Plan::Update(u) => writes.push(Write::Update(u)),
                Plan::Create(c) => writes.push(Write::Create(c)),
            }
        }
        write_chunks(session, db, writes, settings, now, &mut round).await?;
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

/// One planned write.
enum Write {
    Update(Box<Update>),
    Create(Box<Create>),
}

impl Write {
    fn into_item(self) -> CatalogItem {
        match self {
            Write::Update(u) => u.item,
            Write::Create(c) => c.item,
        }
    }
}

/// Writes the plans in chunks of `chunk_records`, one transaction each, and signals
/// the planner after each committed chunk.
async fn write_chunks(
    session: &Session,
    db: &Database,
    writes: Vec<Write>,
    settings: &CurateSettings,
    now: OffsetDateTime,
    round: &mut Round<'_>,
) -> Result<(), CatalogError> {
    if !writes.is_empty() {
        // A read-only identity writes nothing: refused before the database is touched.
        signal::check_may_bump(session, signal::Signal::Catalog).await?;
    }
    let mut writes = writes.into_iter().peekable();
    while writes.peek().is_some() {
        let chunk: Vec<Write> = writes
            .by_ref()
            .take(settings.chunk_records.max(1))
            .collect();
        let mut batch = CatalogBatch::default();
        for w in &chunk {
            match w {
                Write::Update(u) => batch.updates.push(RecordUpdate {
                    record: u.record.clone(),
                    version: u.version,
                    aliases: u.aliases.clone(),
                    drop_alias: u.drop_alias.clone(),
                }),
                Write::Create(c) => batch.creates.push(NewRecord {
                    record: new_record(&c.item, String::new(), &settings.curator, now),
                    aliases: c.alias_writes(),
                }),
            }
        }
        match catalog::write(db, &batch).await {
            Ok(written) => {
                let mut created = written.created.into_iter();
                for w in chunk {
                    match w {
                        Write::Update(u) => updated(round, *u),
                        Write::Create(c) => match created.next() {
                            Some(id) => round.done(&c.item, &id, Change::Created),
                            None => round.skip(ItemProblem::new(
                                &c.item.label,
                                "the database gave no id for it",
                            )),
                        },
                    }
                }
                signal::bump(session, signal::Signal::Catalog, &settings.curator).await?;
            }
            Err(e @ DbError::Conflict { .. }) => {
                round.chunk_raced(chunk.into_iter().map(Write::into_item), &e)
            }
            Err(DbError::Exhausted { what }) => {
                for w in chunk {
                    let item = w.into_item();
                    round.skip(ItemProblem::new(
                        &item.label,
                        format!("not written: {what} are exhausted"),
                    ));
                }
            }
            Err(e) => return Err(e.into()),
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
