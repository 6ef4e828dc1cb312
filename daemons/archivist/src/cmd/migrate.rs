//! `archivist migrate`: moves a ZooKeeper-only tree's catalog (`/catalog/*`) and research
//! archive (`/research/*`) into the database (issue 22), verifies that the database holds
//! every record, and with `--delete-zk` then deletes the moved nodes.
//!
//! Bounded memory: one directory's child names at a time (ZooKeeper lists a directory
//! whole; about 12 bytes a name) and one batch of records. Idempotent: the database
//! writes are keyed inserts that leave existing rows alone
//! (`archivist_db::migrate`), so a second run, or a run after an interrupted one, writes
//! only what is missing. The verification reads back what each batch wrote, by key, and
//! compares it with what the tree holds, so it holds whatever else the database holds.
//! `--delete-zk` reads every node again, checks the database holds that version of it,
//! and deletes it only at that version: a node changed since is kept, and said.
//!
//! Run it with the daemons stopped (or at least the curators and recorders): a record
//! written to the tree during the migration is migrated only if its batch had not been
//! read yet; a second run picks it up.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use archivist_admin::Progress;
use archivist_db::migrate::{self, CatalogBatch, CatalogTable, Counts};
use archivist_db::{catalog, Database};
use archivist_engine::ops;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    self, AliasRecord, AliasTarget, ClipRecord, EpisodeRecord, Record, ResearchRecord,
};
use archivist_engine::{zk, Session};

use crate::cli::GlobalOpts;
use crate::cmd::admin::progress::Bar;

/// Arguments of `migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Records read from ZooKeeper and written to the database per transaction.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch: u32,
    /// Once the database is verified to hold every record, delete the migrated
    /// `/catalog/*` and `/research/*` nodes from ZooKeeper (their directories stay).
    #[arg(long)]
    pub delete_zk: bool,
}

/// The directories migrated, in order: clips and episodes before the aliases that point
/// at them, the catalog before the research about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Clips,
    Episodes,
    Aliases,
    Research,
}

impl Dir {
    const ALL: [Dir; 4] = [Dir::Clips, Dir::Episodes, Dir::Aliases, Dir::Research];

    fn path(self) -> &'static str {
        match self {
            Dir::Clips => paths::CLIPS,
            Dir::Episodes => paths::EPISODES,
            Dir::Aliases => paths::ALIASES,
            Dir::Research => paths::RESEARCH,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dir::Clips => "clips",
            Dir::Episodes => "episodes",
            Dir::Aliases => "aliases",
            Dir::Research => "research",
        }
    }
}

/// One batch as read from the tree: the records, and each node's name and version.
#[derive(Default)]
struct Read {
    batch: CatalogBatch,
    research: Vec<ResearchRecord>,
    nodes: Vec<(String, i32)>,
    unreadable: Vec<String>,
}

fn decode_into<T: Record>(
    path: &str,
    bytes: &[u8],
    out: &mut Vec<T>,
    bad: &mut Vec<String>,
) -> bool {
    match records::decode::<T>(path, bytes) {
        Ok(r) => {
            out.push(r);
            true
        }
        Err(e) => {
            bad.push(e.to_string());
            false
        }
    }
}

/// Reads the named nodes of `dir` (all requests in flight at once); a node deleted since
/// the listing is skipped.
async fn read_batch(session: &Session, dir: Dir, names: &[String]) -> Result<Read> {
    let node_paths: Vec<String> = names
        .iter()
        .map(|n| format!("{}/{n}", dir.path()))
        .collect();
    let sent: Vec<_> = node_paths
        .iter()
        .map(|p| session.client().get_data(p))
        .collect();
    let mut read = Read::default();
    for ((name, path), result) in names
        .iter()
        .zip(&node_paths)
        .zip(ops::await_all(sent).await)
    {
        let (bytes, stat) = match result {
            Ok(found) => found,
            Err(zk::Error::NoNode) => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {path}")),
        };
        let ok = match dir {
            Dir::Clips => {
                decode_into::<ClipRecord>(path, &bytes, &mut read.batch.clips, &mut read.unreadable)
            }
            Dir::Episodes => decode_into::<EpisodeRecord>(
                path,
                &bytes,
                &mut read.batch.episodes,
                &mut read.unreadable,
            ),
            Dir::Aliases => {
                let mut one: Vec<AliasRecord> = Vec::new();
                let ok = decode_into(path, &bytes, &mut one, &mut read.unreadable);
                read.batch
                    .aliases
                    .extend(one.into_iter().map(|a| (name.clone(), a)));
                ok
            }
            Dir::Research => decode_into::<ResearchRecord>(
                path,
                &bytes,
                &mut read.research,
                &mut read.unreadable,
            ),
        };
        let ok = ok && named_as_held(dir, name, path, &mut read);
        if ok {
            read.nodes.push((name.clone(), stat.version));
        }
    }
    Ok(read)
}

/// Whether the record just decoded names the node it came from: a hand-made copy
/// (`/research/e0000002x` holding `episode: e0000002`) would store one record twice in a
/// batch (PostgreSQL refused the whole batch) or never verify. A mismatch is unreadable
/// and named, like a node that does not decode.
fn named_as_held(dir: Dir, name: &str, path: &str, read: &mut Read) -> bool {
    let held = match dir {
        Dir::Clips => read.batch.clips.last().map(|c| c.id.clone()),
        Dir::Episodes => read.batch.episodes.last().map(|e| e.id.clone()),
        Dir::Research => read.research.last().map(|r| r.episode.clone()),
        Dir::Aliases => return true,
    };
    match held {
        Some(id) if id != name => {
            match dir {
                Dir::Clips => drop(read.batch.clips.pop()),
                Dir::Episodes => drop(read.batch.episodes.pop()),
                _ => drop(read.research.pop()),
            }
            read.unreadable.push(format!(
                "{path}: the node is named {name} but its record is {id}'s"
            ));
            false
        }
        _ => true,
    }
}

/// The highest episode and clip numbers an old tree used: its allocators
/// (`/counters/episodes`, `/counters/clips`: the data version is the last number handed
/// out) and every id its records name, research included (research is never deleted, so
/// a deleted episode's number still has answers attached).
#[derive(Debug, Default)]
struct Highest {
    episode: u64,
    clip: u32,
}

impl Highest {
    fn see(&mut self, dir: Dir, read: &Read) {
        let episode = |id: &str| id.strip_prefix('e').and_then(|n| n.parse::<u64>().ok());
        match dir {
            Dir::Clips => read.batch.clips.iter().for_each(|c| {
                self.clip = self.clip.max(paths::clip_number(&c.id).unwrap_or(0));
            }),
            Dir::Episodes => read.batch.episodes.iter().for_each(|e| {
                self.episode = self.episode.max(episode(&e.id).unwrap_or(0));
            }),
            Dir::Aliases => {}
            Dir::Research => read.research.iter().for_each(|r| {
                self.episode = self.episode.max(episode(&r.episode).unwrap_or(0));
                let clips = r.runs.iter().flat_map(|run| run.clips.iter());
                let named = r.found.keys().chain(r.errors.keys());
                let named = named.filter_map(|c| paths::clip_number(c));
                self.clip = clips.chain(named).fold(self.clip, u32::max);
            }),
        }
    }

    /// Adds the old allocators' last numbers (a missing counter node counts as 0).
    async fn see_allocators(&mut self, session: &Session) -> Result<()> {
        for (path, is_episode) in [(paths::EPISODE_COUNTER, true), (paths::CLIP_COUNTER, false)] {
            let Some(stat) = archivist_engine::store::exists(session, path).await? else {
                continue;
            };
            let last = u32::try_from(stat.version).unwrap_or(0);
            if is_episode {
                self.episode = self.episode.max(u64::from(last));
            } else {
                self.clip = self.clip.max(last);
            }
        }
        Ok(())
    }

    /// Moves the database's id counters to at least these numbers, so curation never
    /// hands out a number the old tree used (a new record would inherit its research).
    async fn raise(&self, db: &Database) -> Result<()> {
        let episode = i64::try_from(self.episode).unwrap_or(i64::MAX);
        catalog::raise_counter(db, AliasTarget::Episode, episode).await?;
        catalog::raise_counter(db, AliasTarget::Clip, i64::from(self.clip)).await?;
        Ok(())
    }
}

/// What the tree holds of this batch, in [`Counts`]' units.
fn tally(dir: Dir, read: &Read) -> Counts {
    let mut counts = Counts::default();
    match dir {
        Dir::Clips => counts.clips = read.batch.clips.len() as u64,
        Dir::Episodes => counts.episodes = read.batch.episodes.len() as u64,
        Dir::Aliases => counts.aliases = read.batch.aliases.len() as u64,
        Dir::Research => read.research.iter().for_each(|r| counts.add_record(r)),
    }
    counts
}

/// What the database holds of this batch, in the same units.
async fn present(db: &Database, dir: Dir, read: &Read) -> Result<Counts> {
    let mut counts = Counts::default();
    let ids = |v: Vec<String>| v;
    match dir {
        Dir::Clips => {
            let keys = ids(read.batch.clips.iter().map(|c| c.id.clone()).collect());
            counts.clips = migrate::present_catalog(db, CatalogTable::Clips, &keys).await?;
        }
        Dir::Episodes => {
            let keys = ids(read.batch.episodes.iter().map(|e| e.id.clone()).collect());
            counts.episodes = migrate::present_catalog(db, CatalogTable::Episodes, &keys).await?;
        }
        Dir::Aliases => {
            let keys = ids(read.batch.aliases.iter().map(|(n, _)| n.clone()).collect());
            counts.aliases = migrate::present_catalog(db, CatalogTable::Aliases, &keys).await?;
        }
        Dir::Research => counts = migrate::present_research(db, &read.research).await?,
    }
    Ok(counts)
}

fn add(total: &mut Counts, more: &Counts) {
    total.episodes += more.episodes;
    total.clips += more.clips;
    total.aliases += more.aliases;
    total.research += more.research;
    total.runs += more.runs;
    total.researched_pairs += more.researched_pairs;
    total.found += more.found;
    total.errors += more.errors;
}

/// Runs `migrate`.
pub async fn run(global: &GlobalOpts, args: MigrateArgs) -> Result<ExitCode> {
    let session = crate::context::connect_initialised(global).await?;
    let db = crate::context::database(global).await?;
    let bar = Bar::stderr();
    let batch = args.batch as usize;
    let (mut in_tree, mut in_db) = (Counts::default(), Counts::default());
    let mut unreadable = Vec::new();
    let mut inserted = 0u64;
    let mut holds = 0u64;
    let mut highest = Highest::default();
    highest.see_allocators(&session).await?;
    for dir in Dir::ALL {
        let names = archivist_engine::store::children(&session, dir.path()).await?;
        bar.begin(dir.name(), names.len() as u64);
        for chunk in names.chunks(batch) {
            let read = read_batch(&session, dir, chunk).await?;
            unreadable.extend(read.unreadable.iter().cloned());
            highest.see(dir, &read);
            let written = match dir {
                Dir::Research => migrate::insert_research(&db, &read.research).await?,
                _ => migrate::insert_catalog(&db, &read.batch).await?,
            };
            inserted += written.records;
            holds += migrate_holds(&session, &db, &read.batch).await?;
            add(&mut in_tree, &tally(dir, &read));
            add(&mut in_db, &present(&db, dir, &read).await?);
            bar.advance(chunk.len() as u64);
        }
        bar.end();
    }
    highest.raise(&db).await?;
    let totals = migrate::counts(&db).await?;
    println!(
        "{:<18} {:>12} {:>12} {:>14}",
        "", "in the tree", "migrated", "database total"
    );
    let mut missing = Vec::new();
    for (((name, tree), (_, moved)), (_, total)) in in_tree
        .named()
        .into_iter()
        .zip(in_db.named())
        .zip(totals.named())
    {
        println!("{name:<18} {tree:>12} {moved:>12} {total:>14}");
        if moved != tree {
            missing.push(format!("{name}: {} of {tree}", tree.saturating_sub(moved)));
        }
    }
    println!("{inserted} records new to the database {}", db.shown_url());
    println!("{holds} hold(s) of the old records made /control/hold nodes");
    println!(
        "id counters at least e{:07} and c{:06} (the old tree's allocators and the highest ids its records name)",
        highest.episode, highest.clip
    );
    for why in &unreadable {
        eprintln!("unreadable, not migrated: {why}");
    }
    if !missing.is_empty() {
        bail!(
            "verification failed: the database lacks {}; nothing was deleted from ZooKeeper (run migrate again)",
            missing.join(", ")
        );
    }
    if !unreadable.is_empty() {
        eprintln!(
            "{} unreadable node(s) were left in ZooKeeper (fix or delete them, then run migrate again)",
            unreadable.len()
        );
    }
    if args.delete_zk {
        let (deleted, kept) = delete_migrated(&session, &db, batch, &bar).await?;
        println!("deleted {deleted} migrated nodes from ZooKeeper; kept {kept} changed or unreadable since");
    }
    Ok(if unreadable.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Turns the batch's records held in the old tree (`held: true` in the record) into
/// `/control/hold/{id}` nodes, where holds live since issue 22 (after the records are in
/// the database, which the hold checks); idempotent: an existing hold is left. Returns
/// how many it made.
async fn migrate_holds(session: &Session, db: &Database, batch: &CatalogBatch) -> Result<u64> {
    use archivist_admin::control::{set_catalog_hold, CatalogTarget};
    let held = batch
        .episodes
        .iter()
        .filter(|e| e.fields.held)
        .map(|e| CatalogTarget::Episode(e.id.clone()))
        .chain(
            batch
                .clips
                .iter()
                .filter(|c| c.fields.held)
                .map(|c| CatalogTarget::Clip(c.id.clone())),
        );
    let mut made = 0;
    for target in held {
        let report = set_catalog_hold(session, db, &target, true, "migrate")
            .await
            .with_context(|| format!("holding {target:?} as the old tree did"))?;
        made += u64::from(report.changed);
    }
    Ok(made)
}

/// Reads every node again and deletes, at the version read, those the database holds;
/// the research first, so no tree is left with research about a deleted episode.
async fn delete_migrated(
    session: &Session,
    db: &Database,
    batch: usize,
    bar: &Bar,
) -> Result<(u64, u64)> {
    let (mut deleted, mut kept) = (0u64, 0u64);
    for dir in Dir::ALL.into_iter().rev() {
        let names = archivist_engine::store::children(session, dir.path()).await?;
        bar.begin(&format!("delete {}", dir.name()), names.len() as u64);
        for chunk in names.chunks(batch) {
            let read = read_batch(session, dir, chunk).await?;
            kept += read.unreadable.len() as u64;
            if present(db, dir, &read).await? != tally(dir, &read) {
                bail!(
                    "the database lacks records of {} that the tree holds now (written during the migration?): run migrate again",
                    dir.path()
                );
            }
            let sent: Vec<_> = read
                .nodes
                .iter()
                .map(|(name, version)| {
                    session
                        .client()
                        .delete(&format!("{}/{name}", dir.path()), Some(*version))
                })
                .collect();
            for ((name, _), result) in read.nodes.iter().zip(ops::await_all(sent).await) {
                match result {
                    Ok(()) => deleted += 1,
                    Err(zk::Error::NoNode) => {}
                    Err(zk::Error::BadVersion) => kept += 1,
                    Err(e) => {
                        return Err(e).with_context(|| format!("deleting {}/{name}", dir.path()))
                    }
                }
            }
            bar.advance(chunk.len() as u64);
        }
        bar.end();
    }
    Ok((deleted, kept))
}
