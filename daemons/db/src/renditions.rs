//! Renditions (tables `renditions`, `rendition_pins`, `run_renditions`; migration 0006):
//! which exact audio an episode's results were measured on.
//!
//! The same episode URL can serve different bytes over time (dynamic ad insertion, a
//! re-upload), and an offset holds only in the bytes it was found in. So every complete
//! download is recorded as a rendition, named by the sha256 of its bytes; the first one
//! pins the episode, and later jobs research the pinned bytes (the researcher keeps
//! them in its media store), so all clips of an episode are measured on the same audio.
//! Each research run records the rendition it used ([`record_run`]). A download that
//! finds other bytes than the pin is a new rendition the operator is told about
//! ([`Recorded::Differs`]; `status` counts them). The pin moves ([`move_pin`]) only
//! when its bytes can no longer be had. docs/researcher.md, "Renditions", is the policy.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::error::{Context, DbError};
use crate::research::{from_ms, ms};
use crate::Database;

/// One exact body an episode's URL served.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendition {
    /// Episode id.
    pub episode: String,
    /// sha256 of the bytes, lowercase hex (the media store's key).
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Duration of the decoded audio, seconds.
    pub duration_s: Option<f64>,
    /// When it was first fetched.
    pub fetched_at: OffsetDateTime,
    /// The catalog's media URL it was last fetched from.
    pub url: String,
    /// The URL after redirects.
    pub final_url: String,
    /// The server's `ETag`, if any.
    pub etag: Option<String>,
    /// The server's `Last-Modified`, if any.
    pub last_modified: Option<String>,
}

/// An episode's pin: the rendition later research is measured on.
#[derive(Debug, Clone, PartialEq)]
pub struct Pin {
    /// The pinned rendition.
    pub rendition: Rendition,
    /// When it was pinned.
    pub pinned_at: OffsetDateTime,
    /// How often the pin moved (0: the first complete download's).
    pub moves: i64,
}

/// What [`record`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Recorded {
    /// The episode had no pin: this rendition is now pinned.
    Pinned,
    /// The bytes are the pinned rendition's.
    SameAsPin,
    /// Other bytes than the pin (recorded; the pin stays).
    Differs {
        /// The pin, unchanged.
        pin: Box<Pin>,
        /// True the first time these bytes were seen.
        first_time: bool,
    },
}

/// Whole-database figures, for `status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Episodes with a pinned rendition.
    pub pinned: i64,
    /// Episodes with more than one rendition (their audio changed at least once).
    pub changed: i64,
    /// Pinned episodes whose server, when last asked, served other audio than the pin
    /// (the rendition seen last is not the pinned one). One whose server went back to
    /// the pin is in `changed` but not here (outside 23b M3).
    pub serving_other: i64,
    /// Renditions recorded.
    pub renditions: i64,
}

type Row = (
    String,
    String,
    i64,
    Option<f64>,
    i64,
    String,
    String,
    Option<String>,
    Option<String>,
);

const COLUMNS: &str =
    "r.episode, r.sha256, r.bytes, r.duration_s, r.fetched_at, r.url, r.final_url, r.etag, \
     r.last_modified";

fn rendition(row: Row) -> Result<Rendition, DbError> {
    let (episode, sha256, bytes, duration_s, fetched_at, url, final_url, etag, last_modified) = row;
    let place = format!("renditions ({episode}, {sha256})");
    Ok(Rendition {
        fetched_at: from_ms(fetched_at, &place)?,
        bytes: u64::try_from(bytes).map_err(|e| DbError::Corrupt {
            what: place.clone(),
            reason: format!("bytes {bytes}: {e}"),
        })?,
        episode,
        sha256,
        duration_s,
        url,
        final_url,
        etag,
        last_modified,
    })
}

async fn read_pin(conn: &mut sqlx::AnyConnection, episode: &str) -> Result<Option<Pin>, DbError> {
    let what = || format!("reading the pinned rendition of episode {episode}");
    let head: Option<(i64, i64)> =
        sqlx::query_as("SELECT pinned_at, moves FROM rendition_pins WHERE episode = $1")
            .bind(episode)
            .fetch_optional(&mut *conn)
            .await
            .context(what)?;
    let Some((pinned_at, moves)) = head else {
        return Ok(None);
    };
    let row: Option<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM rendition_pins p \
         JOIN renditions r ON r.episode = p.episode AND r.sha256 = p.sha256 \
         WHERE p.episode = $1"
    ))
    .bind(episode)
    .fetch_optional(&mut *conn)
    .await
    .context(what)?;
    let place = format!("rendition_pins ({episode})");
    let Some(row) = row else {
        return Err(DbError::Corrupt {
            what: place,
            reason: "names a rendition that is not in renditions".into(),
        });
    };
    Ok(Some(Pin {
        rendition: rendition(row)?,
        pinned_at: from_ms(pinned_at, &place)?,
        moves,
    }))
}

/// The episode's pinned rendition, `None` before its first complete download.
///
/// # Errors
/// The database failing, or a stored value that does not parse.
pub async fn pin(db: &Database, episode: &str) -> Result<Option<Pin>, DbError> {
    let mut conn = db
        .pool()
        .acquire()
        .await
        .context(|| format!("reading the pinned rendition of episode {episode}"))?;
    read_pin(&mut conn, episode).await
}

/// Records a complete, decoded download of the episode: the rendition is added (or
/// counted as seen again) and, if the episode has no pin yet, pinned, in one
/// transaction (two researchers racing to pin: the first commit wins, the second finds
/// its bytes the same as the pin or [`Recorded::Differs`]).
///
/// # Errors
/// The database failing.
pub async fn record(db: &Database, r: &Rendition) -> Result<Recorded, DbError> {
    let episode = r.episode.as_str();
    let what = || format!("recording a rendition of episode {episode}");
    let mut tx = db.begin_write(what).await?;
    let existed: Option<(i64,)> =
        sqlx::query_as("SELECT seen FROM renditions WHERE episode = $1 AND sha256 = $2")
            .bind(episode)
            .bind(&r.sha256)
            .fetch_optional(&mut *tx)
            .await
            .context(what)?;
    let now = ms(OffsetDateTime::now_utc());
    sqlx::query(
        "INSERT INTO renditions (episode, sha256, bytes, duration_s, fetched_at, last_seen, \
         seen, url, final_url, etag, last_modified) \
         VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $10) \
         ON CONFLICT (episode, sha256) DO UPDATE SET seen = renditions.seen + 1, \
         last_seen = excluded.last_seen, \
         duration_s = COALESCE(renditions.duration_s, excluded.duration_s), \
         url = excluded.url, final_url = excluded.final_url, \
         etag = excluded.etag, last_modified = excluded.last_modified",
    )
    .bind(episode)
    .bind(&r.sha256)
    .bind(r.bytes as i64)
    .bind(r.duration_s)
    .bind(ms(r.fetched_at))
    .bind(now)
    .bind(&r.url)
    .bind(&r.final_url)
    .bind(&r.etag)
    .bind(&r.last_modified)
    .execute(&mut *tx)
    .await
    .context(what)?;
    let pinned = sqlx::query(
        "INSERT INTO rendition_pins (episode, sha256, pinned_at, moves) VALUES ($1, $2, $3, 0) \
         ON CONFLICT (episode) DO NOTHING",
    )
    .bind(episode)
    .bind(&r.sha256)
    .bind(now)
    .execute(&mut *tx)
    .await
    .context(what)?
    .rows_affected()
        == 1;
    let pin = read_pin(&mut tx, episode).await?;
    tx.commit().await.context(what)?;
    Ok(match pin {
        _ if pinned => Recorded::Pinned,
        Some(p) if p.rendition.sha256 == r.sha256 => Recorded::SameAsPin,
        Some(p) => Recorded::Differs {
            pin: Box::new(p),
            first_time: existed.is_none(),
        },
        // Not reachable: the pin was there (the insert did nothing) and rows are never
        // deleted in a transaction that holds the write lock.
        None => Recorded::Pinned,
    })
}

/// Moves the episode's pin from `from` to `to` (a recorded rendition), only if it is
/// still `from` (a version check: two researchers forced to move it move it once).
/// True if this call moved it.
///
/// # Errors
/// The database failing.
pub async fn move_pin(db: &Database, episode: &str, from: &str, to: &str) -> Result<bool, DbError> {
    let what = || format!("moving the pinned rendition of episode {episode}");
    let done = sqlx::query(
        "UPDATE rendition_pins SET sha256 = $3, pinned_at = $4, moves = moves + 1, \
         holder = NULL, held_at = NULL \
         WHERE episode = $1 AND sha256 = $2 \
         AND EXISTS (SELECT 1 FROM renditions WHERE episode = $1 AND sha256 = $3)",
    )
    .bind(episode)
    .bind(from)
    .bind(to)
    .bind(ms(OffsetDateTime::now_utc()))
    .execute(db.pool())
    .await
    .context(what)?;
    Ok(done.rows_affected() == 1)
}

/// Records that `job`'s research run of `episode` is measured on rendition `sha256`,
/// before its first result is reported (so every stored result's run names its audio).
/// Written again by a job resumed on the same audio, it changes nothing. A run's
/// rendition is changed only while the run has no stored result (`research_runs` holds
/// no row for it) and `may_move` (the caller knows no report of the job is in flight);
/// otherwise the rendition already recorded is returned and nothing changes: results
/// measured on one audio must never be re-pointed at another (outside 23b H1: a job held,
/// released after the pin moved, re-pointed its earlier results at audio where they are
/// false).
///
/// # Errors
/// The database failing.
pub async fn record_run(
    db: &Database,
    episode: &str,
    job: &str,
    sha256: &str,
    may_move: bool,
) -> Result<Option<String>, DbError> {
    let what = || format!("recording the rendition of job {job} of episode {episode}");
    let mut tx = db.begin_write(what).await?;
    let recorded: Option<(String,)> =
        sqlx::query_as("SELECT sha256 FROM run_renditions WHERE episode = $1 AND job = $2")
            .bind(episode)
            .bind(job)
            .fetch_optional(&mut *tx)
            .await
            .context(what)?;
    match recorded {
        Some((same,)) if same == sha256 => {
            tx.commit().await.context(what)?;
            return Ok(None);
        }
        Some((other,)) => {
            let (stored,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM research_runs WHERE episode = $1 AND job = $2",
            )
            .bind(episode)
            .bind(job)
            .fetch_one(&mut *tx)
            .await
            .context(what)?;
            if stored > 0 || !may_move {
                tx.commit().await.context(what)?;
                return Ok(Some(other));
            }
        }
        None => {}
    }
    sqlx::query(
        "INSERT INTO run_renditions (episode, job, sha256, at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (episode, job) DO UPDATE SET sha256 = excluded.sha256, at = excluded.at",
    )
    .bind(episode)
    .bind(job)
    .bind(sha256)
    .bind(ms(OffsetDateTime::now_utc()))
    .execute(&mut *tx)
    .await
    .context(what)?;
    tx.commit().await.context(what)?;
    Ok(None)
}

/// The rendition each of the episode's runs was measured on, by job (runs from before
/// renditions were recorded are absent).
///
/// # Errors
/// The database failing.
pub async fn of_runs(db: &Database, episode: &str) -> Result<BTreeMap<String, String>, DbError> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT job, sha256 FROM run_renditions WHERE episode = $1 ORDER BY job")
            .bind(episode)
            .fetch_all(db.pool())
            .await
            .context(|| format!("reading the renditions of episode {episode}'s runs"))?;
    Ok(rows.into_iter().collect())
}

/// The rendition each run was measured on, of every episode whose id lies from `first`
/// to `last` (both included, in the database's order of ids: the range of one page of
/// the research archive, which is read in that order), by episode and then job. One
/// query per page of an export instead of one per episode.
///
/// # Errors
/// The database failing.
pub async fn of_runs_between(
    db: &Database,
    first: &str,
    last: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, DbError> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT episode, job, sha256 FROM run_renditions WHERE episode >= $1 AND episode <= $2",
    )
    .bind(first)
    .bind(last)
    .fetch_all(db.pool())
    .await
    .context(|| format!("reading the renditions of the runs of episodes {first} to {last}"))?;
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (episode, job, sha256) in rows {
        out.entry(episode).or_default().insert(job, sha256);
    }
    Ok(out)
}

/// Records a sighting of a rendition already recorded, without a new body: a `304`
/// naming it, or a `200` with its bytes. Its `last_seen` becomes now (so "what the
/// server serves now" is the rendition seen last, [`recently_seen`]); validators given
/// replace the stored ones, so the next conditional GET sends the server's current
/// `ETag` and `Last-Modified` (outside 23b M1: validators that changed once while the
/// bytes did not cost a full download on every job). True if the rendition exists.
///
/// # Errors
/// The database failing.
pub async fn saw(
    db: &Database,
    episode: &str,
    sha256: &str,
    validators: Option<(Option<&str>, Option<&str>)>,
) -> Result<bool, DbError> {
    let what = || format!("recording a sighting of rendition {sha256} of episode {episode}");
    let now = ms(OffsetDateTime::now_utc());
    let done = match validators {
        Some((etag, last_modified)) => sqlx::query(
            "UPDATE renditions SET last_seen = $3, etag = $4, last_modified = $5 \
             WHERE episode = $1 AND sha256 = $2",
        )
        .bind(episode)
        .bind(sha256)
        .bind(now)
        .bind(etag)
        .bind(last_modified)
        .execute(db.pool())
        .await
        .context(what)?,
        None => {
            sqlx::query("UPDATE renditions SET last_seen = $3 WHERE episode = $1 AND sha256 = $2")
                .bind(episode)
                .bind(sha256)
                .bind(now)
                .execute(db.pool())
                .await
                .context(what)?
        }
    };
    Ok(done.rows_affected() == 1)
}

/// Every rendition of the episode, the one seen last first: the first is what the
/// server served when it was last asked (a download, or a re-validation naming it).
///
/// # Errors
/// The database failing, or a stored value that does not parse.
pub async fn recently_seen(db: &Database, episode: &str) -> Result<Vec<Rendition>, DbError> {
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM renditions r WHERE r.episode = $1 \
         ORDER BY r.last_seen DESC, r.sha256"
    ))
    .bind(episode)
    .fetch_all(db.pool())
    .await
    .context(|| format!("reading the renditions of episode {episode}"))?;
    rows.into_iter().map(rendition).collect()
}

/// Records that `holder` (a researcher's member name) keeps the episode's pinned
/// rendition `sha256` in its own local media store: the planner hints that the
/// episode's jobs go there ([`holder`]). Nothing changes when the pin is another
/// rendition (it moved meanwhile). True if written.
///
/// # Errors
/// The database failing.
pub async fn set_holder(
    db: &Database,
    episode: &str,
    sha256: &str,
    holder: &str,
) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE rendition_pins SET holder = $3, held_at = $4 WHERE episode = $1 AND sha256 = $2",
    )
    .bind(episode)
    .bind(sha256)
    .bind(holder)
    .bind(ms(OffsetDateTime::now_utc()))
    .execute(db.pool())
    .await
    .context(|| format!("recording who holds the pinned rendition of episode {episode}"))?;
    Ok(done.rows_affected() == 1)
}

/// The researcher that last said it keeps the episode's pinned rendition in its own
/// local store ([`set_holder`]), if any.
///
/// # Errors
/// The database failing.
pub async fn holder(db: &Database, episode: &str) -> Result<Option<String>, DbError> {
    let row: Option<(Option<String>,)> =
        sqlx::query_as("SELECT holder FROM rendition_pins WHERE episode = $1")
            .bind(episode)
            .fetch_optional(db.pool())
            .await
            .context(|| format!("reading who holds the pinned rendition of episode {episode}"))?;
    Ok(row.and_then(|(h,)| h))
}

/// Every rendition of the episode, first fetched first.
///
/// # Errors
/// The database failing, or a stored value that does not parse.
pub async fn list(db: &Database, episode: &str) -> Result<Vec<Rendition>, DbError> {
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM renditions r WHERE r.episode = $1 ORDER BY r.fetched_at, r.sha256"
    ))
    .bind(episode)
    .fetch_all(db.pool())
    .await
    .context(|| format!("reading the renditions of episode {episode}"))?;
    rows.into_iter().map(rendition).collect()
}

/// Whole-database figures.
///
/// # Errors
/// The database failing.
pub async fn counts(db: &Database) -> Result<Counts, DbError> {
    let (pinned, changed, serving_other, renditions): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM rendition_pins), \
         (SELECT COUNT(*) FROM (SELECT episode FROM renditions GROUP BY episode \
          HAVING COUNT(*) > 1) AS c), \
         (SELECT COUNT(*) FROM rendition_pins p WHERE p.sha256 <> \
          (SELECT r.sha256 FROM renditions r WHERE r.episode = p.episode \
           ORDER BY r.last_seen DESC, r.sha256 LIMIT 1)), \
         (SELECT COUNT(*) FROM renditions)",
    )
    .fetch_one(db.pool())
    .await
    .context(|| "counting renditions".to_string())?;
    Ok(Counts {
        pinned,
        changed,
        serving_other,
        renditions,
    })
}
