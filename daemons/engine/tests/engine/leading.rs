//! "Run this role while leading": the engine's one wait-to-lead loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use archivist_engine::leader::run_while_leading;
use archivist_engine::schema::paths;
use archivist_engine::{store, EngineError};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_stops_when_leadership_goes_and_the_next_candidate_takes_over() {
    let (config, first) = archivist_testkit::fresh_tree("leading-handover").await;
    let second = archivist_testkit::another_session(&config).await;
    let shutdown = CancellationToken::new();
    let runs: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let ended = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, session) in [first.clone(), second.clone()].into_iter().enumerate() {
        let shutdown = shutdown.clone();
        let runs = runs.clone();
        let ended = ended.clone();
        tasks.push(tokio::spawn(async move {
            run_while_leading(&session, "test-role", b"", &shutdown, |leading| {
                let runs = runs.clone();
                let ended = ended.clone();
                async move {
                    runs[i].fetch_add(1, Ordering::SeqCst);
                    leading.cancelled().await;
                    ended.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
            })
            .await
        }));
        // The first joins first and leads.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(
        runs[0].load(Ordering::SeqCst),
        1,
        "the first candidate leads"
    );
    assert_eq!(
        runs[1].load(Ordering::SeqCst),
        0,
        "only one leads at a time"
    );
    // The leader's node goes (as when an operator deletes it): its work is told to stop
    // and the next candidate leads.
    let dir = paths::election("test-role");
    let mut nodes = store::children(&first, &dir).await.unwrap();
    nodes.sort_by_key(|n| n.rsplit('_').next().unwrap_or_default().to_string());
    store::delete_if_present(&first, &format!("{dir}/{}", nodes[0]))
        .await
        .unwrap();
    assert!(
        archivist_testkit::eventually(Duration::from_secs(5), || async {
            ended.load(Ordering::SeqCst) == 1 && runs[1].load(Ordering::SeqCst) == 1
        })
        .await,
        "ended {} runs {:?}",
        ended.load(Ordering::SeqCst),
        runs.iter()
            .map(|r| r.load(Ordering::SeqCst))
            .collect::<Vec<_>>()
    );
    shutdown.cancel();
    for task in tasks {
        let outcome = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("stops at shutdown")
            .unwrap();
        // The first candidate's node was deleted under it: it is told to rejoin.
        let _ = outcome;
    }
    assert_eq!(
        ended.load(Ordering::SeqCst),
        2,
        "shutdown stops the new leader's work"
    );
}

#[tokio::test]
async fn failing_work_is_run_again_after_a_growing_pause_not_at_once() {
    let (_config, session) = archivist_testkit::fresh_tree("leading-backoff").await;
    let shutdown = CancellationToken::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let stop = shutdown.clone();
    let counted = calls.clone();
    let task = tokio::spawn(async move {
        run_while_leading(&session, "test-role", b"", &stop, |_leading| {
            let calls = counted.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(EngineError::Config("the work cannot start".into()))
            }
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    shutdown.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("stops at shutdown")
        .unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    let calls = calls.load(Ordering::SeqCst);
    // 200 ms, 400 ms, 800 ms pauses: three or four runs in a second, never a spin.
    assert!((2..=4).contains(&calls), "{calls} runs in one second");
}

/// Outside 17i G1: a persistent node made by hand in the election, sorting first, kept
/// every real candidate from leading for ever (it has no session to lose). Only ephemeral
/// nodes are candidates: the real candidate leads, and `leader_node` names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_persistent_candidate_does_not_block_the_election() {
    use archivist_engine::leader;
    use zookeeper_client as zk;
    let (_config, session) = archivist_testkit::fresh_tree("leading-ghost").await;
    let dir = paths::election("test-role");
    let persistent = session.create_options(zk::CreateMode::Persistent);
    session.client().mkdir(&dir, &persistent).await.unwrap();
    let ghost = format!("{dir}/n_0_0000000000");
    session
        .client()
        .create(&ghost, b"name: ghost", &persistent)
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let task = {
        let (session, shutdown, runs) = (session.clone(), shutdown.clone(), runs.clone());
        tokio::spawn(async move {
            run_while_leading(&session, "test-role", b"", &shutdown, |leading| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    leading.cancelled().await;
                    Ok(())
                }
            })
            .await
        })
    };
    assert!(
        archivist_testkit::eventually(Duration::from_secs(5), || async {
            runs.load(Ordering::SeqCst) == 1
        })
        .await,
        "the real candidate leads despite the persistent node sorting first"
    );
    let leading = leader::leader_node(&session, "test-role").await.unwrap();
    assert!(
        leading.as_deref().is_some_and(|n| n != "n_0_0000000000"),
        "the ghost is not named the leader: {leading:?}"
    );
    assert_eq!(
        leader::candidates(&session, "test-role")
            .await
            .unwrap()
            .len(),
        1,
        "only the ephemeral node is a candidate"
    );
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
}
