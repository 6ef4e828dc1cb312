use std::collections::HashSet;
use std::time::Duration;

use archivist_engine::consumer;
use archivist_engine::member::Identity;
use archivist_engine::schema::JobState;
use archivist_engine::transition::{LockAction, Transition};
use archivist_engine::Session;
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// Takes pending jobs as a researcher would (pending -> leased; the lease stays), so the
/// planners keep adding work until every pair is leased.
async fn fake_researcher(session: Session, stop: CancellationToken) -> usize {
    let mut taken = 0;
    while !stop.is_cancelled() {
        match consumer::claim_next(&session, JobState::Pending, "fake", &HashSet::new(), &stop)
            .await
        {
            Ok(Some(claimed)) => {
                Transition::new(
                    archivist_engine::transition::Role::Researcher,
                    &claimed.job,
                    claimed.version,
                    JobState::Leased,
                )
                .lock(LockAction::Release(claimed.lock))
                .commit(&session)
                .await
                .unwrap();
                taken += 1;
            }
            Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("claim: {e}"),
        }
    }
    taken
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_planners_never_lease_the_same_pair_twice() {
    for (config, session, db) in stores("two-planners").await {
        let mut episodes = Vec::new();
        for n in 1..=30 {
            episodes.push(
                put_episode(&session, &db, n, (n % 3) as i64, BASE_MS + n as i64, false).await,
            );
        }
        let mut clips = Vec::new();
        for n in 1..=6 {
            clips.push(put_clip(&session, &db, n, 0, BASE_MS, false).await);
        }
        let researcher = archivist_testkit::another_session(&config).await;
        register_researcher(&researcher, "r1", 2).await;
        let settings = settings().with_max_clips(4);
        let stop_a = CancellationToken::new();
        let stop_b = CancellationToken::new();
        let a = tokio::spawn({
            let (config, settings, stop, db) =
                (config.clone(), settings.clone(), stop_a.clone(), db.clone());
            async move {
                archivist_planner::run(
                    &config,
                    &db,
                    settings,
                    Identity::named("planner", "pa"),
                    stop,
                )
                .await
            }
        });
        let b = tokio::spawn({
            let (config, settings, stop, db) =
                (config.clone(), settings.clone(), stop_b.clone(), db.clone());
            async move {
                archivist_planner::run(
                    &config,
                    &db,
                    settings,
                    Identity::named("planner", "pb"),
                    stop,
                )
                .await
            }
        });
        let stop_consumer = CancellationToken::new();
        let consumer = tokio::spawn(fake_researcher(researcher.clone(), stop_consumer.clone()));
        // Halfway, the leader goes away; the other planner takes over.
        let halfway = archivist_testkit::eventually(Duration::from_secs(30), || async {
            planned_pairs(&session).await.len() >= 60
        })
        .await;
        assert!(halfway, "planning never got going");
        // Stop whichever planner leads (the creator of the work so far).
        let leader = creators(&session).await;
        assert_eq!(leader.len(), 1, "only the leader plans: {leader:?}");
        let (stop_first, first, stop_second, second) = if leader.contains("pa") {
            (stop_a, a, stop_b, b)
        } else {
            (stop_b, b, stop_a, a)
        };
        stop_first.cancel();
        first.await.unwrap().unwrap();
        let expected = all_pairs(&episodes, &clips);
        let done = archivist_testkit::eventually(Duration::from_secs(60), || async {
            planned_pairs(&session).await.len() == expected.len()
        })
        .await;
        let pairs = planned_pairs(&session).await;
        stop_second.cancel();
        stop_consumer.cancel();
        second.await.unwrap().unwrap();
        let taken = consumer.await.unwrap();
        assert!(
            done,
            "only {} of {} pairs planned",
            pairs.len(),
            expected.len()
        );
        let doubled: Vec<_> = pairs.iter().filter(|(_, n)| **n > 1).collect();
        assert!(doubled.is_empty(), "pairs planned twice: {doubled:?}");
        assert_eq!(
            pairs
                .keys()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>(),
            expected
        );
        assert!(taken > 10, "the fake researcher took {taken} items");
        assert!(
            inconsistencies(&session).await.is_empty(),
            "{:?}",
            inconsistencies(&session).await
        );
        let both = creators(&session).await;
        assert_eq!(both.len(), 2, "the second planner took over: {both:?}");
    }
}

async fn creators(session: &Session) -> std::collections::BTreeSet<String> {
    all_jobs(session)
        .await
        .into_iter()
        .filter_map(|(j, _)| j.events.first().map(|e| e.by.clone()))
        .collect()
}
