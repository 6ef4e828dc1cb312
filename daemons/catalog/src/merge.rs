//! Building a new record from an item, and merging an item into a stored record.
//!
//! The rules (docs/catalog.md): a re-curation moves `last_curated`, replaces the fields
//! the item gives that differ, and keeps everything else: `initial_curated`, the id, the
//! curator that first registered it, and the content hash and duration that researchers
//! learn later. Holds are not catalog fields: they are coordination and live in
//! ZooKeeper (`/control/hold/{id}`), so curators never touch them.

use archivist_engine::schema::records::{CatalogFields, ClipRecord, EpisodeRecord};
use archivist_engine::schema::SCHEMA_VERSION;
use time::OffsetDateTime;

use crate::item::{CatalogItem, Kind};

/// A stored episode or clip: the database's record type (`archivist_db::catalog`), which
/// stores what these rules decide.
pub use archivist_db::catalog::CatalogRecord as StoredRecord;

/// Episode or clip, of a stored record.
pub fn kind_of(record: &StoredRecord) -> Kind {
    match record {
        StoredRecord::Episode(_) => Kind::Episode,
        StoredRecord::Clip(_) => Kind::Clip,
    }
}

/// A new record for an item, first curated `now`.
pub(crate) fn new_record(
    item: &CatalogItem,
    id: String,
    curator: &str,
    now: OffsetDateTime,
) -> StoredRecord {
    let fields = CatalogFields {
        title: item.title.clone(),
        description: item.description.clone(),
        media_url: item.media_url.clone(),
        media_type: item.media_type.clone(),
        curator: curator.to_string(),
        priority: item.priority.unwrap_or(0),
        initial_curated: now,
        last_curated: now,
        content_hash: None,
        duration_s: None,
        guid: item.guid.as_ref().map(|g| g.guid.clone()),
        held: false,
    };
    match item.kind {
        Kind::Episode => StoredRecord::Episode(EpisodeRecord {
            schema: SCHEMA_VERSION,
            id,
            air_date: item.air_date.clone(),
            fields,
        }),
        Kind::Clip => StoredRecord::Clip(ClipRecord {
            schema: SCHEMA_VERSION,
            id,
            fields,
        }),
    }
}

fn replace<T: PartialEq + Clone>(
    slot: &mut T,
    value: &T,
    name: &'static str,
    changed: &mut Vec<&'static str>,
) {
    if slot != value {
        *slot = value.clone();
        changed.push(name);
    }
}

fn replace_given<T: PartialEq + Clone>(
    slot: &mut Option<T>,
    value: &Option<T>,
    name: &'static str,
    changed: &mut Vec<&'static str>,
) {
    if value.is_some() && slot != value {
        slot.clone_from(value);
        changed.push(name);
    }
}

/// Merges an item into a stored record curated again `now`; returns the names of the
/// fields that changed (`last_curated` always moves and is not listed).
pub(crate) fn merge(
    record: &mut StoredRecord,
    item: &CatalogItem,
    now: OffsetDateTime,
) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if let (StoredRecord::Episode(r), Some(_)) = (&mut *record, &item.air_date) {
        replace_given(&mut r.air_date, &item.air_date, "air_date", &mut changed);
    }
    let f = record.fields_mut();
    replace(&mut f.title, &item.title, "title", &mut changed);
    replace(&mut f.media_url, &item.media_url, "media_url", &mut changed);
    replace_given(
        &mut f.description,
        &item.description,
        "description",
        &mut changed,
    );
    replace_given(
        &mut f.media_type,
        &item.media_type,
        "media_type",
        &mut changed,
    );
    if let Some(p) = item.priority {
        replace(&mut f.priority, &p, "priority", &mut changed);
    }
    let guid = item.guid.as_ref().map(|g| g.guid.clone());
    replace_given(&mut f.guid, &guid, "guid", &mut changed);
    if now > f.last_curated {
        f.last_curated = now;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    fn item() -> CatalogItem {
        CatalogItem::new(Kind::Episode, "http://a/e.mp3", "E", "t")
            .unwrap()
            .with_priority(Some(3))
            .with_air_date(Some("2024-01-01".into()))
    }

    #[test]
    fn merge_keeps_initial_and_moves_last() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let mut rec = new_record(&item(), "e0000001".into(), "c1", t0);
        let t1 = t0 + Duration::hours(1);
        let mut next = item().with_priority(Some(9));
        next.title = "E2".into();
        let changed = merge(&mut rec, &next, t1);
        assert_eq!(changed, vec!["title", "priority"]);
        assert_eq!(rec.fields().initial_curated, t0);
        assert_eq!(rec.fields().last_curated, t1);
        assert_eq!(rec.fields().curator, "c1");
    }

    #[test]
    fn absent_optional_fields_keep_what_is_stored() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let mut rec = new_record(&item(), "e0000001".into(), "c1", t0);
        let bare = CatalogItem::new(Kind::Episode, "http://a/e.mp3", "E", "t").unwrap();
        assert!(merge(&mut rec, &bare, t0 + Duration::seconds(1)).is_empty());
        assert_eq!(rec.fields().priority, 3);
        let StoredRecord::Episode(e) = &rec else {
            panic!("episode expected")
        };
        assert_eq!(e.air_date.as_deref(), Some("2024-01-01"));
    }
}
