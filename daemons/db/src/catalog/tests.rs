//! What needs the pool itself (the integration tests in `tests/catalog.rs` cover the
//! rest against both backends).

use super::*;
use znode_schema::SCHEMA_VERSION;

fn episode(n: u32) -> NewRecord {
    let at = time::OffsetDateTime::UNIX_EPOCH;
    NewRecord {
        record: CatalogRecord::Episode(EpisodeRecord {
            schema: SCHEMA_VERSION,
            id: String::new(),
            air_date: None,
            fields: CatalogFields {
                title: format!("E{n}"),
                description: None,
                media_url: format!("http://h/e{n}.mp3"),
                media_type: None,
                curator: "test".into(),
                priority: 0,
                initial_curated: at,
                last_curated: at,
                content_hash: None,
                duration_s: None,
                guid: None,
                held: false,
            },
        }),
        aliases: vec![AliasWrite {
            name: format!("url-e{n}"),
            key: format!("http://h/e{n}.mp3"),
            replaces: None,
        }],
    }
}

/// A counter behind the records in use (lowered by hand) made every retry fail on the
/// same numbers (issue 17's defect, in ZooKeeper then): the failed write moves it past
/// them, and the retry succeeds with the next free number.
#[tokio::test]
async fn a_counter_behind_the_records_is_moved_past_them() {
    let dir = std::env::temp_dir().join(format!(
        "archivist-db-catalog-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Database::connect(&format!("sqlite://{}/a.db", dir.display()))
        .await
        .unwrap();
    let one = |n| CatalogBatch {
        creates: vec![episode(n)],
        updates: Vec::new(),
    };
    write(&db, &one(1)).await.unwrap();
    write(&db, &one(2)).await.unwrap();
    sqlx::query("UPDATE counters SET value = 0 WHERE name = 'episodes'")
        .execute(db.pool())
        .await
        .unwrap();
    let err = write(&db, &one(3)).await.unwrap_err();
    assert!(matches!(err, DbError::Conflict { .. }), "{err}");
    assert_eq!(write(&db, &one(3)).await.unwrap().created, ["e0000003"]);
    db.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Search by title (the console's): case is ignored, `%` and `_` are matched as
/// themselves (not as LIKE's wildcards), and pages go on after the last id.
#[tokio::test]
async fn a_title_search_ignores_case_and_takes_wildcards_literally() {
    let dir = std::env::temp_dir().join(format!(
        "archivist-db-search-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Database::connect(&format!("sqlite://{}/a.db", dir.display()))
        .await
        .unwrap();
    let titles = [
        "Sale: 50% off",
        "Sale: 500 off",
        "a_b show",
        "axb show",
        "AXB again",
        "Émission",
    ];
    let creates = titles
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut r = episode(u32::try_from(i).unwrap());
            if let CatalogRecord::Episode(e) = &mut r.record {
                e.fields.title = t.to_string();
            }
            r
        })
        .collect();
    write(
        &db,
        &CatalogBatch {
            creates,
            updates: Vec::new(),
        },
    )
    .await
    .unwrap();
    let found = |text: &'static str, after: &'static str, limit: i64| {
        let db = db.clone();
        async move {
            search_titles(&db, AliasTarget::Episode, text, after, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|(_, title)| title)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(found("50%", "", 10).await, ["Sale: 50% off"]);
    assert_eq!(found("A_B", "", 10).await, ["a_b show"]);
    assert_eq!(found("axb", "", 10).await, ["axb show", "AXB again"]);
    // Folded alike on both sides, whatever the database's lower() does.
    assert_eq!(found("Émission", "", 10).await, ["Émission"]);
    let first = search_titles(&db, AliasTarget::Episode, "sale", "", 1)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    let (after, _) = &first[0];
    let rest = search_titles(&db, AliasTarget::Episode, "sale", after, 10)
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_ne!(&rest[0].0, after);
    let _ = std::fs::remove_dir_all(&dir);
}
