//! Renditions on every test backend (SQLite always, PostgreSQL when ARCHIVIST_TEST_PG is
//! set): the first complete download pins, the same bytes again are the pin, other bytes
//! are a new rendition reported against the pin, the pin moves only from what it is,
//! runs record their rendition and runs from before stay readable.

use archivist_db::renditions::{self, Counts, Recorded, Rendition};
use archivist_db::research;
use archivist_testkit::db::fresh_databases;
use time::OffsetDateTime;
use znode_schema::clipset::ClipSet;
use znode_schema::records::ResearchRun;

fn rendition(episode: &str, sha: char, bytes: u64) -> Rendition {
    Rendition {
        episode: episode.into(),
        sha256: sha.to_string().repeat(64),
        bytes,
        duration_s: Some(1200.5),
        fetched_at: OffsetDateTime::from_unix_timestamp(1_790_000_000).unwrap(),
        url: format!("http://example/{episode}.mp3"),
        final_url: format!("http://cdn.example/{episode}.mp3"),
        etag: Some(format!("\"{sha}\"")),
        last_modified: Some("Tue, 24 Nov 2026 10:00:00 GMT".into()),
    }
}

#[tokio::test]
async fn the_first_complete_download_pins_and_other_bytes_are_a_new_rendition() {
    for db in fresh_databases("renditions-pin").await {
        assert_eq!(renditions::pin(&db, "e1").await.unwrap(), None);
        let first = rendition("e1", 'a', 1000);
        assert_eq!(
            renditions::record(&db, &first).await.unwrap(),
            Recorded::Pinned
        );
        let pin = renditions::pin(&db, "e1").await.unwrap().unwrap();
        assert_eq!(pin.rendition, first);
        assert_eq!(pin.moves, 0);
        // The same bytes again: the pin.
        assert_eq!(
            renditions::record(&db, &first).await.unwrap(),
            Recorded::SameAsPin
        );
        // Other bytes at the same URL (ads inserted): a new rendition; the pin stays.
        // (Sightings are ordered by their millisecond.)
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        let other = rendition("e1", 'b', 1300);
        match renditions::record(&db, &other).await.unwrap() {
            Recorded::Differs { pin, first_time } => {
                assert_eq!(pin.rendition.sha256, first.sha256);
                assert!(first_time);
            }
            r => panic!("other bytes were {r:?}"),
        }
        match renditions::record(&db, &other).await.unwrap() {
            Recorded::Differs { first_time, .. } => assert!(!first_time),
            r => panic!("other bytes again were {r:?}"),
        }
        assert_eq!(
            renditions::pin(&db, "e1").await.unwrap().unwrap().rendition,
            first
        );
        let all = renditions::list(&db, "e1").await.unwrap();
        assert_eq!(all.len(), 2);
        // Another episode pins on its own.
        renditions::record(&db, &rendition("e2", 'c', 10))
            .await
            .unwrap();
        assert_eq!(
            renditions::counts(&db).await.unwrap(),
            Counts {
                pinned: 2,
                changed: 1,
                serving_other: 1,
                renditions: 3
            }
        );
        // A sighting of the pin (a `304` naming it) makes it what e1's server serves
        // again, and new validators replace the stored ones.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        assert!(
            renditions::saw(&db, "e1", &first.sha256, Some((Some("\"v2\""), None)))
                .await
                .unwrap()
        );
        let seen = renditions::recently_seen(&db, "e1").await.unwrap();
        assert_eq!(seen[0].sha256, first.sha256);
        assert_eq!(seen[0].etag.as_deref(), Some("\"v2\""));
        assert_eq!(renditions::counts(&db).await.unwrap().serving_other, 0);
        // A sighting of a rendition never recorded changes nothing.
        assert!(!renditions::saw(&db, "e1", &"f".repeat(64), None)
            .await
            .unwrap());
    }
}

#[tokio::test]
async fn the_pin_moves_once_and_only_from_what_it_is() {
    for db in fresh_databases("renditions-move").await {
        let first = rendition("e1", 'a', 1000);
        let second = rendition("e1", 'b', 1000);
        renditions::record(&db, &first).await.unwrap();
        // Not to bytes that were never recorded.
        assert!(
            !renditions::move_pin(&db, "e1", &first.sha256, &"d".repeat(64))
                .await
                .unwrap()
        );
        renditions::record(&db, &second).await.unwrap();
        assert!(
            renditions::move_pin(&db, "e1", &first.sha256, &second.sha256)
                .await
                .unwrap()
        );
        // A second researcher forced to move it from the old pin: it moved already.
        assert!(
            !renditions::move_pin(&db, "e1", &first.sha256, &second.sha256)
                .await
                .unwrap()
        );
        let pin = renditions::pin(&db, "e1").await.unwrap().unwrap();
        assert_eq!(
            (pin.rendition.sha256.as_str(), pin.moves),
            (second.sha256.as_str(), 1)
        );
    }
}

#[tokio::test]
async fn runs_record_their_rendition_and_older_runs_stay_readable() {
    for db in fresh_databases("renditions-runs").await {
        // A run stored before renditions existed (no rendition row).
        research::update(&db, "e1", |r| {
            r.runs.push(ResearchRun {
                job: "j0000000001".into(),
                researcher: "r1".into(),
                at: OffsetDateTime::from_unix_timestamp(1_790_000_000).unwrap(),
                clips: "1-3".parse::<ClipSet>().unwrap(),
            })
        })
        .await
        .unwrap();
        let first = rendition("e1", 'a', 1000);
        renditions::record(&db, &first).await.unwrap();
        assert_eq!(
            renditions::record_run(&db, "e1", "j0000000002", &first.sha256, true)
                .await
                .unwrap(),
            None
        );
        // Written again (a resumed job): one row.
        assert_eq!(
            renditions::record_run(&db, "e1", "j0000000002", &first.sha256, true)
                .await
                .unwrap(),
            None
        );
        let runs = renditions::of_runs(&db, "e1").await.unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs["j0000000002"], first.sha256);
        let record = research::read(&db, "e1").await.unwrap().unwrap();
        assert_eq!(record.runs.len(), 1, "the old run no longer reads");
    }
}

/// Outside 23b H1: a job held, then released after the pin moved, re-pointed its run at
/// the new rendition, so the results stored before the hold (measured on the old audio)
/// were tied to audio where they are false. A run with a stored result, or whose caller
/// knows of a report in flight, keeps its rendition; one with neither may move.
#[tokio::test]
async fn a_run_with_results_never_moves_to_other_audio() {
    for db in fresh_databases("renditions-run-moves").await {
        let old = rendition("e1", 'a', 1000);
        let new = rendition("e1", 'b', 1000);
        for r in [&old, &new] {
            renditions::record(&db, r).await.unwrap();
        }
        renditions::record_run(&db, "e1", "j0000000004", &old.sha256, true)
            .await
            .unwrap();
        // No result stored, a report in flight: kept.
        assert_eq!(
            renditions::record_run(&db, "e1", "j0000000004", &new.sha256, false)
                .await
                .unwrap(),
            Some(old.sha256.clone())
        );
        // A result stored: kept, whatever the caller knows.
        research::update(&db, "e1", |r| {
            r.runs.push(ResearchRun {
                job: "j0000000004".into(),
                researcher: "r1".into(),
                at: OffsetDateTime::from_unix_timestamp(1_790_000_000).unwrap(),
                clips: "1".parse::<ClipSet>().unwrap(),
            })
        })
        .await
        .unwrap();
        assert_eq!(
            renditions::record_run(&db, "e1", "j0000000004", &new.sha256, true)
                .await
                .unwrap(),
            Some(old.sha256.clone())
        );
        assert_eq!(
            renditions::of_runs(&db, "e1").await.unwrap()["j0000000004"],
            old.sha256
        );
        // A run with nothing stored and nothing in flight may move.
        renditions::record_run(&db, "e1", "j0000000005", &old.sha256, true)
            .await
            .unwrap();
        assert_eq!(
            renditions::record_run(&db, "e1", "j0000000005", &new.sha256, true)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            renditions::of_runs(&db, "e1").await.unwrap()["j0000000005"],
            new.sha256
        );
    }
}
