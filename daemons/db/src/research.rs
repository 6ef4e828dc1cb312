//! The research archive: per episode, the runs that researched it (clip numbers as
//! ranges, a [`ClipSet`]), the occurrences of the clips found and per-clip errors
//! (tables `research`, `research_runs`, `found`, `clip_errors`). It keeps the shape of
//! the `ResearchRecord` that lived at `/research/{episode}`: 100k episodes x 2,000 clips
//! would be 200M rows as one row per researched pair, and are a few rows per episode
//! this way. Callers read and update whole [`ResearchRecord`]s, so the rules that
//! decide what is stored stay where they were (the recorder's merge).
//!
//! Exactly once: [`update`] runs in one transaction that first locks the episode (SQLite:
//! the write lock of `BEGIN IMMEDIATE`; PostgreSQL: the episode's `research` row `FOR
//! UPDATE`), reads the record, lets the caller merge into it, and writes back only what
//! changed, keyed by (episode, job) and (episode, clip). A replay merges into a record
//! that already holds the pairs, changes nothing and writes nothing.

use std::collections::BTreeMap;

use sqlx::AnyConnection;
use time::OffsetDateTime;
use znode_schema::clipset::ClipSet;
use znode_schema::occurrences;
use znode_schema::records::{Occurrence, ResearchRecord, ResearchRun};

use crate::error::{Context, DbError};
use crate::{next_seq, Backend, Counter, Database};

/// Whole-archive figures, for `status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Episodes with research.
    pub episodes: i64,
    /// Runs (researcher contributions) over all episodes.
    pub runs: i64,
    /// (episode, clip) pairs found.
    pub found: i64,
    /// (episode, clip) pairs that ended in an error.
    pub errors: i64,
}

/// What [`update`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Updated<T> {
    /// What the caller's merge returned.
    pub value: T,
    /// The research sequence number stamped on the episode, when something changed
    /// (`None`: the merge changed nothing, and nothing was written).
    pub seq: Option<i64>,
}

/// One clip's occurrences in one episode, for `results --clip`.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundIn {
    /// Episode id.
    pub episode: String,
    /// Where the clip occurs.
    pub occurrences: Vec<Occurrence>,
}

/// Unix milliseconds, the schema's time.
pub(crate) fn ms(at: OffsetDateTime) -> i64 {
    (at.unix_timestamp_nanos() / 1_000_000) as i64
}

/// A stored unix-milliseconds time; `what` names the row if it is out of range.
pub(crate) fn from_ms(ms: i64, what: &str) -> Result<OffsetDateTime, DbError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).map_err(|e| {
        DbError::Corrupt {
            what: what.to_string(),
            reason: e.to_string(),
        }
    })
}

/// Where an episode's research is, in words, for a report that names a record that
/// does not decode (`status`, `fsck`): one spelling everywhere.
pub fn place(episode: &str) -> String {
    format!("database research of {episode}")
}

/// One episode's research, `None` if it has none.
pub async fn read(db: &Database, episode: &str) -> Result<Option<ResearchRecord>, DbError> {
    let mut conn = db
        .pool()
        .acquire()
        .await
        .context(|| format!("reading research of episode {episode}"))?;
    let mut records = load(&mut conn, Range::One(episode)).await?;
    Ok(records.pop())
}

/// Whether clip number `clip_number` was researched for `episode`.
pub async fn is_researched(
    db: &Database,
    episode: &str,
    clip_number: u32,
) -> Result<bool, DbError> {
    Ok(read(db, episode)
        .await?
        .is_some_and(|r| r.is_researched(clip_number)))
}

/// Up to `limit` episodes' research in episode order, starting after `after` (`None`:
/// from the first): walk the whole archive page by page in bounded memory (export,
/// status, fsck).
pub async fn page(
    db: &Database,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<ResearchRecord>, DbError> {
    page_each(db, after, limit)
        .await?
        .into_iter()
        .map(|(_, record)| record)
        .collect()
}

/// The episodes whose research changed after the watermark `after_seq`, oldest change
/// first, at most `limit`, with the seq of their last change: a reader keeps the
/// highest seq it saw and asks again from there (the planner, woken by
/// `/signals/research`).
pub async fn changed_since(
    db: &Database,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<(i64, ResearchRecord)>, DbError> {
    let what = || format!("reading research changed after seq {after_seq}");
    let mut conn = db.pool().acquire().await.context(what)?;
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT episode, seq FROM research WHERE seq > $1 ORDER BY seq, episode LIMIT $2",
    )
    .bind(after_seq)
    .bind(limit as i64)
    .fetch_all(&mut *conn)
    .await
    .context(what)?;
    let mut out = Vec::with_capacity(rows.len());
    for (episode, seq) in rows {
        if let Some(record) = load(&mut conn, Range::One(&episode)).await?.pop() {
            out.push((seq, record));
        }
    }
    Ok(out)
}

/// The research sequence number of the last committed change: a watermark. Every row
/// with a `seq` up to it is committed (`seq`s are handed out under the counter's row
/// lock, so in commit order), and any later change carries a higher one.
pub async fn last_seq(db: &Database) -> Result<i64, DbError> {
    db.current_seq(Counter::Research).await
}

/// Up to `limit` episodes' research in episode order after `after` (`None`: from the
/// first), each as read: a record that does not decode is an `Err` for that episode
/// alone (the planner's load leaves it out and plans the rest). Paging by episode id
/// neither skips nor repeats an episode while the archive is being written: the key
/// never changes, whatever `seq` a concurrent write stamps.
pub async fn page_each(
    db: &Database,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<EachRecord>, DbError> {
    let what = || format!("reading a page of research after {after:?}");
    let mut conn = db.pool().acquire().await.context(what)?;
    let (first, last) = {
        let episodes: Vec<(String,)> = sqlx::query_as(
            "SELECT episode FROM research WHERE episode > $1 AND seq > 0 \
             ORDER BY episode LIMIT $2",
        )
        .bind(after.unwrap_or(""))
        .bind(limit as i64)
        .fetch_all(&mut *conn)
        .await
        .context(what)?;
        match (episodes.first(), episodes.last()) {
            (Some((first,)), Some((last,))) => (first.clone(), last.clone()),
            _ => return Ok(Vec::new()),
        }
    };
    load_each(&mut conn, Range::Between(&first, &last)).await
}

/// The episodes whose research changed after `after_seq` and up to `upto_seq` (both
/// watermarks from [`last_seq`]), oldest change first, at most `limit`, each with the
/// `seq` of its change and the record as read (`Err`: it does not decode). A reader
/// asks again after the highest `seq` it got until a page is short. An episode
/// written again meanwhile moves past `upto_seq`: it is read with the next watermark,
/// never lost (its wake-up, `/signals/research`, comes after that commit).
pub async fn changed_between(
    db: &Database,
    after_seq: i64,
    upto_seq: i64,
    limit: usize,
) -> Result<Vec<(i64, EachRecord)>, DbError> {
    let what = || format!("reading research changed in seq {after_seq}..={upto_seq}");
    let mut conn = db.pool().acquire().await.context(what)?;
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT episode, seq FROM research WHERE seq > $1 AND seq <= $2 \
         ORDER BY seq, episode LIMIT $3",
    )
    .bind(after_seq)
    .bind(upto_seq)
    .bind(limit as i64)
    .fetch_all(&mut *conn)
    .await
    .context(what)?;
    let mut out = Vec::with_capacity(rows.len());
    for (episode, seq) in rows {
        for each in load_each(&mut conn, Range::One(&episode)).await? {
            out.push((seq, each));
        }
    }
    Ok(out)
}

/// Every episode where `clip` was found, in episode order (indexed by clip).
pub async fn found_by_clip(db: &Database, clip: &str) -> Result<Vec<FoundIn>, DbError> {
    let what = || format!("reading the episodes where clip {clip} was found");
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT episode, occurrences FROM found WHERE clip = $1 ORDER BY episode")
            .bind(clip)
            .fetch_all(db.pool())
            .await
            .context(what)?;
    rows.into_iter()
        .map(|(episode, text)| {
            let occurrences =
                occurrences::parse_list(&text).map_err(|reason| DbError::Corrupt {
                    what: format!("found ({episode}, {clip})"),
                    reason,
                })?;
            Ok(FoundIn {
                episode,
                occurrences,
            })
        })
        .collect()
}

/// Whole-archive figures.
pub async fn counts(db: &Database) -> Result<Counts, DbError> {
    let (episodes, runs, found, errors): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM research), (SELECT COUNT(*) FROM research_runs), \
         (SELECT COUNT(*) FROM found), (SELECT COUNT(*) FROM clip_errors)",
    )
    .fetch_one(db.pool())
    .await
    .context(|| "counting the research archive".to_string())?;
    Ok(Counts {
        episodes,
        runs,
        found,
        errors,
    })
}

/// The highest job id the archive's runs name (`None`: no runs), in the form job ids
/// have (`j` and ten digits, `znode_schema::paths::job_id`). The archive keeps every
/// job id for ever while ZooKeeper forgets recorded jobs after the reaper's retention,
/// so this is what keeps a job counter moved back from re-issuing an archived id
/// (`archivist_engine::counter`). One indexed probe from the top of `research_runs
/// (job)`; ids of another form (written by hand) are skipped, a bounded number of them.
pub async fn highest_job(db: &Database) -> Result<Option<String>, DbError> {
    /// Rows read from the top: ids of another form sort among real ones only when
    /// written by hand, so a few are enough to get past them.
    const PROBE: i64 = 64;
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT job FROM research_runs WHERE job >= 'j0000000000' AND job <= 'j9999999999' \
         ORDER BY job DESC LIMIT $1",
    )
    .bind(PROBE)
    .fetch_all(db.pool())
    .await
    .context(|| "reading the highest job id of the research archive".to_string())?;
    Ok(rows
        .into_iter()
        .map(|(job,)| job)
        .find(|job| job.len() == 11 && job[1..].bytes().all(|b| b.is_ascii_digit())))
}

/// Reads `episode`'s research (an empty record if none) under the episode's lock, lets
/// `merge` change it, and writes back what changed, all in one transaction; see the
/// module's doc for why this stores every pair exactly once.
pub async fn update<T, F>(db: &Database, episode: &str, merge: F) -> Result<Updated<T>, DbError>
where
    F: FnOnce(&mut ResearchRecord) -> T,
{
    let what = || format!("storing research of episode {episode}");
    let mut tx = db.begin_write(what).await?;
    if db.backend() == Backend::Postgres {
        // The row to lock: a new episode's is inserted (and gone again on rollback);
        // a concurrent insert of the same episode waits for this transaction.
        sqlx::query(
            "INSERT INTO research (episode, duration_s, seq) VALUES ($1, NULL, 0) \
             ON CONFLICT (episode) DO NOTHING",
        )
        .bind(episode)
        .execute(&mut *tx)
        .await
        .context(what)?;
        sqlx::query("SELECT episode FROM research WHERE episode = $1 FOR UPDATE")
            .bind(episode)
            .fetch_optional(&mut *tx)
            .await
            .context(what)?;
    }
    let before = load(&mut tx, Range::One(episode))
        .await?
        .pop()
        .unwrap_or_else(|| ResearchRecord::new(episode));
    let mut after = before.clone();
    let value = merge(&mut after);
    if after == before {
        tx.rollback().await.context(what)?;
        return Ok(Updated { value, seq: None });
    }
    let seq = next_seq(&mut tx, Counter::Research).await?;
    write_changes(&mut tx, &before, &after, seq).await?;
    tx.commit().await.context(what)?;
    Ok(Updated {
        value,
        seq: Some(seq),
    })
}

/// Writes the rows of `after` that differ from `before`, keyed by episode and job or
/// clip, and stamps the episode with `seq`.
async fn write_changes(
    conn: &mut AnyConnection,
    before: &ResearchRecord,
    after: &ResearchRecord,
    seq: i64,
) -> Result<(), DbError> {
    let episode = after.episode.as_str();
    let what = || format!("storing research of episode {episode}");
    crate::binds_nullable_float(sqlx::query(
        "INSERT INTO research (episode, duration_s, seq) VALUES ($1, $2, $3) \
         ON CONFLICT (episode) DO UPDATE SET duration_s = excluded.duration_s, seq = excluded.seq",
    ))
    .bind(episode)
    .bind(after.episode_duration_s)
    .bind(seq)
    .execute(&mut *conn)
    .await
    .context(what)?;
    let old_runs: BTreeMap<&str, &ResearchRun> =
        before.runs.iter().map(|r| (r.job.as_str(), r)).collect();
    for run in &after.runs {
        if old_runs.get(run.job.as_str()) == Some(&run) {
            continue;
        }
        sqlx::query(
            "INSERT INTO research_runs (episode, job, researcher, at, clips) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (episode, job) DO UPDATE SET \
             researcher = excluded.researcher, at = excluded.at, clips = excluded.clips",
        )
        .bind(episode)
        .bind(&run.job)
        .bind(&run.researcher)
        .bind(ms(run.at))
        .bind(run.clips.to_string())
        .execute(&mut *conn)
        .await
        .context(what)?;
    }
    for job in old_runs.keys() {
        if !after.runs.iter().any(|r| r.job == *job) {
            sqlx::query("DELETE FROM research_runs WHERE episode = $1 AND job = $2")
                .bind(episode)
                .bind(*job)
                .execute(&mut *conn)
                .await
                .context(what)?;
        }
    }
    for (clip, list) in &after.found {
        if before.found.get(clip) == Some(list) {
            continue;
        }
        sqlx::query(
            "INSERT INTO found (episode, clip, occurrences) VALUES ($1, $2, $3) \
             ON CONFLICT (episode, clip) DO UPDATE SET occurrences = excluded.occurrences",
        )
        .bind(episode)
        .bind(clip)
        .bind(occurrences::format_list(list))
        .execute(&mut *conn)
        .await
        .context(what)?;
    }
    for clip in before.found.keys() {
        if !after.found.contains_key(clip) {
            sqlx::query("DELETE FROM found WHERE episode = $1 AND clip = $2")
                .bind(episode)
                .bind(clip)
                .execute(&mut *conn)
                .await
                .context(what)?;
        }
    }
    for (clip, message) in &after.errors {
        let stamp = after.error_stamps.get(clip);
        if before.errors.get(clip) == Some(message) && before.error_stamps.get(clip) == stamp {
            continue;
        }
        sqlx::query(
            "INSERT INTO clip_errors (episode, clip, message, stamp) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (episode, clip) DO UPDATE SET message = excluded.message, \
             stamp = excluded.stamp",
        )
        .bind(episode)
        .bind(clip)
        .bind(message)
        .bind(stamp.map(String::as_str))
        .execute(&mut *conn)
        .await
        .context(what)?;
    }
    for clip in before.errors.keys() {
        if !after.errors.contains_key(clip) {
            sqlx::query("DELETE FROM clip_errors WHERE episode = $1 AND clip = $2")
                .bind(episode)
                .bind(clip)
                .execute(&mut *conn)
                .await
                .context(what)?;
        }
    }
    Ok(())
}

/// Which episodes [`load`] reads.
enum Range<'a> {
    One(&'a str),
    /// From the first to the last, both included.
    Between(&'a str, &'a str),
}

impl Range<'_> {
    /// The condition on `episode`, and its two bounds.
    fn bounds(&self) -> (&str, &str) {
        match self {
            Range::One(e) => (e, e),
            Range::Between(a, b) => (a, b),
        }
    }
}

/// The research records of the episodes in `range`, in episode order; the first
/// record that does not decode fails the read (see [`load_each`]).
async fn load(conn: &mut AnyConnection, range: Range<'_>) -> Result<Vec<ResearchRecord>, DbError> {
    load_each(conn, range)
        .await?
        .into_iter()
        .map(|(_, record)| record)
        .collect()
}

/// One episode's research as read: the record, or why it does not decode (the other
/// episodes of the same read are unaffected).
pub type EachRecord = (String, Result<ResearchRecord, DbError>);

/// The research records of the episodes in `range`, in episode order: four range
/// queries, whatever the number of episodes. A stored value that does not parse marks
/// only its own episode [`DbError::Corrupt`], so a reader of many (the planner) can
/// leave that one out and go on with the rest.
async fn load_each(conn: &mut AnyConnection, range: Range<'_>) -> Result<Vec<EachRecord>, DbError> {
    let (lo, hi) = range.bounds();
    let what = || format!("reading research of episodes {lo}..={hi}");
    let heads: Vec<(String, Option<f64>)> = sqlx::query_as(
        "SELECT episode, duration_s FROM research \
         WHERE episode >= $1 AND episode <= $2 AND seq > 0 ORDER BY episode",
    )
    .bind(lo)
    .bind(hi)
    .fetch_all(&mut *conn)
    .await
    .context(what)?;
    let mut records: BTreeMap<String, Result<ResearchRecord, DbError>> = heads
        .into_iter()
        .map(|(episode, duration)| {
            let mut r = ResearchRecord::new(&episode);
            r.episode_duration_s = duration;
            (episode, Ok(r))
        })
        .collect();
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let runs: Vec<(String, String, String, i64, String)> = sqlx::query_as(
        "SELECT episode, job, researcher, at, clips FROM research_runs \
         WHERE episode >= $1 AND episode <= $2 ORDER BY episode, at, job",
    )
    .bind(lo)
    .bind(hi)
    .fetch_all(&mut *conn)
    .await
    .context(what)?;
    for (episode, job, researcher, at, clips) in runs {
        let Some(Ok(record)) = records.get_mut(&episode) else {
            continue;
        };
        let place = format!("research_runs ({episode}, {job})");
        let run = clips
            .parse()
            .map_err(|e: znode_schema::clipset::BadClipSet| DbError::Corrupt {
                what: place.clone(),
                reason: e.to_string(),
            })
            .and_then(|clips: ClipSet| {
                Ok(ResearchRun {
                    at: from_ms(at, &place)?,
                    job,
                    researcher,
                    clips,
                })
            });
        match run {
            Ok(run) => record.runs.push(run),
            Err(e) => {
                records.insert(episode, Err(e));
            }
        }
    }
    let found: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT episode, clip, occurrences FROM found \
         WHERE episode >= $1 AND episode <= $2 ORDER BY episode, clip",
    )
    .bind(lo)
    .bind(hi)
    .fetch_all(&mut *conn)
    .await
    .context(what)?;
    for (episode, clip, text) in found {
        let Some(Ok(record)) = records.get_mut(&episode) else {
            continue;
        };
        match occurrences::parse_list(&text) {
            Ok(list) => {
                record.found.insert(clip, list);
            }
            Err(reason) => {
                let what = format!("found ({episode}, {clip})");
                records.insert(episode, Err(DbError::Corrupt { what, reason }));
            }
        }
    }
    let errors: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT episode, clip, message, stamp FROM clip_errors \
         WHERE episode >= $1 AND episode <= $2 ORDER BY episode, clip",
    )
    .bind(lo)
    .bind(hi)
    .fetch_all(&mut *conn)
    .await
    .context(what)?;
    for (episode, clip, message, stamp) in errors {
        let Some(Ok(record)) = records.get_mut(&episode) else {
            continue;
        };
        if let Some(stamp) = stamp {
            record.error_stamps.insert(clip.clone(), stamp);
        }
        record.errors.insert(clip, message);
    }
    Ok(records.into_iter().collect())
}
