//! Moving a ZooKeeper-only tree's catalog and research archive into the database
//! (`archivist migrate`, issue 22): batched inserts of the records as the tree held them,
//! and the counts that verify the move.
//!
//! Every insert is `ON CONFLICT DO NOTHING` on the table's key, so a batch written twice
//! (a migration run again, or interrupted and re-run) changes nothing the second time,
//! and a row the new daemons wrote since is never replaced by the tree's older copy.
//! Each batch is one transaction stamped with one `seq` of its counter, like any other
//! write, so a planner's watermark sees migrated rows as changes. Rows go in multi-row
//! `INSERT`s (up to [`ROWS_PER_STATEMENT`]): one statement per row would make a 100k
//! episode migration a round trip per row on PostgreSQL.

use sqlx::AnyConnection;
use znode_schema::clipset::ClipSet;
use znode_schema::occurrences;
use znode_schema::records::{
    AliasRecord, AliasTarget, CatalogFields, ClipRecord, EpisodeRecord, ResearchRecord,
};

use crate::error::Context;
use crate::{next_seq, Counter, Database, DbError};

/// Most rows in one `INSERT` statement: far under SQLite's 32,766 and PostgreSQL's 65,535
/// bound parameters for the widest table (15 columns).
pub const ROWS_PER_STATEMENT: usize = 200;

/// One bound value (the types the `Any` driver carries).
#[derive(Debug, Clone)]
enum Value {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    OptFloat(Option<f64>),
}

/// Rows of one table for a multi-row insert.
struct Insert<'a> {
    table: &'a str,
    columns: &'a [&'a str],
    conflict: &'a str,
    rows: Vec<Vec<Value>>,
}

impl Insert<'_> {
    /// Runs the insert in statements of [`ROWS_PER_STATEMENT`] rows; returns the rows
    /// inserted (those already present are not counted).
    async fn run(self, conn: &mut AnyConnection, what: &str) -> Result<u64, DbError> {
        let mut inserted = 0;
        for chunk in self.rows.chunks(ROWS_PER_STATEMENT) {
            let mut sql = format!(
                "INSERT INTO {} ({}) VALUES ",
                self.table,
                self.columns.join(", ")
            );
            let mut n = 0;
            for (i, row) in chunk.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push('(');
                for j in 0..row.len() {
                    if j > 0 {
                        sql.push_str(", ");
                    }
                    n += 1;
                    sql.push_str(&format!("${n}"));
                }
                sql.push(')');
            }
            sql.push_str(&format!(" ON CONFLICT ({}) DO NOTHING", self.conflict));
            // Rows may bind unknown floats (durations).
            let mut query = crate::binds_nullable_float(sqlx::query(&sql));
            for value in chunk.iter().flatten() {
                query = match value {
                    Value::Text(v) => query.bind(v.clone()),
                    Value::OptText(v) => query.bind(v.clone()),
                    Value::Int(v) => query.bind(*v),
                    Value::OptFloat(v) => query.bind(*v),
                };
            }
            inserted += query
                .execute(&mut *conn)
                .await
                .context(|| format!("{what}: inserting into {}", self.table))?
                .rows_affected();
        }
        Ok(inserted)
    }
}

/// Unix milliseconds, the schema's time (written without naming `time`'s type, which
/// this crate does not depend on).
macro_rules! unix_ms {
    ($t:expr) => {
        ($t.unix_timestamp_nanos() / 1_000_000) as i64
    };
}

/// The catalog columns a record's fields fill. `held` is not one: holds are
/// coordination and live in ZooKeeper (`/control/hold/{id}`, migration 0002); the
/// binary's `migrate` turns an old record's `held: true` into that node.
const CATALOG_COLUMNS: [&str; 11] = [
    "title",
    "description",
    "media_url",
    "media_type",
    "curator",
    "priority",
    "initial_curated",
    "last_curated",
    "content_hash",
    "duration_s",
    "guid",
];

fn catalog_values(f: &CatalogFields) -> Vec<Value> {
    vec![
        Value::Text(f.title.clone()),
        Value::OptText(f.description.clone()),
        Value::Text(f.media_url.clone()),
        Value::OptText(f.media_type.clone()),
        Value::Text(f.curator.clone()),
        Value::Int(f.priority),
        Value::Int(unix_ms!(f.initial_curated)),
        Value::Int(unix_ms!(f.last_curated)),
        Value::OptText(f.content_hash.clone()),
        Value::OptFloat(f.duration_s),
        Value::OptText(f.guid.clone()),
    ]
}

/// What one batch wrote: rows new to the database (a re-run writes 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inserted {
    /// Rows of the batch's main table (episodes, clips, aliases, research).
    pub records: u64,
    /// Research runs, found pairs and errors (research batches only).
    pub parts: u64,
}

/// The catalog records of one batch, as the tree held them.
#[derive(Debug, Default)]
pub struct CatalogBatch {
    /// `/catalog/episodes/*`.
    pub episodes: Vec<EpisodeRecord>,
    /// `/catalog/clips/*`.
    pub clips: Vec<ClipRecord>,
    /// `/catalog/aliases/*`: the node's name (the alias a curator looks up) and its record.
    pub aliases: Vec<(String, AliasRecord)>,
}

/// Inserts a batch of catalog records that the database does not hold yet, in one
/// transaction with one catalog `seq`.
///
/// # Errors
/// [`DbError::Query`] naming the table; nothing of the batch is written then.
pub async fn insert_catalog(db: &Database, batch: &CatalogBatch) -> Result<Inserted, DbError> {
    let what = || "migrating catalog records".to_string();
    let mut tx = db.begin_write(what).await?;
    let seq = next_seq(&mut tx, Counter::Catalog).await?;
    let mut inserted = 0;
    if !batch.episodes.is_empty() {
        let mut columns = vec!["id", "air_date"];
        columns.extend(CATALOG_COLUMNS);
        columns.push("seq");
        let rows = batch
            .episodes
            .iter()
            .map(|e| {
                let mut row = vec![
                    Value::Text(e.id.clone()),
                    Value::OptText(e.air_date.clone()),
                ];
                row.extend(catalog_values(&e.fields));
                row.push(Value::Int(seq));
                row
            })
            .collect();
        inserted += Insert {
            table: "episodes",
            columns: &columns,
            conflict: "id",
            rows,
        }
        .run(&mut tx, &what())
        .await?;
    }
    if !batch.clips.is_empty() {
        let mut columns = vec!["id"];
        columns.extend(CATALOG_COLUMNS);
        columns.push("seq");
        let rows = batch
            .clips
            .iter()
            .map(|c| {
                let mut row = vec![Value::Text(c.id.clone())];
                row.extend(catalog_values(&c.fields));
                row.push(Value::Int(seq));
                row
            })
            .collect();
        inserted += Insert {
            table: "clips",
            columns: &columns,
            conflict: "id",
            rows,
        }
        .run(&mut tx, &what())
        .await?;
    }
    if !batch.aliases.is_empty() {
        let rows = batch
            .aliases
            .iter()
            .map(|(name, a)| {
                vec![
                    Value::Text(name.clone()),
                    Value::Text(
                        match a.target {
                            AliasTarget::Episode => "episode",
                            AliasTarget::Clip => "clip",
                        }
                        .into(),
                    ),
                    Value::Text(a.id.clone()),
                    Value::Int(seq),
                ]
            })
            .collect();
        inserted += Insert {
            table: "aliases",
            columns: &["key", "target", "id", "seq"],
            conflict: "key",
            rows,
        }
        .run(&mut tx, &what())
        .await?;
    }
    tx.commit()
        .await
        .context(|| format!("{}: committing", what()))?;
    Ok(Inserted {
        records: inserted,
        parts: 0,
    })
}

/// Inserts a batch of research records that the database does not hold yet (the
/// episode's row, its runs, found clips and errors), in one transaction with one
/// research `seq`.
///
/// # Errors
/// [`DbError::Query`] naming the table; nothing of the batch is written then.
pub async fn insert_research(
    db: &Database,
    records: &[ResearchRecord],
) -> Result<Inserted, DbError> {
    let what = || "migrating research records".to_string();
    if records.is_empty() {
        return Ok(Inserted::default());
    }
    let mut tx = db.begin_write(what).await?;
    let seq = next_seq(&mut tx, Counter::Research).await?;
    let research = records
        .iter()
        .map(|r| {
            vec![
                Value::Text(r.episode.clone()),
                Value::OptFloat(r.episode_duration_s),
                Value::Int(seq),
            ]
        })
        .collect();
    let mut runs = Vec::new();
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for r in records {
        for run in &r.runs {
            runs.push(vec![
                Value::Text(r.episode.clone()),
                Value::Text(run.job.clone()),
                Value::Text(run.researcher.clone()),
                Value::Int(unix_ms!(run.at)),
                Value::Text(run.clips.to_string()),
            ]);
        }
        for (clip, list) in &r.found {
            found.push(vec![
                Value::Text(r.episode.clone()),
                Value::Text(clip.clone()),
                Value::Text(occurrences::format_list(list)),
            ]);
        }
        for (clip, message) in &r.errors {
            errors.push(vec![
                Value::Text(r.episode.clone()),
                Value::Text(clip.clone()),
                Value::Text(message.clone()),
                Value::OptText(r.error_stamps.get(clip).cloned()),
            ]);
        }
    }
    let records_inserted = Insert {
        table: "research",
        columns: &["episode", "duration_s", "seq"],
        conflict: "episode",
        rows: research,
    }
    .run(&mut tx, &what())
    .await?;
    let mut parts = Insert {
        table: "research_runs",
        columns: &["episode", "job", "researcher", "at", "clips"],
        conflict: "episode, job",
        rows: runs,
    }
    .run(&mut tx, &what())
    .await?;
    parts += Insert {
        table: "found",
        columns: &["episode", "clip", "occurrences"],
        conflict: "episode, clip",
        rows: found,
    }
    .run(&mut tx, &what())
    .await?;
    parts += Insert {
        table: "clip_errors",
        columns: &["episode", "clip", "message", "stamp"],
        conflict: "episode, clip",
        rows: errors,
    }
    .run(&mut tx, &what())
    .await?;
    tx.commit()
        .await
        .context(|| format!("{}: committing", what()))?;
    Ok(Inserted {
        records: records_inserted,
        parts,
    })
}

/// What the database holds, in the units `archivist migrate` verifies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Episodes.
    pub episodes: u64,
    /// Clips.
    pub clips: u64,
    /// Aliases.
    pub aliases: u64,
    /// Episodes with research.
    pub research: u64,
    /// Research runs.
    pub runs: u64,
    /// Researched (episode, clip) pairs: the sum of the runs' clip sets.
    pub researched_pairs: u64,
    /// Found (episode, clip) pairs.
    pub found: u64,
    /// Pairs whose research ended in an error.
    pub errors: u64,
}

impl Counts {
    /// Adds one research record's parts (the one rule for what a record counts as).
    pub fn add_record(&mut self, record: &ResearchRecord) {
        self.research += 1;
        self.runs += record.runs.len() as u64;
        self.researched_pairs += record
            .runs
            .iter()
            .map(|r| r.clips.len() as u64)
            .sum::<u64>();
        self.found += record.found.len() as u64;
        self.errors += record.errors.len() as u64;
    }

    /// The figures by name, for messages and reports.
    pub fn named(&self) -> [(&'static str, u64); 8] {
        [
            ("episodes", self.episodes),
            ("clips", self.clips),
            ("aliases", self.aliases),
            ("research records", self.research),
            ("research runs", self.runs),
            ("researched pairs", self.researched_pairs),
            ("found pairs", self.found),
            ("errors", self.errors),
        ]
    }
}

/// A catalog table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogTable {
    /// `episodes` (was `/catalog/episodes`).
    Episodes,
    /// `clips` (was `/catalog/clips`).
    Clips,
    /// `aliases` (was `/catalog/aliases`), keyed by the alias name.
    Aliases,
}

impl CatalogTable {
    fn table_and_key(self) -> (&'static str, &'static str) {
        match self {
            CatalogTable::Episodes => ("episodes", "id"),
            CatalogTable::Clips => ("clips", "id"),
            CatalogTable::Aliases => ("aliases", "key"),
        }
    }
}

/// Text keys of `column` in `table` that are among `keys`.
async fn keys_present(
    db: &Database,
    table: &str,
    column: &str,
    keys: &[String],
) -> Result<std::collections::HashSet<String>, DbError> {
    let mut present = std::collections::HashSet::new();
    for chunk in keys.chunks(ROWS_PER_STATEMENT) {
        let list: Vec<String> = (1..=chunk.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "SELECT {column} FROM {table} WHERE {column} IN ({})",
            list.join(", ")
        );
        let mut query = sqlx::query_as::<_, (String,)>(&sql);
        for key in chunk {
            query = query.bind(key.clone());
        }
        let rows = query
            .fetch_all(db.pool())
            .await
            .context(|| format!("checking which of {} keys {table} holds", chunk.len()))?;
        present.extend(rows.into_iter().map(|(k,)| k));
    }
    Ok(present)
}

/// How many of `ids` the catalog table holds.
///
/// # Errors
/// [`DbError::Query`].
pub async fn present_catalog(
    db: &Database,
    table: CatalogTable,
    ids: &[String],
) -> Result<u64, DbError> {
    let (table, key) = table.table_and_key();
    let present = keys_present(db, table, key, ids).await?;
    Ok(ids.iter().filter(|id| present.contains(*id)).count() as u64)
}

/// How much of `records` the database holds, in [`Counts`]' units: the episode's row,
/// each run (by job) whose stored clip set holds every clip of the record's run (its
/// pairs counted), each found pair and each error. Equal to the records' own counts
/// ([`Counts::add_record`]) when nothing of them is missing.
///
/// # Errors
/// [`DbError::Query`]; [`DbError::Corrupt`] for a stored clip set that does not parse.
pub async fn present_research(
    db: &Database,
    records: &[ResearchRecord],
) -> Result<Counts, DbError> {
    use std::collections::{HashMap, HashSet};
    let episodes: Vec<String> = records.iter().map(|r| r.episode.clone()).collect();
    let mut counts = Counts {
        research: keys_present(db, "research", "episode", &episodes)
            .await?
            .len() as u64,
        ..Counts::default()
    };
    let mut runs: HashMap<(String, String), ClipSet> = HashMap::new();
    let mut found: HashSet<(String, String)> = HashSet::new();
    let mut errors: HashSet<(String, String)> = HashSet::new();
    for chunk in episodes.chunks(ROWS_PER_STATEMENT) {
        let list: Vec<String> = (1..=chunk.len()).map(|n| format!("${n}")).collect();
        let list = list.join(", ");
        let sql =
            format!("SELECT episode, job, clips FROM research_runs WHERE episode IN ({list})");
        let mut query = sqlx::query_as::<_, (String, String, String)>(&sql);
        for e in chunk {
            query = query.bind(e.clone());
        }
        for (episode, job, clips) in query
            .fetch_all(db.pool())
            .await
            .context(|| "reading back migrated research runs".to_string())?
        {
            let set: ClipSet = clips
                .parse()
                .map_err(|e: znode_schema::clipset::BadClipSet| DbError::Corrupt {
                    what: format!("research run {job} of episode {episode}"),
                    reason: e.to_string(),
                })?;
            runs.insert((episode, job), set);
        }
        for (table, into) in [("found", &mut found), ("clip_errors", &mut errors)] {
            let sql = format!("SELECT episode, clip FROM {table} WHERE episode IN ({list})");
            let mut query = sqlx::query_as::<_, (String, String)>(&sql);
            for e in chunk {
                query = query.bind(e.clone());
            }
            into.extend(
                query
                    .fetch_all(db.pool())
                    .await
                    .context(|| format!("reading back migrated {table} rows"))?,
            );
        }
    }
    for r in records {
        for run in &r.runs {
            if let Some(stored) = runs.get(&(r.episode.clone(), run.job.clone())) {
                if run.clips.iter().all(|n| stored.contains(n)) {
                    counts.runs += 1;
                    counts.researched_pairs += run.clips.len() as u64;
                }
            }
        }
        let key = |clip: &String| (r.episode.clone(), clip.clone());
        counts.found += r.found.keys().filter(|c| found.contains(&key(c))).count() as u64;
        counts.errors += r.errors.keys().filter(|c| errors.contains(&key(c))).count() as u64;
    }
    Ok(counts)
}

/// Counts what the database holds. The researched pairs are summed over the runs' clip
/// sets, read in pages by key (bounded memory at any size).
///
/// # Errors
/// [`DbError::Query`]; [`DbError::Corrupt`] for a run whose clip set does not parse.
pub async fn counts(db: &Database) -> Result<Counts, DbError> {
    let pool = db.pool();
    let count = |table: &'static str| async move {
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(pool)
            .await
            .context(|| format!("counting the rows of {table}"))?;
        Ok::<u64, DbError>(n.max(0) as u64)
    };
    let mut counts = Counts {
        episodes: count("episodes").await?,
        clips: count("clips").await?,
        aliases: count("aliases").await?,
        research: count("research").await?,
        runs: count("research_runs").await?,
        researched_pairs: 0,
        found: count("found").await?,
        errors: count("clip_errors").await?,
    };
    let mut after = (String::new(), String::new());
    loop {
        let page: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT episode, job, clips FROM research_runs \
             WHERE episode > $1 OR (episode = $2 AND job > $3) \
             ORDER BY episode, job LIMIT 5000",
        )
        .bind(after.0.clone())
        .bind(after.0.clone())
        .bind(after.1.clone())
        .fetch_all(pool)
        .await
        .context(|| "summing the researched pairs of research_runs".to_string())?;
        let Some(last) = page.last() else { break };
        after = (last.0.clone(), last.1.clone());
        for (episode, job, clips) in &page {
            let set: ClipSet = clips
                .parse()
                .map_err(|e: znode_schema::clipset::BadClipSet| DbError::Corrupt {
                    what: format!("research run {job} of episode {episode}"),
                    reason: e.to_string(),
                })?;
            counts.researched_pairs += set.len() as u64;
        }
    }
    Ok(counts)
}
