//! The research archive in the database, on every test backend (SQLite always,
//! PostgreSQL when ARCHIVIST_TEST_PG is set): what is stored reads back the same, a
//! replayed store writes nothing, concurrent stores of one episode lose nothing and
//! store no pair twice, and the readers (by clip, changed since, pages, counts) agree.

use std::collections::BTreeMap;

use archivist_db::research::{self, Counts};
use archivist_db::{Backend, Counter, Database};
use archivist_testkit::db::{fresh_database_url, fresh_databases};
use time::OffsetDateTime;
use znode_schema::clipset::ClipSet;
use znode_schema::records::{Occurrence, ResearchRecord, ResearchRun};

fn at(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap()
}

/// The recorder's rule in miniature: a clip number already in a run is not stored
/// again; otherwise it joins the job's run (made if missing). Returns whether it stored.
fn add(record: &mut ResearchRecord, job: &str, clip: u32, found_at: Option<f64>) -> bool {
    if record.is_researched(clip) {
        return false;
    }
    let index = match record.runs.iter().position(|r| r.job == job) {
        Some(i) => i,
        None => {
            record.runs.push(ResearchRun {
                job: job.into(),
                researcher: format!("researcher-{job}"),
                at: at(1_700_000_000_000 + record.runs.len() as i64),
                clips: ClipSet::new(),
            });
            record.runs.len() - 1
        }
    };
    record.runs[index].clips.insert(clip);
    if let Some(t) = found_at {
        record.found.insert(
            format!("c{clip:06}"),
            vec![Occurrence {
                at: t,
                conf: 0.875,
                speed: None,
                part: None,
            }],
        );
    }
    true
}

#[tokio::test]
async fn a_stored_record_reads_back_the_same() {
    for db in fresh_databases("research-roundtrip").await {
        let stored = research::update(&db, "e0000001", |r| {
            r.episode_duration_s = Some(5400.125);
            add(r, "j1", 1, Some(12.5));
            add(r, "j1", 2, None);
            add(r, "j1", 3, None);
            add(r, "j2", 7, Some(99.25));
            r.errors
                .insert("c000003".into(), "clip download failed".into());
            r.error_stamps.insert("c000003".into(), "1000/abcd".into());
            r.errors
                .insert("c000002".into(), "old error, no stamp".into());
            r.clone()
        })
        .await
        .expect("store");
        assert!(stored.seq.is_some());
        let read = research::read(&db, "e0000001").await.unwrap().unwrap();
        assert_eq!(read, stored.value, "{:?}", db.backend());
        assert_eq!(read.runs[0].clips.to_string(), "1-3");
        assert!(research::is_researched(&db, "e0000001", 7).await.unwrap());
        assert!(!research::is_researched(&db, "e0000001", 4).await.unwrap());
        assert!(!research::is_researched(&db, "e0000002", 1).await.unwrap());
        assert_eq!(research::read(&db, "e0000002").await.unwrap(), None);
        let by_clip = research::found_by_clip(&db, "c000007").await.unwrap();
        assert_eq!(by_clip.len(), 1);
        assert_eq!(by_clip[0].episode, "e0000001");
        assert_eq!(by_clip[0].occurrences[0].at, 99.25);
        assert_eq!(
            research::counts(&db).await.unwrap(),
            Counts {
                episodes: 1,
                runs: 2,
                found: 2,
                errors: 2
            }
        );
    }
}

#[tokio::test]
async fn a_replayed_store_writes_nothing() {
    for db in fresh_databases("research-replay").await {
        let store = |db: Database| async move {
            research::update(&db, "e0000009", |r| {
                (1..=40)
                    .filter(|n| add(r, "j1", *n, Some(f64::from(*n))))
                    .count()
            })
            .await
            .expect("store")
        };
        let first = store(db.clone()).await;
        assert_eq!(first.value, 40);
        let seq = db.current_seq(Counter::Research).await.unwrap();
        // The crash-and-replay case: the same reports merge again into what was stored.
        let again = store(db.clone()).await;
        assert_eq!(again.value, 0, "nothing is stored twice");
        assert_eq!(again.seq, None, "nothing was written");
        assert_eq!(db.current_seq(Counter::Research).await.unwrap(), seq);
        let record = research::read(&db, "e0000009").await.unwrap().unwrap();
        assert_eq!(record.researched().len(), 40);
        assert_eq!(record.found.len(), 40);
        assert_eq!(research::counts(&db).await.unwrap().runs, 1);
    }
}

#[tokio::test]
async fn concurrent_stores_of_one_episode_lose_nothing_and_store_no_pair_twice() {
    for db in fresh_databases("research-concurrent").await {
        // 8 writers, each storing 60 clips of which half overlap its neighbour's.
        let writers: Vec<_> = (0..8u32)
            .map(|w| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut stored = 0;
                    for chunk in 0..6u32 {
                        let first = w * 30 + chunk * 10 + 1;
                        let job = format!("j{w}");
                        let done = research::update(&db, "e0000005", |r| {
                            (first..first + 10)
                                .filter(|n| add(r, &job, *n, None))
                                .count()
                        })
                        .await
                        .expect("store");
                        stored += done.value;
                    }
                    stored
                })
            })
            .collect();
        let mut total = 0;
        for w in writers {
            total += w.await.unwrap();
        }
        let record = research::read(&db, "e0000005").await.unwrap().unwrap();
        // Clips 1..=270: writer w covers w*30+1 ..= w*30+60.
        assert_eq!(record.researched().len(), 270, "{:?}", db.backend());
        assert_eq!(total, 270, "every pair stored exactly once");
        let in_runs: usize = record.runs.iter().map(|r| r.clips.len()).sum();
        assert_eq!(in_runs, 270, "no clip in two runs");
    }
}

#[tokio::test]
async fn readers_walk_and_follow_changes() {
    for db in fresh_databases("research-readers").await {
        let start = db.current_seq(Counter::Research).await.unwrap();
        let mut expected = BTreeMap::new();
        for e in 1..=25u32 {
            let episode = format!("e{e:07}");
            let u = research::update(&db, &episode, |r| {
                add(r, "j1", e, (e % 3 == 0).then_some(1.5));
                r.clone()
            })
            .await
            .unwrap();
            expected.insert(episode, u.value);
        }
        // Pages of 7 walk every episode once, in order.
        let mut walked = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = research::page(&db, after.as_deref(), 7).await.unwrap();
            let Some(last) = page.last() else { break };
            after = Some(last.episode.clone());
            walked.extend(page);
        }
        assert_eq!(walked, expected.values().cloned().collect::<Vec<_>>());
        // Everything changed after the start; a second change to one episode moves it
        // past the others' watermark.
        let changed = research::changed_since(&db, start, 100).await.unwrap();
        assert_eq!(changed.len(), 25);
        let mark = changed.last().unwrap().0;
        research::update(&db, "e0000004", |r| add(r, "j2", 100, None))
            .await
            .unwrap();
        let later = research::changed_since(&db, mark, 100).await.unwrap();
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].1.episode, "e0000004");
        assert!(later[0].1.is_researched(100));
        assert_eq!(
            research::changed_since(&db, later[0].0, 100)
                .await
                .unwrap()
                .len(),
            0
        );
        assert_eq!(
            research::found_by_clip(&db, "c000003").await.unwrap().len(),
            1
        );
    }
}

/// Outside try of #22, finding 1: after one store failed with the transaction rolled
/// back by SQLite itself (a full disk), every later store of that process failed with
/// "attempted to call begin_with at non-zero transaction depth", even with room again.
#[tokio::test]
async fn stores_succeed_again_once_a_full_disk_has_room() {
    let url = fresh_database_url(Backend::Sqlite, "research-disk-full").await;
    let db = Database::connect(&url).await.expect("connect");
    archivist_db::testing::arm_rollback_trap(&db).await.unwrap();
    // More failures than the pool has connections, so every connection has failed once.
    for n in 1..=12 {
        let failed = research::update(&db, &format!("e{n:07}"), |r| add(r, "j1", n, None)).await;
        let message = format!("{:#}", failed.expect_err("the disk is full"));
        assert!(message.contains("disk is full"), "{message}");
    }
    archivist_db::testing::disarm_rollback_trap(&db)
        .await
        .unwrap();
    for n in 1..=12 {
        let stored = research::update(&db, &format!("e{n:07}"), |r| add(r, "j1", n, None))
            .await
            .unwrap_or_else(|e| panic!("store {n} once the disk has room: {e:#}"));
        assert!(stored.value, "store {n} wrote its pair");
    }
    assert_eq!(research::counts(&db).await.unwrap().runs, 12);
}

/// The highest job id of the archive (what keeps a job counter moved back from
/// re-issuing an archived id, outside 17g finding 3): by number, across episodes,
/// ids of another form skipped.
#[tokio::test]
async fn the_highest_archived_job_id_is_found() {
    for db in fresh_databases("research-highest-job").await {
        assert_eq!(research::highest_job(&db).await.unwrap(), None);
        for (episode, job) in [
            ("e0000002", "j0000000009"),
            ("e0000001", "j0000000012"),
            ("e0000001", "j0000000003"),
            ("e0000003", "j99"),
            ("e0000003", "j00000000077"),
            ("e0000003", "jx"),
        ] {
            research::update(&db, episode, |r| {
                add(r, job, r.runs.len() as u32 + 1, None);
            })
            .await
            .expect("store");
        }
        assert_eq!(
            research::highest_job(&db).await.unwrap().as_deref(),
            Some("j0000000012"),
            "{:?}",
            db.backend()
        );
    }
}

#[tokio::test]
async fn a_corrupt_record_fails_only_its_own_episode_in_pages_and_changes() {
    // The planner reads many episodes at once: one stored value that does not parse
    // must be an error for that episode alone, never the whole page (a page that fails
    // as a whole would be read again and again, or stop planning for everything).
    for db in fresh_databases("research-corrupt-each").await {
        let start = research::last_seq(&db).await.unwrap();
        for e in 1..=5u32 {
            research::update(&db, &format!("e{e:07}"), |r| add(r, "j1", e, Some(2.0)))
                .await
                .unwrap();
        }
        archivist_db::testing::damage_research_runs(&db, "e0000003")
            .await
            .unwrap();
        let upto = research::last_seq(&db).await.unwrap();
        let page = research::page_each(&db, None, 100).await.unwrap();
        let ids: Vec<&str> = page.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(
            ids,
            ["e0000001", "e0000002", "e0000003", "e0000004", "e0000005"]
        );
        for (episode, read) in &page {
            assert_eq!(read.is_err(), episode == "e0000003", "{episode}: {read:?}");
        }
        let changed = research::changed_between(&db, start, upto, 100)
            .await
            .unwrap();
        assert_eq!(changed.len(), 5);
        for (_, (episode, read)) in &changed {
            assert_eq!(read.is_err(), episode == "e0000003", "{episode}: {read:?}");
        }
        // The strict readers still refuse it.
        assert!(research::page(&db, None, 100).await.is_err());
    }
}

#[tokio::test]
async fn pages_and_watermarks_miss_nothing_while_research_is_written() {
    // The planner's load: the watermark first, then pages by episode while the
    // recorder writes; then the changes after the watermark. Every episode is read
    // once by the pages, and every change made during the walk is among the changes.
    for db in fresh_databases("research-paging-writes").await {
        for e in 1..=30u32 {
            research::update(&db, &format!("e{e:07}"), |r| add(r, "j1", 1, None))
                .await
                .unwrap();
        }
        let watermark = research::last_seq(&db).await.unwrap();
        let mut walked = Vec::new();
        let mut after: Option<String> = None;
        let mut round = 0u32;
        loop {
            let page = research::page_each(&db, after.as_deref(), 4).await.unwrap();
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            walked.extend(page.into_iter().map(|(e, r)| (e, r.unwrap())));
            // Meanwhile: one episode already walked, one not yet, one new at each end.
            round += 1;
            if round > 8 {
                continue;
            }
            for e in [round, 31 - round, 100 + round] {
                research::update(&db, &format!("e{e:07}"), |r| add(r, "j2", 1 + round, None))
                    .await
                    .unwrap();
            }
            research::update(&db, "e0000000", |r| add(r, "j3", round, None))
                .await
                .unwrap();
        }
        let ids: Vec<&str> = walked.iter().map(|(e, _)| e.as_str()).collect();
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(ids, unique, "an episode was walked twice");
        for e in 1..=30u32 {
            assert!(ids.contains(&format!("e{e:07}").as_str()), "e{e} skipped");
        }
        // Replaying the changes after the watermark over the walk gives the final archive.
        let upto = research::last_seq(&db).await.unwrap();
        let mut seen: BTreeMap<String, ResearchRecord> = walked.into_iter().collect();
        let mut from = watermark;
        loop {
            let page = research::changed_between(&db, from, upto, 3).await.unwrap();
            for (seq, (episode, record)) in &page {
                from = from.max(*seq);
                seen.insert(episode.clone(), record.as_ref().unwrap().clone());
            }
            if page.len() < 3 {
                break;
            }
        }
        let mut all = BTreeMap::new();
        let mut after: Option<String> = None;
        loop {
            let page = research::page(&db, after.as_deref(), 50).await.unwrap();
            let Some(last) = page.last() else { break };
            after = Some(last.episode.clone());
            all.extend(page.into_iter().map(|r| (r.episode.clone(), r)));
        }
        assert_eq!(seen, all);
    }
}

/// An episode first stored without a duration (every report of its first job an error)
/// is stored again with one. On PostgreSQL the second store failed ("incorrect binary
/// data format in bind parameter 2": sqlx's `Any` driver declared the unknown duration
/// `float4` and the connection cached the statement), seen while testing outside 17h F2.
#[tokio::test]
async fn an_episode_stored_without_a_duration_is_stored_again_with_one() {
    for db in fresh_databases("research-duration-later").await {
        for n in 1..=8u32 {
            let episode = format!("e{n:07}");
            research::update(&db, &episode, |r| add(r, "j1", 1, None))
                .await
                .expect("stored without a duration");
            research::update(&db, &episode, |r| {
                r.episode_duration_s = Some(900.5);
                add(r, "j2", 2, None)
            })
            .await
            .unwrap_or_else(|e| panic!("{:?}: stored with a duration: {e}", db.backend()));
            let record = research::read(&db, &episode).await.unwrap().unwrap();
            assert_eq!(record.episode_duration_s, Some(900.5));
        }
    }
}

/// Outside 17m H1: SQLite goes on writing into a file deleted under it, so results
/// stored there are lost with it. A write into a deleted (or replaced) file is refused,
/// naming what happened, and so is a commit the file vanished under.
#[tokio::test]
async fn a_write_into_a_deleted_sqlite_file_is_refused() {
    let url = archivist_testkit::db::fresh_sqlite_url("research-file-gone");
    let db = archivist_db::Database::connect(&url).await.unwrap();
    db.check_file().unwrap();
    let path = url.strip_prefix("sqlite://").unwrap().to_string();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
    let err = db.check_file().unwrap_err();
    assert!(err.to_string().contains("was deleted"), "{err}");
    let err = archivist_db::research::update(&db, "e0000001", |r| {
        r.episode_duration_s = Some(1.0);
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("was deleted"), "{err}");
}
