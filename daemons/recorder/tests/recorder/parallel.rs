//! Several recorders on one job's stream store every clip exactly once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_recorder::{archive, watcher};
use tokio_util::sync::CancellationToken;

use crate::support::{self, job, lease, occurrences_for, read_lease, report, research};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_recorders_store_each_of_200_reports_exactly_once() {
    let (config, session) = archivist_testkit::fresh_tree("parallel").await;
    let clips: Vec<u32> = (1..=200).collect();
    let j = job(&session, "e0000010", &clips, JobState::Researching).await;
    lease(&session, &j, 60_000).await;
    // Small batches, so the three keep racing on the one research record.
    let settings = support::settings().with_batch_size(7);
    let shutdown = CancellationToken::new();
    let mut recorders = Vec::new();
    for _ in 0..3 {
        let s = archivist_testkit::another_session(&config).await;
        let settings = settings.clone();
        let shutdown = shutdown.clone();
        recorders.push(tokio::spawn(async move {
            watcher::run(&s, &support::db(&s).await, &settings, shutdown).await
        }));
    }
    let started = Instant::now();
    // The researcher reports while the recorders run.
    for n in &clips {
        report(&session, &j, *n, occurrences_for(*n, 0.125), false).await;
    }
    let drained = archivist_testkit::eventually(Duration::from_secs(60), || async {
        support::reports_left(&session).await.is_empty()
    })
    .await;
    let took = started.elapsed();
    shutdown.cancel();
    let mut stored = 0;
    let mut already = 0;
    let mut per_recorder = Vec::new();
    for r in recorders {
        let totals = r.await.unwrap().unwrap();
        stored += totals.stored;
        already += totals.already;
        per_recorder.push(totals.stored);
    }
    assert!(
        drained,
        "reports left: {:?}",
        support::reports_left(&session).await
    );
    println!("200 reports by 3 recorders in {took:?}; stored per recorder {per_recorder:?}");
    assert_eq!(stored, 200, "clips stored in total across recorders");
    // `already` is not 0 when two recorders read a report at once: one stores it (the
    // database locks the episode) and the other counts it `already` if its multi deletes
    // the report first. The archive below is what must hold each pair once.
    println!("reports counted as already stored: {already}");
    let (record, _) = research(&session, "e0000010").await.unwrap();
    let counts = support::run_clip_counts(&record);
    assert_eq!(counts.len(), 200);
    assert!(counts.values().all(|c| *c == 1), "a clip is in two runs");
    let expected: BTreeMap<String, _> = clips
        .iter()
        .map(|n| {
            (
                paths::clip_id(*n),
                archive::compact(&occurrences_for(*n, 0.125)),
            )
        })
        .filter(|(_, o)| !o.is_empty())
        .collect();
    assert_eq!(record.found, expected);
    let (extended, _) = read_lease(&session, &j.id).await.unwrap();
    assert!(extended.extensions >= 1, "the lease was never extended");
}
