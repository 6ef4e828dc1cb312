use std::time::Duration;

use archivist_engine::schema::records::LeaseRecord;
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{jobs, store};
use archivist_planner::expire::REASON;
use archivist_planner::Planner;
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test]
async fn work_and_lease_are_created_together_with_zookeeper_time() {
    for (_config, session, db) in stores("expiry-lease").await {
        let e = put_episode(&session, &db, 1, 3, BASE_MS, false).await;
        put_clip(&session, &db, 1, 0, BASE_MS, false).await;
        let settings = settings()
            .with_lease_duration(Duration::from_secs(42))
            .with_work_item_ttl(Duration::from_secs(41));
        let mut planner = Planner::start(&session, &db, settings, "p").await.unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        let job = &report.created[0];
        let (lease, stat) = store::read_required::<LeaseRecord>(&session, &paths::lease(&job.id))
            .await
            .unwrap();
        assert_eq!(lease.job, job.id);
        assert_eq!(lease.episode, e);
        assert_eq!(lease.clips, job.clips);
        assert_eq!(lease.duration_ms, 42_000);
        assert_eq!(lease.holder, None);
        let (_, job_stat) = store::read_required::<archivist_engine::schema::records::JobRecord>(
            &session,
            &paths::job(&job.id),
        )
        .await
        .unwrap();
        assert_eq!(
            stat.czxid, job_stat.czxid,
            "lease and job were created by the same multi"
        );
    }
}

/// One episode and one clip planned by a planner with a 400 ms work-item TTL (and a
/// 60 s lease): the planner and the waiting job it created.
async fn one_waiting_item(
    session: &archivist_engine::Session,
    db: &archivist_db::Database,
) -> (Planner, archivist_engine::schema::records::JobRecord) {
    put_episode(session, db, 1, 0, BASE_MS, false).await;
    put_clip(session, db, 1, 0, BASE_MS, false).await;
    let settings = settings()
        .with_lease_duration(Duration::from_secs(60))
        .with_work_item_ttl(Duration::from_millis(400));
    let mut planner = Planner::start(session, db, settings, "p").await.unwrap();
    let first = planner
        .round(&CancellationToken::new())
        .await
        .unwrap()
        .created
        .remove(0);
    (planner, first)
}

#[tokio::test]
async fn a_waiting_item_past_its_ttl_is_expired_and_its_lease_released() {
    for (_config, session, db) in stores("expiry-ttl").await {
        let (mut planner, first) = one_waiting_item(&session, &db).await;
        // Before the TTL: nothing expires, and the leased clips are not planned again.
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert!(report.expired.is_empty() && report.created.is_empty());
        tokio::time::sleep(Duration::from_millis(600)).await;
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert_eq!(report.expired, std::slice::from_ref(&first.id));
        let (job, _) = jobs::read(&session, &first.id).await.unwrap();
        assert_eq!(job.status, JobState::Expired);
        assert_eq!(job.message.as_deref(), Some(REASON));
        assert!(store::exists(&session, &paths::lease(&first.id))
            .await
            .unwrap()
            .is_none());
        // The released clips are planned again at once, in a new item with a new lease.
        assert_eq!(report.created.len(), 1);
        assert_eq!(report.created[0].clips, first.clips);
        assert_ne!(report.created[0].id, first.id);
        assert!(inconsistencies(&session).await.is_empty());
    }
}

#[tokio::test]
async fn a_waiting_item_being_claimed_is_left_alone() {
    for (_config, session, db) in stores("expiry-locked").await {
        put_episode(&session, &db, 1, 0, BASE_MS, false).await;
        put_clip(&session, &db, 1, 0, BASE_MS, false).await;
        let settings = settings().with_work_item_ttl(Duration::from_millis(100));
        let mut planner = Planner::start(&session, &db, settings, "p").await.unwrap();
        let first = planner
            .round(&CancellationToken::new())
            .await
            .unwrap()
            .created
            .remove(0);
        let other = archivist_testkit::another_session(&_config).await;
        let lock = archivist_engine::lock::JobLock::try_acquire(&other, &first.id, "researcher")
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let expired = archivist_planner::expire::expire_waiting(&session, 100, "p")
            .await
            .unwrap();
        assert!(expired.is_empty());
        assert_eq!(
            jobs::read(&session, &first.id).await.unwrap().0.status,
            JobState::Pending
        );
        lock.release(&other).await.unwrap();
        let expired = archivist_planner::expire::expire_waiting(&session, 100, "p")
            .await
            .unwrap();
        assert_eq!(expired, [first.id]);
    }
}

/// A waiting job whose record does not decode (`{{{{` written by hand) expires by its
/// node's age like any other: the TTL step writes the record the tree still knows
/// (episode and clips from its lease, priority and curation from its queue entry) with a
/// message saying the record did not decode, revokes the lease, and the pairs are
/// planned again. Before, the step failed to read it on every pass ("skipped; the next
/// pass retries") and it waited for ever.
#[tokio::test]
async fn a_waiting_item_whose_record_does_not_decode_expires_by_its_node_age() {
    for (_config, session, db) in stores("expiry-undecodable").await {
        let (mut planner, first) = one_waiting_item(&session, &db).await;
        write(&session, &paths::job(&first.id), b"{{{{").await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert_eq!(report.expired, std::slice::from_ref(&first.id));
        let (job, _) = jobs::read(&session, &first.id).await.unwrap();
        assert_eq!(job.status, JobState::Expired);
        let message = job.message.clone().unwrap_or_default();
        assert!(
            message.starts_with(REASON) && message.contains(archivist_engine::lease::UNDECODABLE),
            "{message}"
        );
        assert_eq!(
            job.episode,
            episode_id(1),
            "the episode comes from the lease"
        );
        assert_eq!(job.clips, first.clips);
        assert_eq!(
            job.queue_entry(),
            first.queue_entry(),
            "priority and curation come from the queue entry"
        );
        assert_eq!(
            archivist_testkit::queues_holding(&session, &first.id).await,
            vec![JobState::Expired]
        );
        assert!(store::exists(&session, &paths::lease(&first.id))
            .await
            .unwrap()
            .is_none());
        assert_eq!(report.created.len(), 1, "its pairs are planned again");
        assert_eq!(report.created[0].clips, first.clips);
        assert!(inconsistencies(&session).await.is_empty());
    }
}
