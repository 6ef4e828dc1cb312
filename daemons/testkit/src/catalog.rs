//! The fields of test catalog records, one copy for every crate's tests. The catalog is
//! in the database since issue 22 (tests store records with `archivist_db::catalog`);
//! the writers of `/catalog` nodes had no reader left and are gone.

use archivist_engine::schema::records::CatalogFields;
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
