//! Consumer groups on the real ZooKeeper: members get ranks in name order, a member that
//! leaves (its session ends) is dropped from the others' shares, and consumers that split
//! the queue rarely lose a lock race to each other.

use std::sync::Arc;
use std::time::Duration;

use archivist_engine::consumer::{self, ClaimStats, ConsumerOptions};
use archivist_engine::group::{ConsumerGroup, Share};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{queue, store};
use tokio_util::sync::CancellationToken;

use crate::support::{create, ToLeased};

#[tokio::test]
async fn members_get_ranks_and_a_departed_member_leaves_the_shares() {
    let (config, first) = archivist_testkit::fresh_tree("group-ranks").await;
    let second = archivist_testkit::another_session(&config).await;
    let mut a = ConsumerGroup::join(&first, JobState::Pending, "a", 2)
        .await
        .expect("a joins");
    let mut b = ConsumerGroup::join(&second, JobState::Pending, "b", 2)
        .await
        .expect("b joins");
    let mut both = false;
    for _ in 0..100 {
        both = a.share(&first).await == Share { rank: 0, count: 2 }
            && b.share(&second).await == Share { rank: 1, count: 2 };
        if both {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(both, "a and b see each other, ranked by name");
    let members = store::children(&first, &paths::consumers(JobState::Pending))
        .await
        .unwrap();
    assert_eq!(members.len(), 2, "{members:?}");

    // Its session ends when its last handle goes (or at the latest after the timeout).
    drop(b);
    drop(second);
    let mut alone = false;
    for _ in 0..200 {
        alone = a.share(&first).await == Share { rank: 0, count: 1 };
        if alone {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        alone,
        "b's node went with its session and a owns the whole queue"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_consumers_split_the_queue_and_every_job_is_claimed_once() {
    let (config, session) = archivist_testkit::fresh_tree("group-split").await;
    let jobs = 300;
    for i in 0..jobs {
        create(&session, (i % 3) as i64, 1_700_000_000_000 + i as i64).await;
    }
    let stats = Arc::new(ClaimStats::default());
    let shutdown = CancellationToken::new();
    let mut handles = Vec::new();
    for k in 0..4 {
        let s = archivist_testkit::another_session(&config).await;
        let options = ConsumerOptions::new(JobState::Pending, format!("split-{k}"))
            .with_concurrency(8)
            .with_poll_interval(Duration::from_millis(100))
            .with_stats(stats.clone());
        let stop = shutdown.clone();
        handles.push(tokio::spawn(async move {
            consumer::run(&s, options, Arc::new(ToLeased), stop).await
        }));
    }
    let done = archivist_testkit::eventually(Duration::from_secs(60), || {
        let session = &session;
        async move { queue::len(session, JobState::Leased).await.unwrap_or(0) == jobs }
    })
    .await;
    shutdown.cancel();
    for h in handles {
        h.await
            .expect("consumer task")
            .expect("consumer ends cleanly");
    }
    assert!(done, "all {jobs} jobs leased");
    assert_eq!(
        stats.claimed(),
        jobs as u64,
        "each job claimed exactly once"
    );
    assert_eq!(queue::len(&session, JobState::Pending).await.unwrap(), 0);
    // Without shares, four consumers racing for the head lose about as many lock races as
    // they win; with them, only the odd race at start-up or when a share runs short.
    assert!(
        stats.busy() < jobs as u64 / 4,
        "{} of {} lock attempts lost to another consumer",
        stats.busy(),
        stats.busy() + stats.claimed()
    );
}
