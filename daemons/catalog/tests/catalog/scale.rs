use std::time::Instant;

use archivist_catalog::{curate, CurateSettings};

use crate::support::*;

/// 10k episodes in one curation: every record created, numbered densely, quickly; a
/// second run only refreshes. (The benchmark `examples/curate_bench.rs` prints figures.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_episodes_curate_in_seconds() {
    for (_config, session, db) in stores("catalog-scale").await {
        let items: Vec<_> = (0..10_000)
            .map(|i| {
                episode(
                    &format!("https://cdn.example/show/{i}.mp3"),
                    &format!("Episode {i}"),
                )
                .with_priority(Some(i % 7))
            })
            .collect();
        let started = Instant::now();
        let report = curate(&session, &db, items.clone(), &CurateSettings::default())
            .await
            .unwrap();
        let first = started.elapsed();
        assert_eq!(report.created(), 10_000);
        assert_eq!(episodes(&db).await.len(), 10_000);
        assert_eq!(
            episodes(&db).await.last().map(String::as_str),
            Some("e0010000")
        );
        let started = Instant::now();
        let again = curate(&session, &db, items, &CurateSettings::default())
            .await
            .unwrap();
        let second = started.elapsed();
        assert_eq!(again.refreshed(), 10_000);
        eprintln!("10k episodes: created in {first:?}, re-curated in {second:?}");
        assert!(first.as_secs() < 60, "took {first:?}");
    }
}
