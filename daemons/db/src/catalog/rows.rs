//! Catalog rows as the database returns them, and their conversion to and from the
//! records (`znode_schema::records`) the rest of the code uses. Times are unix
//! milliseconds (the schema's one time type); a record read back keeps millisecond
//! precision, which is what its clip stamp uses.

use time::OffsetDateTime;
use znode_schema::records::{AliasTarget, CatalogFields, ClipRecord, EpisodeRecord};
use znode_schema::SCHEMA_VERSION;

use super::{Alias, CatalogRecord, Versioned};
use crate::DbError;

/// The columns of `episodes` in the order [`EpisodeRow`] holds them.
pub(crate) const EPISODE_COLUMNS: &str = "id, title, description, media_url, media_type, curator, priority, initial_curated, last_curated, content_hash, duration_s, guid, air_date, version, seq";
/// The columns of `aliases` in the order [`AliasRow`] holds them.
pub(crate) const ALIAS_COLUMNS: &str = "key, target, id, key_text";
/// The columns of `clips` in the order [`ClipRow`] holds them.
pub(crate) const CLIP_COLUMNS: &str = "id, title, description, media_url, media_type, curator, priority, initial_curated, last_curated, content_hash, duration_s, guid, version, seq";

/// An `episodes` row.
pub(crate) type EpisodeRow = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    String,
    i64,
    i64,
    i64,
    Option<String>,
    Option<f64>,
    Option<String>,
    Option<String>,
    i64,
    i64,
);

/// A `clips` row.
pub(crate) type ClipRow = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    String,
    i64,
    i64,
    i64,
    Option<String>,
    Option<f64>,
    Option<String>,
    i64,
    i64,
);

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

#[allow(clippy::too_many_arguments)]
fn fields(
    id: &str,
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
) -> Result<CatalogFields, DbError> {
    Ok(CatalogFields {
        title,
        description,
        media_url,
        media_type,
        curator,
        priority,
        initial_curated: time_of("initial_curated", id, initial_curated)?,
        last_curated: time_of("last_curated", id, last_curated)?,
        content_hash,
        duration_s,
        guid,
        // Holds are coordination: they live in ZooKeeper (`/control/hold/{id}`), not
        // in the catalog.
        held: false,
    })
}

pub(crate) fn episode(row: EpisodeRow) -> Result<Versioned, DbError> {
    let (
        id,
        title,
        description,
        media_url,
        media_type,
        curator,
        priority,
        ic,
        lc,
        hash,
        dur,
        guid,
        air_date,
        version,
        seq,
    ) = row;
    let fields = fields(
        &id,
        title,
        description,
        media_url,
        media_type,
        curator,
        priority,
        ic,
        lc,
        hash,
        dur,
        guid,
    )?;
    Ok(Versioned {
        record: CatalogRecord::Episode(EpisodeRecord {
            schema: SCHEMA_VERSION,
            id,
            air_date,
            fields,
        }),
        version,
        seq,
    })
}

pub(crate) fn clip(row: ClipRow) -> Result<Versioned, DbError> {
    let (
        id,
        title,
        description,
        media_url,
        media_type,
        curator,
        priority,
        ic,
        lc,
        hash,
        dur,
        guid,
        version,
        seq,
    ) = row;
    let fields = fields(
        &id,
        title,
        description,
        media_url,
        media_type,
        curator,
        priority,
        ic,
        lc,
        hash,
        dur,
        guid,
    )?;
    Ok(Versioned {
        record: CatalogRecord::Clip(ClipRecord {
            schema: SCHEMA_VERSION,
            id,
            fields,
        }),
        version,
        seq,
    })
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
