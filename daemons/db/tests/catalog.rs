//! `archivist_db::catalog` against every backend the machine offers (SQLite always,
//! PostgreSQL when `ARCHIVIST_TEST_PG` is set): one fresh database per test and backend.

use archivist_db::catalog::{
    self, AliasWrite, CatalogBatch, CatalogRecord, NewRecord, RecordUpdate,
};
use archivist_db::{Database, DbError};
use time::OffsetDateTime;
use znode_schema::records::{AliasTarget, CatalogFields, ClipRecord, EpisodeRecord};
use znode_schema::SCHEMA_VERSION;

fn fields(title: &str, url: &str, ms: i64) -> CatalogFields {
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap();
    CatalogFields {
        title: title.to_string(),
        description: Some(format!("about {title}")),
        media_url: url.to_string(),
        media_type: Some("audio/mpeg".into()),
        curator: "test".into(),
        priority: 3,
        initial_curated: at,
        last_curated: at,
        content_hash: None,
        duration_s: None,
        guid: None,
        held: false,
    }
}

fn episode(n: u32) -> NewRecord {
    NewRecord {
        record: CatalogRecord::Episode(EpisodeRecord {
            schema: SCHEMA_VERSION,
            id: String::new(),
            air_date: Some("2024-01-02".into()),
            fields: fields(
                &format!("E{n}"),
                &format!("http://h/e{n}.mp3"),
                1_700_000_000_000,
            ),
        }),
        aliases: vec![alias(&format!("url-e{n}"))],
    }
}

fn clip(n: u32) -> NewRecord {
    NewRecord {
        record: CatalogRecord::Clip(ClipRecord {
            schema: SCHEMA_VERSION,
            id: String::new(),
            fields: fields(
                &format!("C{n}"),
                &format!("http://h/c{n}.wav"),
                1_700_000_000_123,
            ),
        }),
        aliases: vec![alias(&format!("url-c{n}"))],
    }
}

fn alias(name: &str) -> AliasWrite {
    AliasWrite {
        name: name.to_string(),
        key: format!("key of {name}"),
        replaces: None,
    }
}

fn creates(records: Vec<NewRecord>) -> CatalogBatch {
    CatalogBatch {
        creates: records,
        updates: Vec::new(),
    }
}

async fn stored(db: &Database, target: AliasTarget, id: &str) -> catalog::Versioned {
    catalog::records(db, target, &[id.to_string()])
        .await
        .unwrap()
        .remove(id)
        .unwrap_or_else(|| panic!("{id} is not stored"))
}

async fn records_are_numbered_stored_and_read_back(db: Database) {
    let written = catalog::write(&db, &creates(vec![episode(1), clip(1), episode(2)]))
        .await
        .unwrap();
    assert_eq!(written.created, ["e0000001", "c000001", "e0000002"]);
    assert!(written.seq > 0);
    let e = catalog::episode(&db, "e0000002").await.unwrap().unwrap();
    assert_eq!(e.fields.title, "E2");
    assert_eq!(e.air_date.as_deref(), Some("2024-01-02"));
    assert_eq!(e.fields.description.as_deref(), Some("about E2"));
    assert_eq!(
        e.fields.initial_curated.unix_timestamp_nanos(),
        1_700_000_000_000 * 1_000_000
    );
    let c = catalog::clip(&db, "c000001").await.unwrap().unwrap();
    assert_eq!(c.fields.media_url, "http://h/c1.wav");
    assert_eq!(
        c.fields.last_curated.unix_timestamp_nanos(),
        1_700_000_000_123 * 1_000_000
    );
    let Some(CatalogRecord::Clip(found)) = catalog::resolve(&db, "url-c1").await.unwrap() else {
        panic!("url-c1 resolves to the clip")
    };
    assert_eq!(found.id, "c000001");
    assert!(catalog::resolve(&db, "url-none").await.unwrap().is_none());
    let counts = catalog::counts(&db).await.unwrap();
    assert_eq!((counts.episodes, counts.clips, counts.aliases), (2, 1, 3));
    // Numbers continue from the counter, in order.
    let next = catalog::write(&db, &creates(vec![episode(3)]))
        .await
        .unwrap();
    assert_eq!(next.created, ["e0000003"]);
    assert!(next.seq > written.seq);
}

async fn a_stale_update_rolls_back_the_whole_batch(db: Database) {
    catalog::write(&db, &creates(vec![episode(1)]))
        .await
        .unwrap();
    let v = stored(&db, AliasTarget::Episode, "e0000001").await;
    let mut record = v.record.clone();
    record.fields_mut().title = "renamed".into();
    let update = |version| RecordUpdate {
        record: record.clone(),
        version,
        aliases: vec![alias("guid-e1")],
        drop_alias: None,
    };
    let ok = catalog::write(
        &db,
        &CatalogBatch {
            creates: Vec::new(),
            updates: vec![update(v.version)],
        },
    )
    .await
    .unwrap();
    let after = stored(&db, AliasTarget::Episode, "e0000001").await;
    assert_eq!(after.record.fields().title, "renamed");
    assert_eq!(after.version, v.version + 1);
    assert_eq!(after.seq, ok.seq);
    // The same update again (at the old version) with a create: nothing of it stays,
    // not even the new record's number.
    let stale = CatalogBatch {
        creates: vec![episode(2)],
        updates: vec![update(v.version)],
    };
    let err = catalog::write(&db, &stale).await.unwrap_err();
    assert!(matches!(err, DbError::Conflict { .. }), "{err}");
    assert_eq!(catalog::counts(&db).await.unwrap().episodes, 1);
    assert!(catalog::resolve(&db, "url-e2").await.unwrap().is_none());
    assert_eq!(
        catalog::write(&db, &creates(vec![episode(2)]))
            .await
            .unwrap()
            .created,
        ["e0000002"]
    );
    assert_eq!(catalog::last_seq(&db).await.unwrap(), ok.seq + 1);
}

async fn an_alias_made_meanwhile_is_a_conflict(db: Database) {
    catalog::write(&db, &creates(vec![episode(1)]))
        .await
        .unwrap();
    // Another curator registered the same URL meanwhile: the second create's alias
    // exists, so nothing of its batch is written (one media URL, one record).
    let mut again = episode(1);
    again.record.fields_mut().title = "twin".into();
    let err = catalog::write(&db, &creates(vec![clip(1), again]))
        .await
        .unwrap_err();
    assert!(matches!(err, DbError::Conflict { .. }), "{err}");
    let counts = catalog::counts(&db).await.unwrap();
    assert_eq!((counts.episodes, counts.clips, counts.aliases), (1, 0, 1));
}

async fn stale_aliases_move_and_old_urls_are_freed(db: Database) {
    catalog::write(&db, &creates(vec![episode(1), episode(2)]))
        .await
        .unwrap();
    // A record that is gone (e0000009) is named by an alias: rewritten only if it still
    // names e0000009.
    let mut moved = episode(3);
    moved.aliases = vec![AliasWrite {
        replaces: Some("e0000002".into()),
        ..alias("url-e2")
    }];
    let w = catalog::write(&db, &creates(vec![moved])).await.unwrap();
    let found = catalog::aliases(&db, &["url-e2".into()]).await.unwrap();
    assert_eq!(found["url-e2"].id, w.created[0]);
    let mut wrong = episode(4);
    wrong.aliases = vec![AliasWrite {
        replaces: Some("e0000099".into()),
        ..alias("url-e1")
    }];
    assert!(matches!(
        catalog::write(&db, &creates(vec![wrong])).await,
        Err(DbError::Conflict { .. })
    ));
    // A record whose media URL moves drops its old URL's alias, only if it names it.
    let v = stored(&db, AliasTarget::Episode, "e0000001").await;
    let mut record = v.record.clone();
    record.fields_mut().media_url = "http://h/new.mp3".into();
    catalog::write(
        &db,
        &CatalogBatch {
            creates: Vec::new(),
            updates: vec![RecordUpdate {
                record,
                version: v.version,
                aliases: vec![alias("url-new")],
                drop_alias: Some("url-e1".into()),
            }],
        },
    )
    .await
    .unwrap();
    let found = catalog::aliases(&db, &["url-e1".into(), "url-new".into()])
        .await
        .unwrap();
    assert!(!found.contains_key("url-e1"));
    assert_eq!(found["url-new"].id, "e0000001");
    assert_eq!(found["url-new"].key, "key of url-new");
}

async fn changes_are_read_after_a_watermark_page_by_page(db: Database) {
    let before = catalog::last_seq(&db).await.unwrap();
    // More than a page (5,000), in several transactions.
    let mut n = 0;
    for _ in 0..6 {
        let batch: Vec<NewRecord> = (0..900)
            .map(|_| {
                n += 1;
                episode(n)
            })
            .collect();
        catalog::write(&db, &creates(batch)).await.unwrap();
    }
    catalog::write(&db, &creates(vec![clip(1), clip(2)]))
        .await
        .unwrap();
    let upto = catalog::last_seq(&db).await.unwrap();
    assert_eq!(upto, before + 7);
    let mut seen = Vec::new();
    let mut pages = 0;
    catalog::episodes_since(&db, before, upto, |page| {
        pages += 1;
        seen.extend(page.into_iter().map(|e| (e.seq, e.id)));
    })
    .await
    .unwrap();
    assert_eq!(seen.len(), 5_400);
    assert!(pages >= 2, "{pages} page(s)");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, seen, "in (seq, id) order, each once");
    // After a watermark: only what changed since.
    let mid = before + 3;
    let mut later = 0;
    catalog::episodes_since(&db, mid, upto, |page| later += page.len())
        .await
        .unwrap();
    assert_eq!(later, 2_700);
    // Up to a seq read first: a later transaction is left for next time.
    catalog::write(&db, &creates(vec![episode(99_999)]))
        .await
        .unwrap();
    let mut clips = Vec::new();
    catalog::clips_since(&db, before, upto, |page| {
        clips.extend(page.into_iter().map(|v| v.record.id().to_string()))
    })
    .await
    .unwrap();
    assert_eq!(clips, ["c000001", "c000002"]);
    let mut none = 0;
    catalog::episodes_since(&db, upto, upto, |page| none += page.len())
        .await
        .unwrap();
    assert_eq!(none, 0);
    // Whole listings, a page at a time, in id order.
    let mut all = Vec::new();
    catalog::each_record(&db, AliasTarget::Episode, |page| {
        all.extend(page.into_iter().map(|r| r.id().to_string()))
    })
    .await
    .unwrap();
    assert_eq!(all.len(), 5_401);
    assert!(all.windows(2).all(|w| w[0] < w[1]));
    let mut aliases = 0;
    catalog::each_alias(&db, |page| aliases += page.len())
        .await
        .unwrap();
    assert_eq!(aliases, 5_403);
}

async fn imports_keep_ids_are_idempotent_and_move_the_counters(db: Database) {
    let mut e = episode(7);
    if let CatalogRecord::Episode(r) = &mut e.record {
        r.id = "e0000042".into();
    }
    let a = catalog::Alias {
        name: "url-e7".into(),
        target: AliasTarget::Episode,
        id: "e0000042".into(),
        key: "http://h/e7.mp3".into(),
    };
    let records = vec![e.record.clone()];
    assert_eq!(
        catalog::import(&db, &records, std::slice::from_ref(&a))
            .await
            .unwrap(),
        (1, 1)
    );
    assert_eq!(
        catalog::import(&db, &records, std::slice::from_ref(&a))
            .await
            .unwrap(),
        (0, 0)
    );
    let next = catalog::write(&db, &creates(vec![episode(8)]))
        .await
        .unwrap();
    assert_eq!(
        next.created,
        ["e0000043"],
        "numbers go on past the imported ones"
    );
}

async fn two_writers_of_one_url_end_with_one_record(db: Database) {
    let (one, two) = (
        creates(vec![episode(1), clip(1)]),
        creates(vec![episode(1), clip(2)]),
    );
    let (a, b) = tokio::join!(catalog::write(&db, &one), catalog::write(&db, &two));
    let conflicts = [&a, &b]
        .iter()
        .filter(|r| matches!(r, Err(DbError::Conflict { .. })))
        .count();
    assert_eq!(conflicts, 1, "{a:?} {b:?}");
    let counts = catalog::counts(&db).await.unwrap();
    assert_eq!((counts.episodes, counts.clips), (1, 1));
    // The loser's numbers were rolled back with it: the next record is e0000002.
    let next = catalog::write(&db, &creates(vec![episode(2)]))
        .await
        .unwrap();
    assert_eq!(next.created, ["e0000002"]);
}

async fn put_replaces_by_id_and_moves_the_counter(db: Database) {
    let mut e = episode(5).record;
    if let CatalogRecord::Episode(r) = &mut e {
        r.id = "e0000005".into();
    }
    let first = catalog::put(&db, std::slice::from_ref(&e)).await.unwrap();
    e.fields_mut().priority = 42;
    let second = catalog::put(&db, std::slice::from_ref(&e)).await.unwrap();
    assert!(second > first);
    let v = stored(&db, AliasTarget::Episode, "e0000005").await;
    assert_eq!(
        (v.record.fields().priority, v.version, v.seq),
        (42, 2, second)
    );
    let next = catalog::write(&db, &creates(vec![episode(6)]))
        .await
        .unwrap();
    assert_eq!(next.created, ["e0000006"]);
}

/// A record stored without a duration is stored again with one (and a new one with one
/// after one without): on PostgreSQL sqlx 0.8's `Any` driver declares a bound unknown
/// `f64` as `float4`, the connection caches the statement, and the next write of the
/// same statement with a duration failed ("incorrect binary data format").
async fn a_duration_known_later_is_stored(db: Database) {
    for n in 10..18u32 {
        let mut e = episode(n).record;
        if let CatalogRecord::Episode(r) = &mut e {
            r.id = format!("e{n:07}");
        }
        catalog::put(&db, std::slice::from_ref(&e)).await.unwrap();
        e.fields_mut().duration_s = Some(1_800.25);
        catalog::put(&db, std::slice::from_ref(&e))
            .await
            .unwrap_or_else(|err| panic!("{:?}: {err}", db.backend()));
        let v = stored(&db, AliasTarget::Episode, &format!("e{n:07}")).await;
        assert_eq!(v.record.fields().duration_s, Some(1_800.25));
    }
}

/// One `#[tokio::test]` per case, run on a fresh database of every backend.
macro_rules! on_every_backend {
    ($($case:ident),* $(,)?) => {
        mod every_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    for db in archivist_testkit::db::fresh_databases(stringify!($case)).await {
                        super::$case(db).await;
                    }
                }
            )*
        }
    };
}

on_every_backend!(
    records_are_numbered_stored_and_read_back,
    a_stale_update_rolls_back_the_whole_batch,
    an_alias_made_meanwhile_is_a_conflict,
    stale_aliases_move_and_old_urls_are_freed,
    changes_are_read_after_a_watermark_page_by_page,
    imports_keep_ids_are_idempotent_and_move_the_counters,
    two_writers_of_one_url_end_with_one_record,
    put_replaces_by_id_and_moves_the_counter,
    a_duration_known_later_is_stored,
);
