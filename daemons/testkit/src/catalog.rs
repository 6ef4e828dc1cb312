//! Catalog records written straight into a test tree, standing in for the catalog
//! daemon. One copy for every crate's tests (the planner's, the researcher's and the
//! admin's each wrote their own record builders and writers).

use archivist_engine::schema::paths;
use archivist_engine::schema::records::{CatalogFields, ClipRecord, EpisodeRecord};
use archivist_engine::schema::SCHEMA_VERSION;
use archivist_engine::{store, Session};
use time::OffsetDateTime;

/// The fields of a test record: `title`, its media at `media_url`, first and last
/// curated at `curated`, priority 0, not held, nothing else known. Tests that need more
/// set the fields they care about with struct update syntax
/// (`CatalogFields { held: true, ..fields(..) }`).
pub fn fields(title: &str, media_url: &str, curated: OffsetDateTime) -> CatalogFields {
    CatalogFields {
        title: title.to_string(),
        description: None,
        media_url: media_url.to_string(),
        media_type: None,
        curator: "test".into(),
        priority: 0,
        initial_curated: curated,
        last_curated: curated,
        content_hash: None,
        duration_s: None,
        guid: None,
        held: false,
    }
}

/// Writes (creates or overwrites) episode `id` with `fields`.
///
/// # Panics
/// If the record cannot be encoded or written.
pub async fn put_episode(session: &Session, id: &str, fields: CatalogFields) {
    let record = EpisodeRecord {
        schema: SCHEMA_VERSION,
        id: id.to_string(),
        air_date: None,
        fields,
    };
    let path = paths::episode(id);
    let data = store::encode(&path, &record).expect("encode episode");
    crate::write_node(session, &path, &data).await;
}

/// Writes (creates or overwrites) clip `id` with `fields`.
///
/// # Panics
/// If the record cannot be encoded or written.
pub async fn put_clip(session: &Session, id: &str, fields: CatalogFields) {
    let record = ClipRecord {
        schema: SCHEMA_VERSION,
        id: id.to_string(),
        fields,
    };
    let path = paths::clip(id);
    let data = store::encode(&path, &record).expect("encode clip");
    crate::write_node(session, &path, &data).await;
}
