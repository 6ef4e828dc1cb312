use archivist_engine::schema::paths;
use archivist_engine::store;
use archivist_planner::Planner;
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test]
async fn episodes_and_clips_are_chosen_by_priority_then_newest_initial_curation() {
    for (_config, session, db) in stores("select-order").await {
        let low = put_episode(&session, &db, 1, 1, BASE_MS + 9 * DAY_MS, false).await;
        let high_old = put_episode(&session, &db, 2, 5, BASE_MS, false).await;
        let high_new = put_episode(&session, &db, 3, 5, BASE_MS + DAY_MS, false).await;
        let negative = put_episode(&session, &db, 4, -2, BASE_MS + 20 * DAY_MS, false).await;
        let c1 = put_clip(&session, &db, 1, 0, BASE_MS, false).await;
        let c2 = put_clip(&session, &db, 2, 3, BASE_MS, false).await;
        let c3 = put_clip(&session, &db, 3, 0, BASE_MS + DAY_MS, false).await;
        let c4 = put_clip(&session, &db, 4, 3, BASE_MS + DAY_MS, false).await;
        // 3 slots: the loop ends with 4 waiting items.
        register_researcher(&session, "r1", 3).await;
        let mut planner = Planner::start(&session, &db, settings(), "test-planner")
            .await
            .unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        let episodes: Vec<&str> = report.created.iter().map(|j| j.episode.as_str()).collect();
        assert_eq!(
            episodes,
            [
                high_new.as_str(),
                high_old.as_str(),
                low.as_str(),
                negative.as_str()
            ]
        );
        for job in &report.created {
            assert_eq!(
                job.clips,
                [c4.clone(), c2.clone(), c3.clone(), c1.clone()],
                "clip order in {}",
                job.id
            );
        }
        assert_eq!(report.created[0].priority, 5);
        assert_eq!(report.created[0].curated_ms, BASE_MS + DAY_MS);
        // The pending queue serves them in the same order.
        let queue = store::children(
            &session,
            &paths::queue(archivist_engine::schema::JobState::Pending),
        )
        .await
        .unwrap();
        let served: Vec<String> = queue
            .iter()
            .map(|n| n.rsplit('-').next().unwrap().to_string())
            .collect();
        let created: Vec<String> = report.created.iter().map(|j| j.id.clone()).collect();
        assert_eq!(served, created);
        assert!(inconsistencies(&session).await.is_empty());
    }
}

#[tokio::test]
async fn the_max_clip_limit_splits_an_episode_into_several_items() {
    for (_config, session, db) in stores("select-limit").await {
        let e = put_episode(&session, &db, 1, 0, BASE_MS, false).await;
        for n in 1..=5 {
            put_clip(&session, &db, n, n as i64, BASE_MS, false).await;
        }
        register_researcher(&session, "r1", 5).await;
        let mut planner = Planner::start(&session, &db, settings().with_max_clips(2), "p")
            .await
            .unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        let clips: Vec<Vec<String>> = report.created.iter().map(|j| j.clips.clone()).collect();
        assert_eq!(
            clips,
            [
                vec![paths::clip_id(5), paths::clip_id(4)],
                vec![paths::clip_id(3), paths::clip_id(2)],
                vec![paths::clip_id(1)]
            ]
        );
        assert!(report.created.iter().all(|j| j.episode == e));
        assert_eq!(report.stop, archivist_planner::Stop::NoWork);
    }
}

#[tokio::test]
async fn complete_episodes_and_leased_clips_are_excluded() {
    for (_config, session, db) in stores("select-exclude").await {
        let complete = put_episode(&session, &db, 1, 9, BASE_MS, false).await;
        let partly_leased = put_episode(&session, &db, 2, 5, BASE_MS, false).await;
        let all_leased = put_episode(&session, &db, 3, 7, BASE_MS, false).await;
        let last = put_episode(&session, &db, 4, 1, BASE_MS, false).await;
        for n in 1..=4 {
            put_clip(&session, &db, n, 0, BASE_MS + n as i64, false).await;
        }
        put_research(&session, &db, &complete, &[1, 2, 3, 4]).await;
        put_research(&session, &db, &partly_leased, &[4]).await;
        put_lease(&session, "j0000090001", &partly_leased, &[3, 2], 600_000).await;
        put_lease(&session, "j0000090002", &all_leased, &[1, 2, 3, 4], 600_000).await;
        let mut planner = Planner::start(&session, &db, settings(), "p")
            .await
            .unwrap();
        let first = planner.pick().await.unwrap().expect("work left");
        assert_eq!(first.episode, partly_leased);
        assert_eq!(first.clips, [paths::clip_id(1)]);
        let job = planner.create(&first).await.unwrap();
        assert_eq!(job.clips, [paths::clip_id(1)]);
        let second = planner.pick().await.unwrap().expect("work left");
        assert_eq!(second.episode, last);
        assert_eq!(second.clips.len(), 4);
        planner.create(&second).await.unwrap();
        assert_eq!(
            planner.pick().await.unwrap(),
            None,
            "everything researched or leased"
        );
    }
}

#[tokio::test]
async fn expired_leases_count_as_no_lease() {
    for (_config, session, db) in stores("select-expired").await {
        let expired = put_episode(&session, &db, 1, 9, BASE_MS, false).await;
        let live = put_episode(&session, &db, 2, 8, BASE_MS, false).await;
        put_clip(&session, &db, 1, 0, BASE_MS, false).await;
        put_clip(&session, &db, 2, 0, BASE_MS, false).await;
        put_lease(&session, "j0000090001", &expired, &[1, 2], 1).await;
        put_lease(&session, "j0000090002", &live, &[1, 2], 600_000).await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let mut planner = Planner::start(&session, &db, settings(), "p")
            .await
            .unwrap();
        let pick = planner
            .pick()
            .await
            .unwrap()
            .expect("the expired lease frees its clips");
        assert_eq!(pick.episode, expired);
        assert_eq!(pick.clips.len(), 2);
        planner.create(&pick).await.unwrap();
        assert_eq!(
            planner.pick().await.unwrap(),
            None,
            "the live lease still holds"
        );
        // A lease that expires while the planner runs frees its clips too.
        put_lease(&session, "j0000090002", &live, &[1, 2], 300).await;
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        let pick = planner
            .pick()
            .await
            .unwrap()
            .expect("reclaimed after expiry");
        assert_eq!(pick.episode, live);
    }
}

#[tokio::test]
async fn held_episodes_and_clips_are_skipped() {
    for (_config, session, db) in stores("select-held").await {
        let held = put_episode(&session, &db, 1, 9, BASE_MS, true).await;
        let free = put_episode(&session, &db, 2, 1, BASE_MS, false).await;
        put_clip(&session, &db, 1, 9, BASE_MS, true).await;
        let c2 = put_clip(&session, &db, 2, 0, BASE_MS, false).await;
        let mut planner = Planner::start(&session, &db, settings(), "p")
            .await
            .unwrap();
        let pick = planner.pick().await.unwrap().unwrap();
        assert_eq!(
            (pick.episode.as_str(), pick.clips.clone()),
            (free.as_str(), vec![c2.clone()])
        );
        // Releasing the hold (a catalog write) is seen through the watch.
        put_episode(&session, &db, 1, 9, BASE_MS, false).await;
        put_clip(&session, &db, 1, 9, BASE_MS, false).await;
        let pick = planner.pick().await.unwrap().unwrap();
        assert_eq!(pick.episode, held);
        assert_eq!(pick.clips, [paths::clip_id(1), c2]);
    }
}

#[tokio::test]
async fn the_index_follows_the_tree_through_its_watches() {
    for (_config, session, db) in stores("select-watch").await {
        let first = put_episode(&session, &db, 1, 1, BASE_MS, false).await;
        put_clip(&session, &db, 1, 0, BASE_MS, false).await;
        let mut planner = Planner::start(&session, &db, settings(), "p")
            .await
            .unwrap();
        assert_eq!(planner.pick().await.unwrap().unwrap().episode, first);
        // From another session, as a curator would.
        let other = archivist_testkit::another_session(&_config).await;
        let urgent = put_episode(&other, &db, 2, 50, BASE_MS, false).await;
        assert_eq!(planner.pick().await.unwrap().unwrap().episode, urgent);
        put_research(&other, &db, &urgent, &[1]).await;
        assert_eq!(planner.pick().await.unwrap().unwrap().episode, first);
        put_lease(&other, "j0000090001", &first, &[1], 600_000).await;
        assert_eq!(planner.pick().await.unwrap(), None);
        store::delete_if_present(&other, &paths::lease("j0000090001"))
            .await
            .unwrap();
        assert_eq!(planner.pick().await.unwrap().unwrap().episode, first);
        // A new clip is unresearched everywhere: the urgent episode has work again.
        let c2 = put_clip(&other, &db, 2, 5, BASE_MS, false).await;
        let pick = planner.pick().await.unwrap().unwrap();
        assert_eq!(
            (pick.episode.as_str(), pick.clips),
            (urgent.as_str(), vec![c2.clone()])
        );
        // Its research undone (a repair), the pair is work again.
        put_research(&other, &db, &urgent, &[]).await;
        let pick = planner.pick().await.unwrap().unwrap();
        assert_eq!(
            (pick.episode.as_str(), pick.clips),
            (urgent.as_str(), vec![c2, paths::clip_id(1)])
        );
    }
}

#[tokio::test]
async fn clips_of_failed_and_held_jobs_are_not_planned_again_without_a_lease() {
    use archivist_engine::ops::{self, Op};
    use archivist_engine::schema::JobState;
    use archivist_engine::transition::Transition;
    for (_config, session, db) in stores("select-failed").await {
        let e = put_episode(&session, &db, 1, 0, BASE_MS, false).await;
        put_clip(&session, &db, 1, 0, BASE_MS, false).await;
        put_clip(&session, &db, 2, 0, BASE_MS, false).await;
        let mut planner = Planner::start(&session, &db, settings().with_max_clips(1), "p")
            .await
            .unwrap();
        let first = planner.pick().await.unwrap().unwrap();
        let job = planner.create(&first).await.unwrap();
        assert_eq!(job.clips, [paths::clip_id(1)]);
        // The researcher fails it: the lease goes, the job waits for an operator.
        let (current, version) = archivist_engine::jobs::read(&session, &job.id)
            .await
            .unwrap();
        Transition::new(
            archivist_engine::transition::Role::Researcher,
            &current,
            version,
            JobState::Failed,
        )
        .failed()
        .with_ops([Op::Delete {
            path: paths::lease(&job.id),
            version: None,
        }])
        .commit(&session)
        .await
        .unwrap();
        let pick = planner.pick().await.unwrap().unwrap();
        assert_eq!(
            (pick.episode.as_str(), pick.clips),
            (e.as_str(), vec![paths::clip_id(2)])
        );
        // An operator deletes the failed job: its clips can be planned again.
        ops::commit(
            &session,
            &[
                Op::Delete {
                    path: paths::queue_entry(JobState::Failed, &current.queue_entry().name()),
                    version: None,
                },
                Op::Delete {
                    path: paths::job(&job.id),
                    version: None,
                },
            ],
        )
        .await
        .unwrap();
        let pick = planner.pick().await.unwrap().unwrap();
        assert_eq!(pick.clips, [paths::clip_id(1)]);
    }
}
