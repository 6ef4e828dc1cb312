//! Catalog rows as the database returns them, and their conversion to and from the
//! records (`znode_schema::records`) the rest of the code uses. Times are unix
//! milliseconds (the schema's one time type); a record read back keeps millisecond
//! precision, which is what its clip stamp uses.

use time::OffsetDateTime;
use znode_schema::records::{AliasTarget, CatalogFields, ClipRecord, EpisodeRecord};
use znode_schema::SCHEMA_VERSION;

use super::{Alias, CatalogRecord, Versioned};
use crate::DbError;

/// The columns episodes and clips share, as [`SharedColumns`] names them.
macro_rules! shared_columns {
    () => {
        "id, title, description, media_url, media_type, curator, priority, initial_curated, last_curated, content_hash, duration_s, guid"
    };
}

/// The columns of `episodes` that [`EpisodeRow`] reads.
pub(crate) const EPISODE_COLUMNS: &str = concat!(shared_columns!(), ", air_date, version, seq");
/// The columns of `aliases` in the order [`AliasRow`] holds them.
pub(crate) const ALIAS_COLUMNS: &str = "key, target, id, key_text";
/// The columns of `clips` that [`ClipRow`] reads.
pub(crate) const CLIP_COLUMNS: &str = concat!(shared_columns!(), ", version, seq");

/// The columns episodes and clips share: one conversion for both (see [`fields`]).
#[derive(sqlx::FromRow)]
pub(crate) struct SharedColumns {
    id: String,
    title: String,
    description: Option<String>,
    media_url: String,
    media_type: Option<String>,
    curator: String,
    priority: i64,
    initial_curated: i64,
    last_curated: i64,
    content_hash: Option<String>,
    duration_s: Option<f64>,
    guid: Option<String>,
}

/// An `episodes` row.
#[derive(sqlx::FromRow)]
pub(crate) struct EpisodeRow {
    #[sqlx(flatten)]
    shared: SharedColumns,
    air_date: Option<String>,
    version: i64,
    seq: i64,
}

/// A `clips` row.
#[derive(sqlx::FromRow)]
pub(crate) struct ClipRow {
    #[sqlx(flatten)]
    shared: SharedColumns,
    version: i64,
    seq: i64,
}

/// A catalog row that becomes a [`Versioned`] record: lets one reader serve both tables.
pub(crate) trait CatalogRow:
    for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin + 'static
{
    /// The record this row holds, or why it is corrupt.
    fn into_versioned(self) -> Result<Versioned, DbError>;
}

impl CatalogRow for EpisodeRow {
    fn into_versioned(self) -> Result<Versioned, DbError> {
        let (id, fields) = fields(self.shared)?;
        Ok(Versioned {
            record: CatalogRecord::Episode(EpisodeRecord {
                schema: SCHEMA_VERSION,
                id,
                air_date: self.air_date,
                fields,
            }),
            version: self.version,
            seq: self.seq,
        })
    }
}

impl CatalogRow for ClipRow {
    fn into_versioned(self) -> Result<Versioned, DbError> {
        let (id, fields) = fields(self.shared)?;
        Ok(Versioned {
            record: CatalogRecord::Clip(ClipRecord {
                schema: SCHEMA_VERSION,
                id,
                fields,
            }),
            version: self.version,
            seq: self.seq,
        })
    }
}

/// An `aliases` row: its name (column `key`), target, id, and what it stands for
/// (`key_text`).
pub(crate) type AliasRow = (String, String, String, String);

/// What the planner needs of an episode, read without the long text fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeSummary {
    /// Episode id.
    pub id: String,
    /// Higher first.
    pub priority: i64,
    /// First curation, unix ms (the queue order key).
    pub initial_curated_ms: i64,
    /// Where the media is (copied into jobs).
    pub media_url: String,
    /// The batch that last wrote it.
    pub seq: i64,
}

/// The columns of an [`EpisodeSummary`].
pub(crate) const SUMMARY_COLUMNS: &str = "id, priority, initial_curated, media_url, seq";
/// An [`EpisodeSummary`] row.
pub(crate) type SummaryRow = (String, i64, i64, String, i64);

/// Clips are few (thousands) and the planner needs their stamps: read whole.
pub type ClipSummary = Versioned;

pub(crate) fn summary(row: SummaryRow) -> EpisodeSummary {
    let (id, priority, initial_curated_ms, media_url, seq) = row;
    EpisodeSummary {
        id,
        priority,
        initial_curated_ms,
        media_url,
        seq,
    }
}

/// Unix milliseconds of a time (the stored form).
pub(crate) fn millis(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn time_of(column: &str, id: &str, ms: i64) -> Result<OffsetDateTime, DbError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).map_err(|e| {
        DbError::Corrupt {
            what: format!("{id}: {column}"),
            reason: format!("{ms} is not a time: {e}"),
        }
    })
}

/// The shared fields of a row, checked (times must be times), with the row's id.
fn fields(row: SharedColumns) -> Result<(String, CatalogFields), DbError> {
    let fields = CatalogFields {
        title: row.title,
        description: row.description,
        media_url: row.media_url,
        media_type: row.media_type,
        curator: row.curator,
        priority: row.priority,
        initial_curated: time_of("initial_curated", &row.id, row.initial_curated)?,
        last_curated: time_of("last_curated", &row.id, row.last_curated)?,
        content_hash: row.content_hash,
        duration_s: row.duration_s,
        guid: row.guid,
        // Holds are coordination: they live in ZooKeeper (`/control/hold/{id}`), not
        // in the catalog.
        held: false,
    };
    Ok((row.id, fields))
}

/// The stored name of a target.
pub(crate) fn target_name(target: AliasTarget) -> &'static str {
    match target {
        AliasTarget::Episode => "episode",
        AliasTarget::Clip => "clip",
    }
}

/// The id counter of a target.
pub(crate) fn counter_name(target: AliasTarget) -> &'static str {
    match target {
        AliasTarget::Episode => "episodes",
        AliasTarget::Clip => "clips",
    }
}

pub(crate) fn alias(row: AliasRow) -> Result<Alias, DbError> {
    let (name, target, id, key) = row;
    let target = match target.as_str() {
        "episode" => AliasTarget::Episode,
        "clip" => AliasTarget::Clip,
        other => {
            return Err(DbError::Corrupt {
                what: format!("alias {name}: target"),
                reason: format!("{other:?} is neither episode nor clip"),
            })
        }
    };
    Ok(Alias {
        name,
        target,
        id,
        key,
    })
}

/// The id a new record numbered `number` gets, or `None` past the id format's range.
pub(crate) fn new_id(target: AliasTarget, number: i64) -> Option<String> {
    let number = u64::try_from(number).ok()?;
    match target {
        AliasTarget::Episode => Some(znode_schema::paths::episode_id(number)),
        AliasTarget::Clip => u32::try_from(number).ok().map(znode_schema::paths::clip_id),
    }
}

/// The number in a record id (`e0000042` -> 42, `c000007` -> 7).
pub(crate) fn number_of(id: &str) -> Option<u64> {
    let digits = id.strip_prefix('e').or_else(|| id.strip_prefix('c'))?;
    digits.parse().ok()
}
