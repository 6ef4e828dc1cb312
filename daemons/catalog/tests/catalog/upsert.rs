use std::time::Duration;

use archivist_catalog::merge::StoredRecord;
use archivist_catalog::{curate, identity, Change, CurateSettings, FeedGuid, Kind};
use archivist_engine::jobs::{self, NewJob};
use archivist_engine::schema::paths;
use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::JobState;
use archivist_engine::store;

use crate::support::*;

fn settings() -> CurateSettings {
    CurateSettings::default().with_curator("test-curator")
}

#[tokio::test]
async fn new_records_get_dense_ids_and_aliases_in_one_write() {
    for (_config, session, db) in stores("catalog-new").await {
        let items = vec![
            episode("http://h/e1.mp3", "One"),
            clip("http://h/c1.wav", "Jingle"),
            episode("http://h/e2.mp3", "Two"),
            episode("http://h/e3.mp3", "Three"),
            clip("http://h/c2.wav", "Sting"),
        ];
        let report = curate(&session, &db, items, &settings().with_chunk_records(2))
            .await
            .unwrap();
        assert_eq!(report.created(), 5, "{report:?}");
        // One transaction per chunk of 2 records, each followed by a wake-up signal for
        // the planner (the node's version counts them).
        let signal = store::exists(&session, paths::SIGNAL_CATALOG)
            .await
            .unwrap()
            .expect("/signals/catalog");
        assert_eq!(signal.version, 3);
        assert_eq!(episodes(&db).await, ["e0000001", "e0000002", "e0000003"]);
        assert_eq!(clips(&db).await, ["c000001", "c000002"]);
        let e2 = id_by_url(&db, "http://h/e2.mp3").await.unwrap();
        let StoredRecord::Episode(rec) = record(&db, Kind::Episode, &e2).await else {
            panic!("episode expected")
        };
        assert_eq!(rec.fields.title, "Two");
        assert_eq!(rec.fields.curator, "test-curator");
        assert_eq!(rec.fields.priority, 0);
        assert_eq!(rec.fields.initial_curated, rec.fields.last_curated);
        assert_eq!(
            id_by_url(&db, "http://h/c2.wav").await.as_deref(),
            Some("c000002")
        );
    }
}

#[tokio::test]
async fn recuration_keeps_initial_date_moves_last_date_and_updates_fields() {
    for (_config, session, db) in stores("catalog-upsert").await {
        let first = episode("http://h/e1.mp3", "One").with_priority(Some(1));
        curate(&session, &db, vec![first], &settings())
            .await
            .unwrap();
        let before = record(&db, Kind::Episode, "e0000001").await;
        tokio::time::sleep(Duration::from_millis(20)).await;

        let mut again = episode("HTTP://H:80/e1.mp3#x", "One, remastered").with_priority(Some(9));
        again.description = Some("new notes".into());
        let report = curate(&session, &db, vec![again], &settings())
            .await
            .unwrap();
        assert_eq!(report.created(), 0);
        assert_eq!(
            report.items[0].change,
            Change::Updated {
                fields: vec!["title".into(), "description".into(), "priority".into()]
            }
        );
        let after = record(&db, Kind::Episode, "e0000001").await;
        assert_eq!(
            after.fields().initial_curated,
            before.fields().initial_curated
        );
        assert!(after.fields().last_curated > before.fields().last_curated);
        assert_eq!(after.fields().title, "One, remastered");
        assert_eq!(after.fields().priority, 9);
        assert_eq!(episodes(&db).await, ["e0000001"]);
    }
}

#[tokio::test]
async fn identity_is_by_url_or_guid_never_by_title() {
    for (_config, session, db) in stores("catalog-identity").await {
        let feed = identity::normalize_url("http://h/feed.xml").unwrap();
        let guid = |g: &str| {
            Some(FeedGuid {
                feed_url: feed.clone(),
                guid: g.into(),
            })
        };
        let a = episode("http://h/a.mp3", "Same title").with_guid(guid("g-1"));
        let b = episode("http://h/b.mp3", "Same title");
        curate(&session, &db, vec![a, b], &settings())
            .await
            .unwrap();
        assert_eq!(
            episodes(&db).await.len(),
            2,
            "same title, different URLs: two records"
        );

        // Same GUID, moved media URL: the same record, now known by the new URL only (the
        // old URL's alias moves with it, in the same multi: one media URL, one record).
        let moved = episode("http://cdn.h/a-v2.mp3", "Same title").with_guid(guid("g-1"));
        let report = curate(&session, &db, vec![moved], &settings())
            .await
            .unwrap();
        let id = &report.items[0].id;
        assert_eq!(id_by_url(&db, "http://h/a.mp3").await, None);
        assert_eq!(
            id_by_url(&db, "http://cdn.h/a-v2.mp3").await.as_ref(),
            Some(id)
        );
        assert_eq!(
            record(&db, Kind::Episode, id).await.fields().media_url,
            "http://cdn.h/a-v2.mp3"
        );
        // The old URL, no longer any record's, becomes a record of its own.
        let by_url = episode("http://h/a.mp3", "Other title");
        let report = curate(&session, &db, vec![by_url], &settings())
            .await
            .unwrap();
        assert_ne!(&report.items[0].id, id);
        assert_eq!(episodes(&db).await.len(), 3);

        // A clip URL cannot become an episode: left out, named.
        curate(
            &session,
            &db,
            vec![clip("http://h/c.wav", "C")],
            &settings(),
        )
        .await
        .unwrap();
        let report = curate(
            &session,
            &db,
            vec![episode("http://h/c.wav", "C")],
            &settings(),
        )
        .await
        .unwrap();
        assert_eq!(report.items.len(), 0);
        assert_eq!(report.skipped.len(), 1);
        assert!(report.skipped[0]
            .reason
            .contains("already registered as clip c000001"));
    }
}

#[tokio::test]
async fn swapped_enclosures_never_leave_one_media_url_on_two_records() {
    for (_config, session, db) in stores("catalog-swap").await {
        let feed = identity::normalize_url("http://h/feed.xml").unwrap();
        let guid = |g: &str| {
            Some(FeedGuid {
                feed_url: feed.clone(),
                guid: g.into(),
            })
        };
        let v1 = vec![
            episode("http://h/sw/a.mp3", "A").with_guid(guid("ga")),
            episode("http://h/sw/b.mp3", "B").with_guid(guid("gb")),
        ];
        curate(&session, &db, v1, &settings()).await.unwrap();
        // The next poll: the two items exchanged their enclosure URLs.
        let v2 = vec![
            episode("http://h/sw/b.mp3", "A now b").with_guid(guid("ga")),
            episode("http://h/sw/a.mp3", "B now a").with_guid(guid("gb")),
        ];
        let report = curate(&session, &db, v2, &settings()).await.unwrap();
        assert_eq!(report.skipped.len(), 2, "{report:?}");
        assert!(report.skipped[0].reason.contains("conflict"), "{report:?}");
        // A later curation by URL finds the one record holding that URL.
        let report = curate(
            &session,
            &db,
            vec![episode("http://h/sw/b.mp3", "manual b")],
            &settings(),
        )
        .await
        .unwrap();
        assert_eq!(report.created(), 0, "{report:?}");
        let mut urls = Vec::new();
        for id in episodes(&db).await {
            let rec = record(&db, Kind::Episode, &id).await;
            let url = rec.fields().media_url.clone();
            assert_eq!(
                id_by_url(&db, &url).await.as_deref(),
                Some(id.as_str()),
                "the alias of {url} names its record"
            );
            urls.push(url);
        }
        urls.sort();
        urls.dedup();
        assert_eq!(urls.len(), 2, "one media URL, one record: {urls:?}");
    }
}

#[tokio::test]
async fn rerunning_the_same_curation_changes_nothing_but_last_curated() {
    for (_config, session, db) in stores("catalog-noop").await {
        let items = || {
            (0..30)
                .map(|i| {
                    episode(&format!("http://h/e{i}.mp3"), &format!("E{i}")).with_priority(Some(i))
                })
                .chain((0..5).map(|i| clip(&format!("http://h/c{i}.wav"), &format!("C{i}"))))
                .collect::<Vec<_>>()
        };
        let first = curate(&session, &db, items(), &settings()).await.unwrap();
        assert_eq!(first.created(), 35);
        let mut before = Vec::new();
        for id in episodes(&db).await {
            before.push(record(&db, Kind::Episode, &id).await);
        }
        let names = aliases(&db).await;

        let second = curate(&session, &db, items(), &settings()).await.unwrap();
        assert_eq!(
            (second.created(), second.updated(), second.refreshed()),
            (0, 0, 35)
        );
        assert_eq!(aliases(&db).await, names);
        assert_eq!(
            episodes(&db).await.last().map(String::as_str),
            Some("e0000030")
        );
        assert_eq!(clips(&db).await.last().map(String::as_str), Some("c000005"));
        for old in before {
            let mut new = record(&db, Kind::Episode, old.id()).await;
            assert!(new.fields().last_curated >= old.fields().last_curated);
            // Everything else is identical.
            if let (StoredRecord::Episode(n), StoredRecord::Episode(o)) = (&mut new, &old) {
                n.fields.last_curated = o.fields.last_curated;
            }
            assert_eq!(new, old);
        }
    }
}

#[tokio::test]
async fn a_priority_change_reorders_pending_jobs_only() {
    for (_config, session, db) in stores("catalog-priority").await {
        curate(
            &session,
            &db,
            vec![episode("http://h/e1.mp3", "One")],
            &settings(),
        )
        .await
        .unwrap();
        let rec = record(&db, Kind::Episode, "e0000001").await;
        let new_job = NewJob {
            episode: "e0000001".into(),
            media_url: rec.fields().media_url.clone(),
            clips: vec!["c000001".into()],
            priority: 0,
            curated_ms: 1_700_000_000_000,
            batch: None,
        };
        let pending = jobs::create(&session, &new_job, "test", |_| vec![])
            .await
            .unwrap();
        let other = NewJob {
            episode: "e0000099".into(),
            ..new_job.clone()
        };
        let unrelated = jobs::create(&session, &other, "test", |_| vec![])
            .await
            .unwrap();

        let report = curate(
            &session,
            &db,
            vec![episode("http://h/e1.mp3", "One").with_priority(Some(-5))],
            &settings(),
        )
        .await
        .unwrap();
        assert_eq!(report.reprioritized_jobs, 1);
        let (job, _) = jobs::read(&session, &pending.id).await.unwrap();
        assert_eq!(job.priority, -5);
        let entries = store::children(&session, &paths::queue(JobState::Pending))
            .await
            .unwrap();
        let parsed: Vec<QueueEntry> = entries
            .iter()
            .map(|e| QueueEntry::parse(e).unwrap())
            .collect();
        assert!(parsed
            .iter()
            .any(|e| e.job == pending.id && e.priority == -5));
        assert!(parsed
            .iter()
            .any(|e| e.job == unrelated.id && e.priority == 0));
        assert_eq!(parsed.len(), 2);
        // The unrelated episode's job comes first now (priority 0 > -5).
        assert_eq!(parsed[0].job, unrelated.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_curators_converge_on_one_record_per_url() {
    for (config, session, db) in stores("catalog-race").await {
        let other = archivist_testkit::another_session(&config).await;
        let batch = |from: usize, to: usize| {
            (from..to)
                .map(|i| episode(&format!("http://h/e{i}.mp3"), &format!("E{i}")))
                .collect::<Vec<_>>()
        };
        let s = settings().with_chunk_records(7).with_max_attempts(50);
        let (a, b) = tokio::join!(
            curate(&session, &db, batch(0, 300), &s),
            curate(&other, &db, batch(150, 450), &s)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.items.len(), 300);
        assert_eq!(b.items.len(), 300);
        let ids = episodes(&db).await;
        assert_eq!(ids.len(), 450, "one record per URL");
        // Dense numbering: no number lost to a conflict (a rolled-back chunk gives its
        // numbers back).
        assert_eq!(ids.last().map(String::as_str), Some("e0000450"));
        for i in [0, 149, 150, 299, 449] {
            let id = id_by_url(&db, &format!("http://h/e{i}.mp3")).await.unwrap();
            assert_eq!(
                record(&db, Kind::Episode, &id).await.fields().title,
                format!("E{i}")
            );
        }
    }
}

/// Outside try 17p F1 (HIGH): `curate` as the read-only identity committed its records
/// to the database, then failed at the planner's signal (`not authorized`), and the
/// daemons researched what the reader "failed" to add. It is refused before the
/// database is touched.
#[tokio::test]
async fn the_read_only_identity_curates_nothing() {
    use archivist_engine::config::Credentials;
    let base = archivist_testkit::config("catalog-reader");
    let daemons = base
        .clone()
        .with_credentials(Credentials::parse("archivist:s3cret"))
        .with_reader(Credentials::parse("ops:look"));
    let admin = archivist_engine::Session::connect(&daemons).await.unwrap();
    archivist_engine::tree::init(&admin, "test").await.unwrap();
    let reader =
        archivist_engine::Session::connect(&base.with_credentials(Credentials::parse("ops:look")))
            .await
            .unwrap();
    let db = archivist_testkit::db::tree_database(reader.chroot()).await;
    let items = vec![
        episode("http://h/e1.mp3", "One"),
        clip("http://h/c1.wav", "Jingle"),
    ];
    let err = curate(&reader, &db, items.clone(), &settings())
        .await
        .expect_err("a reader may not curate");
    assert!(err.to_string().contains("not authorized"), "{err}");
    assert!(episodes(&db).await.is_empty() && clips(&db).await.is_empty());
    // The daemons' identity curates, and the probe left the signal alone.
    let report = curate(&admin, &db, items, &settings()).await.unwrap();
    assert_eq!(report.created(), 2, "{report:?}");
    let signal = store::exists(&admin, paths::SIGNAL_CATALOG)
        .await
        .unwrap()
        .expect("/signals/catalog");
    assert_eq!(signal.version, 1, "one bump, for the one chunk written");
}
