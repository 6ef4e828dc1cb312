//! The catalog in the database: episodes, clips and the aliases that identify them.
//!
//! The catalog crate decides what to write (its `merge` module holds the one set of
//! re-curation rules); this module stores those decisions and reads them back, and it is
//! the only place that knows the catalog's SQL. What it guarantees:
//!
//! - **One transaction per curated batch** ([`write`]): every record of the batch with
//!   its aliases, or nothing. An update is version-checked (`version` column, the
//!   database's counterpart of a znode version) and an alias is created only where none
//!   exists or rewritten only where it still names what the caller read; anything else
//!   is a [`DbError::Conflict`] and the whole batch is rolled back, to be re-read and
//!   merged again by the caller.
//! - **Dense ids that never come back**: new records are numbered from the `episodes` /
//!   `clips` rows of `counters`, bumped in the same transaction (a deleted record's
//!   number is never given to another record, whose research it would inherit).
//! - **A change watermark**: every row written by a batch gets the batch's `seq`, the
//!   next value of the `catalog` counter row, taken in the same transaction
//!   (`crate::next_seq`). That row is locked until the commit (PostgreSQL row lock;
//!   SQLite has one writer), so batches commit in `seq` order, and a reader that has
//!   read everything up to `seq` N misses nothing when it next asks for rows after N
//!   ([`episodes_since`], [`clips_since`]). A sequence object would not do: a smaller
//!   number could commit after a larger one was read.
//! - **Bounded memory**: every listing is read in pages by key (`PAGE` rows at a time).

mod read;
mod rows;
#[cfg(test)]
mod tests;
mod write;

use std::collections::HashMap;

use znode_schema::records::{AliasTarget, CatalogFields, ClipRecord, EpisodeRecord};

use crate::{Database, DbError};

pub use rows::{ClipSummary, EpisodeSummary};

/// Rows read per page when listing.
pub const PAGE: i64 = 5_000;

/// Most rows written by one multi-row `INSERT`, and most keys in one `IN (...)` (well
/// under both backends' parameter limits: 16 columns x 500 = 8,000 parameters).
pub(crate) const INSERT_ROWS: usize = 500;

/// An episode or a clip as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum CatalogRecord {
    /// An episode.
    Episode(EpisodeRecord),
    /// A clip.
    Clip(ClipRecord),
}

impl CatalogRecord {
    /// The record id (`e0000042`, `c000007`).
    pub fn id(&self) -> &str {
        match self {
            CatalogRecord::Episode(r) => &r.id,
            CatalogRecord::Clip(r) => &r.id,
        }
    }

    /// Episode or clip.
    pub fn target(&self) -> AliasTarget {
        match self {
            CatalogRecord::Episode(_) => AliasTarget::Episode,
            CatalogRecord::Clip(_) => AliasTarget::Clip,
        }
    }

    /// The fields episodes and clips share.
    pub fn fields(&self) -> &CatalogFields {
        match self {
            CatalogRecord::Episode(r) => &r.fields,
            CatalogRecord::Clip(r) => &r.fields,
        }
    }

    /// The shared fields, to change them.
    pub fn fields_mut(&mut self) -> &mut CatalogFields {
        match self {
            CatalogRecord::Episode(r) => &mut r.fields,
            CatalogRecord::Clip(r) => &mut r.fields,
        }
    }

    fn set_id(&mut self, id: String) {
        match self {
            CatalogRecord::Episode(r) => r.id = id,
            CatalogRecord::Clip(r) => r.id = id,
        }
    }
}

/// A record with the version it was read at (for a version-checked update) and the
/// `seq` of the batch that last wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned {
    /// The record.
    pub record: CatalogRecord,
    /// Bumped by every write of the record.
    pub version: i64,
    /// The batch that last wrote it.
    pub seq: i64,
}

/// An alias: a normalized media URL's or a feed item's hash naming one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// `url-<32 hex>` or `guid-<32 hex>`.
    pub name: String,
    /// What it names.
    pub target: AliasTarget,
    /// The record id.
    pub id: String,
    /// The normalized URL or GUID the alias stands for (for people and `fsck`).
    pub key: String,
}

/// An alias to make point at a record written by the same batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasWrite {
    /// The alias name.
    pub name: String,
    /// The normalized URL or GUID it stands for.
    pub key: String,
    /// `None`: the alias must not exist (it is created). `Some(id)`: the alias exists and
    /// names `id`, a record that is gone (a stale alias); it is rewritten only if it
    /// still names `id`.
    pub replaces: Option<String>,
}

/// A record to create; its id is given by the database (the `id` in `record` is
/// ignored).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecord {
    /// The record (id ignored).
    pub record: CatalogRecord,
    /// Its aliases.
    pub aliases: Vec<AliasWrite>,
}

/// A stored record rewritten as merged by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordUpdate {
    /// The merged record.
    pub record: CatalogRecord,
    /// The version it was read at: the update applies only if nothing wrote it since.
    pub version: i64,
    /// Aliases to create or rewrite so they name this record.
    pub aliases: Vec<AliasWrite>,
    /// An alias to delete if it still names this record (the media URL the record had
    /// before it moved: one media URL is one record).
    pub drop_alias: Option<String>,
}

/// What one curated batch writes, in one transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogBatch {
    /// New records, numbered in this order (episodes and clips each from their counter).
    pub creates: Vec<NewRecord>,
    /// Rewrites of stored records.
    pub updates: Vec<RecordUpdate>,
}

impl CatalogBatch {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.creates.is_empty() && self.updates.is_empty()
    }
}

/// What a committed batch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The ids given to [`CatalogBatch::creates`], in the same order.
    pub created: Vec<String>,
    /// The batch's `seq` (0 when the batch was empty and nothing was written).
    pub seq: i64,
}

/// Record counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatalogCounts {
    /// Episodes.
    pub episodes: u64,
    /// Clips.
    pub clips: u64,
    /// Aliases.
    pub aliases: u64,
}

/// Writes one curated batch in one transaction (see the module docs).
///
/// # Errors
/// [`DbError::Conflict`] when a record was written since it was read, an alias to create
/// exists, or a stale alias moved: nothing of the batch is stored; re-read and retry.
/// Other database errors likewise leave nothing written.
pub async fn write(db: &Database, batch: &CatalogBatch) -> Result<Written, DbError> {
    if batch.is_empty() {
        return Ok(Written {
            created: Vec::new(),
            seq: 0,
        });
    }
    write::write(db, batch).await
}

/// The aliases among `names` that exist, by name.
pub async fn aliases(db: &Database, names: &[String]) -> Result<HashMap<String, Alias>, DbError> {
    read::aliases(db, names).await
}

/// The records of one kind among `ids` that exist, by id, with their versions.
pub async fn records(
    db: &Database,
    target: AliasTarget,
    ids: &[String],
) -> Result<HashMap<String, Versioned>, DbError> {
    read::records(db, target, ids).await
}

/// One episode, if it exists.
pub async fn episode(db: &Database, id: &str) -> Result<Option<EpisodeRecord>, DbError> {
    let mut found = records(db, AliasTarget::Episode, &[id.to_string()]).await?;
    Ok(match found.remove(id).map(|v| v.record) {
        Some(CatalogRecord::Episode(r)) => Some(r),
        _ => None,
    })
}

/// One clip, if it exists.
pub async fn clip(db: &Database, id: &str) -> Result<Option<ClipRecord>, DbError> {
    let mut found = records(db, AliasTarget::Clip, &[id.to_string()]).await?;
    Ok(match found.remove(id).map(|v| v.record) {
        Some(CatalogRecord::Clip(r)) => Some(r),
        _ => None,
    })
}

/// The record an alias names, if the alias and the record exist.
pub async fn resolve(db: &Database, name: &str) -> Result<Option<CatalogRecord>, DbError> {
    let Some(alias) = aliases(db, &[name.to_string()]).await?.remove(name) else {
        return Ok(None);
    };
    Ok(records(db, alias.target, std::slice::from_ref(&alias.id))
        .await?
        .remove(&alias.id)
        .map(|v| v.record))
}

/// Episodes written by the batches after `after` up to `upto` (a value of
/// [`last_seq`] read before), in `seq` order, a page at a time: `visit` sees each page,
/// so memory stays bounded by one page. Reading up to a `seq` read first is what makes
/// `upto` a sound watermark: every batch up to it has committed (batches commit in
/// `seq` order), and later ones are read next time.
pub async fn episodes_since(
    db: &Database,
    after: i64,
    upto: i64,
    mut visit: impl FnMut(Vec<EpisodeSummary>) + Send,
) -> Result<(), DbError> {
    read::episodes_since(db, after, upto, &mut visit).await
}

/// Clips written after `after` up to `upto`, like [`episodes_since`], whole (they are
/// few, and the planner needs their stamps).
pub async fn clips_since(
    db: &Database,
    after: i64,
    upto: i64,
    mut visit: impl FnMut(Vec<ClipSummary>) + Send,
) -> Result<(), DbError> {
    read::clips_since(db, after, upto, &mut visit).await
}

/// Every record of one kind in id order, a page at a time (export, `fsck`, `tree`).
pub async fn each_record(
    db: &Database,
    target: AliasTarget,
    mut visit: impl FnMut(Vec<CatalogRecord>) + Send,
) -> Result<(), DbError> {
    read::each_record(db, target, &mut visit).await
}

/// Records of one kind whose title contains `text` (ignoring case as the database's
/// `lower()` does, on both sides: ASCII in SQLite; `%` and `_` are matched literally), as (id, title) in id order after `after`, at most `limit`:
/// a page of the console's search by title. A keyset page that stops once it is full;
/// a rare text still reads the whole table (no title index: docs/console.md).
pub async fn search_titles(
    db: &Database,
    target: AliasTarget,
    text: &str,
    after: &str,
    limit: i64,
) -> Result<Vec<(String, String)>, DbError> {
    read::search_titles(db, target, text, after, limit).await
}

/// Every id of one kind in id order, a page at a time (batches naming the whole
/// catalog, `status`).
pub async fn each_id(
    db: &Database,
    target: AliasTarget,
    mut visit: impl FnMut(Vec<String>) + Send,
) -> Result<(), DbError> {
    read::each_id(db, target, &mut visit).await
}

/// Every id of one kind, in order (for callers that need them all at once).
pub async fn ids(db: &Database, target: AliasTarget) -> Result<Vec<String>, DbError> {
    let mut out = Vec::new();
    each_id(db, target, |page| out.extend(page)).await?;
    Ok(out)
}

/// Which of `ids` exist, as records of `target`.
pub async fn existing(
    db: &Database,
    target: AliasTarget,
    ids: &[String],
) -> Result<std::collections::HashSet<String>, DbError> {
    Ok(records(db, target, ids).await?.into_keys().collect())
}

/// Every alias in name order, a page at a time (`fsck`).
pub async fn each_alias(
    db: &Database,
    mut visit: impl FnMut(Vec<Alias>) + Send,
) -> Result<(), DbError> {
    read::each_alias(db, &mut visit).await
}

/// How many episodes, clips and aliases are stored.
pub async fn counts(db: &Database) -> Result<CatalogCounts, DbError> {
    read::counts(db).await
}

/// The `seq` of the last committed catalog batch (0 for an empty catalog): the
/// planner's slow safety check compares it with its watermark.
pub async fn last_seq(db: &Database) -> Result<i64, DbError> {
    read::last_seq(db).await
}

/// Sets a record id counter to at least `value` (`archivist migrate`, which brings
/// records numbered by ZooKeeper's counters).
pub async fn raise_counter(db: &Database, target: AliasTarget, value: i64) -> Result<(), DbError> {
    write::raise_counter(db, rows::counter_name(target), value).await
}

/// Stores records with their ids, replacing what is stored under those ids (every
/// field; `version` moves on), in one transaction; moves the id counters past them.
/// Returns the transaction's `seq`. For tools and tests that set up a catalog exactly
/// (curation goes through [`write`], which keeps the merge rules).
pub async fn put(db: &Database, records: &[CatalogRecord]) -> Result<i64, DbError> {
    write::put(db, records).await
}

/// Stores records and aliases with the ids they have (`archivist migrate`, moving a
/// ZooKeeper tree), skipping those already stored, so running it again is a no-op; moves
/// the id counters past the numbers imported. Returns (records, aliases) newly stored.
pub async fn import(
    db: &Database,
    records: &[CatalogRecord],
    aliases: &[Alias],
) -> Result<(u64, u64), DbError> {
    write::import(db, records, aliases).await
}
